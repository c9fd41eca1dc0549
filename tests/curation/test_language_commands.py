"""`derive-language`, `calibrate-lid` and `import-fineweb2` as a user runs them (issue 54): what they
may write, and how they read their reference files. Real text (Leipzig sentences), the real lid.176.

- Defect 1, the class: no command writes into the project's shipped configs unless `--out` names the
  file and `--force` is given; what it writes is validated first and goes through a temporary name; a
  table with no language is refused, not written. Tried on every shipped file, with each command.
- Reading files: a FIFO (any non-regular file) never blocks a command; a reference is streamed with
  a bounded line length and count; a `.jsonl` reference goes through the checked JSON reader; the
  FineWeb-2 importer says which rows it left out; a written settings file is what the loader reads next.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tracemalloc

import pytest

from core.errors import ConfigError, InputError
from curation import languages as ls
from curation.cli import main
from curation.config import LangIdConfig
from curation.filters.langid import LanguageIdentifier
from curation.languages.fineweb2 import _Fw2Repo
from testkit.shared_data import REPO_ROOT, shared_data_dir

LEIPZIG = shared_data_dir() / "langid" / "leipzig" / "sentences"
SHIPPED_FILES = sorted(p for p in ls.SHIPPED.rglob("*.yaml") if p.is_file())
LANGUAGE_FILES = [p for p in sorted(ls.FOLDER.glob("*.yaml")) if p.stem != ls.DEFAULT]
LID176_TABLE = ls.FOLDER / ls.MODELS / "lid176.yaml"
LID = LanguageIdentifier(LangIdConfig(languages=()))


def _leipzig(iso: str, n: int | None = None) -> list[str]:
    lines = [s.strip() for s in (LEIPZIG / f"{iso}.txt").read_text("utf-8").splitlines() if s.strip()]
    return lines[:n]


def _digest() -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in SHIPPED_FILES}


@pytest.fixture(scope="module")
def refs(tmp_path_factory):
    """A calibrate-lid folder of three languages, as in the issue (the shipped table has 67)."""
    d = tmp_path_factory.mktemp("refs")
    for iso in ("sl", "fi", "de"):
        (d / f"{iso}.txt").write_text("\n".join(_leipzig(iso, 120)), "utf-8")
    return d


@pytest.fixture(scope="module")
def shipped_before():
    return _digest()


# ---------------------------------------------------------------- defect 1: never into configs/


def test_shipped_files_are_found():
    assert LID176_TABLE in SHIPPED_FILES and len(LANGUAGE_FILES) >= 50
    assert {p.parent for p in SHIPPED_FILES} >= {ls.SHIPPED, ls.FOLDER, ls.FOLDER / ls.MODELS}


@pytest.mark.parametrize("path", LANGUAGE_FILES, ids=lambda p: p.stem)
def test_derive_language_never_replaces_a_shipped_file_without_force(path, capsys):
    """The documented `derive-language --out configs/languages/deu_Latn.yaml` silently replaced it."""
    before = path.read_bytes()
    args = ["derive-language", "--lang", path.stem, "--reference", str(LEIPZIG / "de.txt"), "--out"]
    for out in (path, path.parent / ".." / "languages" / path.name):
        assert main([*args, str(out), "--lines-per-doc", "20"]) == 2
        err = capsys.readouterr().err
        assert "is a shipped config of this project" in err and "--force" in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda p: str(p.relative_to(ls.SHIPPED)))
def test_no_command_writes_any_shipped_file(path, refs, capsys):
    """Every shipped YAML file, as `--out` of each command that writes one: refused before any work."""
    before = path.read_bytes()
    assert main(["calibrate-lid", "--reference-dir", str(refs), "--out", str(path)]) == 2
    assert "is a shipped config of this project" in capsys.readouterr().err
    lang = path.stem if path.parent == ls.FOLDER and path.stem != ls.DEFAULT else "deu_Latn"
    code = main(
        ["derive-language", "--lang", lang, "--reference", str(LEIPZIG / "de.txt"), "--out", str(path)]
    )
    assert code == 2
    capsys.readouterr()
    assert path.read_bytes() == before


def test_calibrate_lid_needs_out_and_refuses_the_shipped_table_through_a_link(refs, tmp_path, capsys):
    before = LID176_TABLE.read_bytes()
    with pytest.raises(SystemExit) as e:  # argparse: --out is required, there is no shipped default
        main(["calibrate-lid", "--reference-dir", str(refs)])
    assert e.value.code == 2 and "--out" in capsys.readouterr().err
    link = tmp_path / "models"
    link.symlink_to(LID176_TABLE.parent)  # a folder of one's own that is the shipped one
    assert main(["calibrate-lid", "--reference-dir", str(refs), "--out", str(link / "lid176.yaml")]) == 2
    assert "shipped config" in capsys.readouterr().err
    assert LID176_TABLE.read_bytes() == before


def test_import_fineweb2_needs_out_and_force_for_the_shipped_folder(tmp_path, capsys):
    before = _digest()
    for out in (ls.FOLDER, ls.SHIPPED, ls.FOLDER / "new"):
        assert main(["import-fineweb2", str(tmp_path), "--out", str(out)]) == 2
        assert "is a shipped config of this project" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["import-fineweb2", str(tmp_path)])
    assert _digest() == before


def test_force_is_what_allows_a_shipped_path(tmp_path):
    assert ls.check_out(LID176_TABLE, force=True) == LID176_TABLE
    assert ls.check_out(tmp_path / "lid176.yaml", force=False) == tmp_path / "lid176.yaml"
    with pytest.raises(InputError, match="shipped config"):
        ls.check_out(REPO_ROOT / "configs" / "extract.yaml", force=False)


def test_calibrate_lid_writes_its_own_folder_and_the_loader_reads_it(refs, tmp_path, capsys, shipped_before):
    out = tmp_path / "mine" / "models" / "lid176.yaml"
    assert main(["calibrate-lid", "--reference-dir", str(refs), "--out", str(out)]) == 0
    assert "3 language codes from 3 files" in capsys.readouterr().out
    assert set(ls.model_thresholds("lid176", tmp_path / "mine")) == {"slv_Latn", "fin_Latn", "deu_Latn"}
    assert [p.name for p in out.parent.iterdir()] == ["lid176.yaml"]  # no temporary file left
    assert _digest() == shipped_before


def test_a_table_with_no_language_is_refused_not_written(tmp_path, capsys):
    """When no language reached 20 identified lines the file was left as `thresholds:`, and every run
    of the multilingual preset was refused until it was restored."""
    d = tmp_path / "refs"
    d.mkdir()
    (d / "de.txt").write_text("\n".join(_leipzig("fr", 100)), "utf-8")  # French, named German
    out = tmp_path / "models" / "lid176.yaml"
    assert main(["calibrate-lid", "--reference-dir", str(d), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no language had 20 lines identified as it" in err and "nothing written" in err
    assert not out.exists()
    with pytest.raises(ConfigError, match="thresholds: no language"):
        ls.write_model_thresholds({}, "lid176", "src", out, "how")
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_a_bad_table_is_refused_before_the_old_one_is_touched(tmp_path):
    out = tmp_path / "lid176.yaml"
    ls.write_model_thresholds({"slv_Latn": (0.41, 500)}, "lid176", "src", out, "how")
    before = out.read_bytes()
    for table in ({"slv_Latn": (0.1, 500)}, {"eng_Latm": (0.5, 500)}, {"slv_Latn\n": (0.5, 500)}):
        with pytest.raises(ConfigError):
            ls.write_model_thresholds(table, "lid176", "src", out, "how")
        assert out.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["lid176.yaml"]


# ---------------------------------------------------------------- reading files


def _run(args: list[str], timeout: float = 180) -> subprocess.CompletedProcess:
    """A command in a process of its own: one that blocks on a FIFO is killed, not the test run."""
    return subprocess.run(
        [sys.executable, "-m", "curation", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=timeout,
    )


def test_a_fifo_in_the_reference_folder_is_skipped_not_waited_on(refs, tmp_path):
    d = tmp_path / "refs"
    d.mkdir()
    for f in refs.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    os.mkfifo(d / "fr.txt")  # named by a language, but nothing will ever write it
    (d / "nl.txt").mkdir()  # a folder named like a file
    out = tmp_path / "models" / "lid176.yaml"
    try:
        res = _run(["calibrate-lid", "--reference-dir", str(d), "--out", str(out)])
    except subprocess.TimeoutExpired:
        pytest.fail("calibrate-lid blocked on the FIFO")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "not regular files, skipped: fr.txt, nl.txt" in res.stdout
    assert set(ls.model_thresholds("lid176", tmp_path)) == {"slv_Latn", "fin_Latn", "deu_Latn"}


def test_a_fifo_as_a_reference_file_is_refused(tmp_path):
    fifo = tmp_path / "de.txt"
    os.mkfifo(fifo)
    try:
        res = _run(["derive-language", "--lang", "deu_Latn", "--reference", str(fifo)])
    except subprocess.TimeoutExpired:
        pytest.fail("derive-language blocked on the FIFO")
    assert res.returncode == 2 and "not a regular file" in res.stderr and str(fifo) in res.stderr
    with pytest.raises(InputError, match="not a regular file"):
        ls.open_regular(fifo)  # the reader itself, whoever calls it


def _peak_of_derive(ref) -> int:
    tracemalloc.start()
    try:
        s = ls.derive_from_files("deu_Latn", [ref], 20, segmenter="whitespace", lid=LID)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        assert s.lid_threshold >= 0.3 and "der" in s.stop_words


def test_derive_language_streams_its_reference(tmp_path):
    """It held the whole reference in memory, about 13x its size. Streamed, the peak of Python's own
    allocations grows by a fraction of what the reference grows by (the stop-word counter grows with
    the vocabulary, which the copies here repeat). The LID model is C++'s, not counted."""
    lines = _leipzig("de")
    ls.derive_from_files(
        "deu_Latn", [LEIPZIG / "de.txt"], 20, segmenter="whitespace", lid=LID
    )  # imports, model
    peaks, sizes = [], []
    for copies in (2, 8):
        ref = tmp_path / f"de{copies}.txt"
        ref.write_text("\n".join(s for _ in range(copies) for s in lines) + "\n", "utf-8")
        sizes.append(ref.stat().st_size)
        peaks.append(_peak_of_derive(ref))
    assert sizes[1] > 900_000
    # what grows is the LID scores, one float a line, and statistics' exact sums over them (measured
    # 0.55 bytes a byte of text); before, 13
    assert peaks[1] - peaks[0] < sizes[1] - sizes[0], (peaks, sizes)


