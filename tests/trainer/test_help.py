"""The trainer's commands name themselves as they are run (`python -m trainer.X`), not by file name.

argparse's default `prog` is the script's base name: `train.py`, `weights.py`, `export_lm.py`, which
no one can type from the repository root. Each `--help` here must start with the module form.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("module", "argv", "usage"),
    [
        ("trainer.train", ["--help"], "usage: python -m trainer.train [-h]"),
        ("trainer.weights", ["--help"], "usage: python -m trainer.weights [-h] {export,average}"),
        ("trainer.weights", ["export", "--help"], "usage: python -m trainer.weights export [-h]"),
        ("trainer.export_lm", ["--help"], "usage: python -m trainer.export_lm [-h]"),
    ],
)
def test_help_names_the_module(module, argv, usage, capsys):
    import importlib

    mod = importlib.import_module(module)
    entry = mod.parse_args if module == "trainer.train" else mod.main
    with pytest.raises(SystemExit) as stop:
        entry(argv)
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith(usage)
