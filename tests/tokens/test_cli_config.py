"""`tokenize` takes `--config FILE` and `--set key=value` like every command; its flags are aliases of
the keys (tokens/config.py) and a given flag wins. The job is replaced by a recorder: what is checked
is what the command line hands to `run_tokenize`."""

from __future__ import annotations

import pytest

import tokens.cli
from tokens.cli import main
from tokens.job import TokenizeResult


@pytest.fixture
def calls(monkeypatch):
    seen: list[dict] = []

    def record(input_dir, tokenizer, output, **kw):
        seen.append(kw)
        return TokenizeResult(output, 0, 0, 0, encoder="hf")

    monkeypatch.setattr(tokens.cli, "run_tokenize", record)
    return seen


BASE = ["tokenize", "--input", "in", "--tokenizer", "tok.json", "--output", "out", "--no-progress"]


def test_defaults_are_the_flags_defaults(calls):
    assert main(BASE) == 0
    kw = calls[0]
    assert (kw["source"], kw["select"], kw["eod_token"], kw["encoder"]) == ("default", {}, None, "auto")
    assert kw["spark"].progress is False


def test_config_file_and_set_and_flags(calls, tmp_path):
    cfg = tmp_path / "t.yaml"
    cfg.write_text('source: web\nselect: {lang: en, quality: ">= 0.5"}\nencoder: hf\n')
    assert (
        main([*BASE, "--config", str(cfg), "--set", "eod_token=<eos>", "--set", "select.lang=[en, de]"]) == 0
    )
    kw = calls[-1]
    assert (kw["source"], kw["eod_token"], kw["encoder"]) == ("web", "<eos>", "hf")
    assert kw["select"] == {"lang": ["en", "de"], "quality": ">= 0.5"}
    # a flag given wins over the file and --set; --select replaces only its own column
    argv = [
        *BASE,
        "--config",
        str(cfg),
        "--source",
        "news",
        "--select",
        "quality=>= 0.9",
        "--encoder",
        "auto",
    ]
    assert main(argv) == 0
    kw = calls[-1]
    assert (kw["source"], kw["encoder"]) == ("news", "auto")
    assert kw["select"] == {"lang": "en", "quality": ">= 0.9"}


def test_a_bad_setting_is_exit_2_naming_the_key(calls, capsys):
    assert main([*BASE, "--set", "encoder=fast"]) == 2
    assert "encoder must be one of auto, tiktoken, hf; got 'fast'" in capsys.readouterr().err
    assert main([*BASE, "--set", "sourse=web"]) == 2
    assert "unknown key sourse" in capsys.readouterr().err
    assert calls == []


@pytest.mark.parametrize("name", ["..", "a/b", "../x", "%2Fx", "a\\b", "", ".hidden", "x" * 300, "a\nb"])
def test_a_source_name_is_one_plain_folder_name(tmp_path, name):
    """--source names the folder shards/<source>/: held to core/names.py's rule for any name that
    becomes a path (issue 54), refused before anything is listed or written."""
    from core.errors import InputError
    from tokens.job import run_tokenize

    with pytest.raises(InputError, match="--source"):
        run_tokenize(str(tmp_path), "tokenizer.json", str(tmp_path / "out"), source=name)
    assert not (tmp_path / "out").exists()