def test_a_reference_line_and_count_are_bounded(tmp_path):
    ref = tmp_path / "de.txt"
    ref.write_text("\n".join(_leipzig("de")[:50]) + "\n" + "a" * (ls.MAX_LINE_CHARS + 1) + "\n", "utf-8")
    with pytest.raises(InputError, match=rf"{ref}:51: a line of more than 1,048,576 characters"):
        ls.read_reference([ref])
    ref.write_text("\n".join(_leipzig("de")), "utf-8")
    docs = ls.Reference([ref], 20, max_lines=100)
    assert len(list(docs)) == 5 and docs.cut and docs.lines == 100
    s = ls.derive_from_files("deu_Latn", [ref], 20, segmenter="whitespace", lid=LID, max_lines=200)
    assert "the first 200 non-empty lines" in s.source


@pytest.mark.parametrize(
    ("record", "refusal"),
    [
        ('{"text": "a", "text": "b"}', "given twice"),
        ('{"text": "a", "score": NaN}', "score"),
        ("[" * 100 + "]" * 100, "nests deeper"),
    ],
)
def test_a_jsonl_reference_is_read_by_the_checked_json_reader(tmp_path, record, refusal):
    ref = tmp_path / "de.jsonl"
    ref.write_text('{"text": "Ein Satz."}\n' + record + "\n", "utf-8")
    with pytest.raises(InputError, match=rf"{ref}:2: .*{refusal}"):
        ls.read_reference([ref])


def test_write_settings_is_what_the_loader_reads_next(tmp_path):
    """Its per-file cache was left stale: the process went on reading the file it had replaced."""
    for p in (ls.FOLDER / "default.yaml", ls.FOLDER / "slv_Latn.yaml"):
        (tmp_path / p.name).write_bytes(p.read_bytes())
    old = ls.settings_for("slv_Latn", tmp_path)
    new = old.model_copy(update={"lid_threshold": 0.77})
    ls.write_settings(new, tmp_path / "slv_Latn.yaml", "test")
    assert ls.settings_for("slv_Latn", tmp_path).lid_threshold == 0.77
    assert ls.load_settings(tmp_path / "slv_Latn.yaml").lid_threshold == 0.77


def test_the_fineweb2_importer_counts_and_reports_rows_it_leaves_out(tmp_path, caplog):
    """Rows whose word count is not all digits were skipped without a word (one could be among the
    largest languages)."""
    repo = tmp_path / "fw2"
    repo.mkdir()
    csv = 'subset,split,words\nrus_Cyrl,train,100\ndeu_Latn,train,"1,234,567"\nfra_Latn,train,12e3\n'
    csv += "cmn_Hani,train,50\ncmn_Hani_removed,train,x\nspa_Latn,test,y\n"
    (repo / "fineweb2-language-distribution.csv").write_text(csv, "utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    fw2 = _Fw2Repo(repo / ".git")
    with caplog.at_level(logging.WARNING, logger="curation.languages.fineweb2"):
        assert fw2.largest(5) == ["rus_Cyrl", "cmn_Hani"]
    assert fw2.skipped == [("deu_Latn", "1,234,567"), ("fra_Latn", "12e3")]
    assert "2 train rows left out" in caplog.text and "deu_Latn ('1,234,567')" in caplog.text


# ---------------------------------------------------------------- codes of settings files


def test_a_settings_file_or_table_entry_for_no_iso_code_is_refused(tmp_path):
    text = (
        (ls.FOLDER / "eng_Latn.yaml").read_text("utf-8").replace("language: eng_Latn", "language: eng_Latm")
    )
    (tmp_path / "eng_Latm.yaml").write_text(text, "utf-8")
    with pytest.raises(ConfigError, match=r"eng_Latm\.yaml: language: .*'Latm' is no ISO 15924 script"):
        ls.load_settings(tmp_path / "eng_Latm.yaml")
    with pytest.raises(ConfigError, match=r"--lang: .*'Latm'"):
        ls.derive_from_files("eng_Latm", [LEIPZIG / "en.txt"], lid=LID)
