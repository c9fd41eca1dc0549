"""A trained fastText classifier folder: load it once per process, predict P(positive label) in batches.

MODEL_DIR holds `model.bin` (fastText supervised; the quality model's labels are `__label__hq` /
`__label__lq`, the toxicity model's `__label__toxic` / `__label__clean`) and `metadata.json`
(written by `train.py`: parameters, training files with sha256 and counts, fastText version,
held-out evaluation, and `model_sha256`, the hash of model.bin that names the model in output
fingerprints). Loading checks both files exist and that model.bin still has that hash, so a
folder whose model was replaced by hand is refused instead of silently mislabelled; that model.bin's
layout is one fastText can load (core/fasttext_header.py: a crafted header would otherwise crash,
hang or exhaust the process inside fastText's C++, where no error can be caught); and that
model.bin has the positive label of the kind asked for, so a quality model is never read as a
toxicity model or the other way round. `QualityModel` is the quality kind; classifiers/toxicity.py
subclasses `FastTextClassifier` for its own.

Models are cached per Python process keyed by folder and hash: a Spark executor's Python worker
is reused across tasks (spark.python.worker.reuse, on by default), so each worker loads the model
once, however many files it scores. Prediction goes through fastText's `predict(list)`, which calls
the C++ `multilinePredict` once per batch; with numpy 2 that path is safe in `fasttext-numpy2`
(its single-line `predict` wraps results with `np.asarray`, the upstream 0.9 wheels' `copy=False`
fails), and we only read the returned float32 arrays.

Every JSON file of every model folder (this metadata.json, the ensemble's and the buckets' model
files, the LM's metadata) is read by `read_model_json` / `parse_model_json`: core/safe_json.py's
checked reader (bounded size and depth, finite numbers, int64 integers, no duplicate keys), with its
errors as ModelError; each reader then checks the fields of its own format.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from classifiers.text import LABEL_HIGH, fasttext_line
from core.errors import InputError
from core.fasttext_header import FastTextFileError, check_fasttext_file
from core.files import sha256_file
from core.safe_json import MAX_BYTES, JSONFileError, loads_checked

MODEL_FILE = "model.bin"
METADATA_FILE = "metadata.json"

_MODELS: dict[tuple[type, str, str], Any] = {}


class ModelError(InputError):
    """A model folder is missing, incomplete or inconsistent; the message names the path."""


def read_metadata(model_dir: str | Path, trainer: str = "train-quality") -> dict[str, Any]:
    """metadata.json of a model folder, after checking the folder has what scoring needs.

    `trainer` is the command that makes such folders, named in the errors."""
    d, meta = read_folder_json(
        model_dir, "a model folder", (MODEL_FILE, METADATA_FILE), f"train one with {trainer}"
    )
    if not isinstance(meta, dict) or not isinstance(meta.get("model_sha256"), str):
        raise ModelError(f"{d / METADATA_FILE}: no model_sha256 (not written by {trainer}?)")
    return meta


def read_folder_json(
    model_dir: str | Path, folder: str, files: Sequence[str], hint: str, name: str = METADATA_FILE
) -> tuple[Path, Any]:
    """(the folder, its JSON file `name` parsed), after checking the folder holds all of `files`; a
    ModelError otherwise. `folder` names such a folder with its article ("a model folder", "an LM
    folder"), `hint` how to make one; both go into the errors."""
    d = Path(model_dir)
    if not d.is_dir():
        raise ModelError(f"{folder.split(' ', 1)[1]} not found: {d}")
    for file in files:
        if not (d / file).is_file():
            raise ModelError(f"{d} is not {folder}: {file} is missing ({hint})")
    return d, read_model_json(d / name)


def read_model_bytes(path: Path, max_bytes: int = MAX_BYTES) -> bytes:
    """A model file's bytes, refused unread (ModelError) when larger than `max_bytes`."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ModelError(f"{path}: {size:,} bytes, over the {max_bytes:,} such a file may have")
        return path.read_bytes()
    except OSError as e:
        raise ModelError(f"{path}: cannot be read ({e.strerror or e})") from None


def parse_model_json(raw: bytes, where: str | Path, max_bytes: int = MAX_BYTES) -> Any:
    """The JSON of a model file, through the one checked reader (core/safe_json.py); ModelError naming
    the file, and the key of a bad value, otherwise. The fields are the caller's to check."""
    try:
        return loads_checked(raw, str(where), max_bytes=max_bytes)
    except JSONFileError as e:
        raise ModelError(str(e)) from None


def read_model_json(path: Path, max_bytes: int = MAX_BYTES) -> Any:
    """`read_model_bytes` then `parse_model_json`."""
    return parse_model_json(read_model_bytes(path, max_bytes), path, max_bytes)


def check_model_file(model_dir: str | Path, sha256: str | None) -> None:
    """model.bin still has the hash of metadata.json (None: not checked) and a layout fastText loads
    safely; ModelError if not.

    The layout walk is cheap next to the hash (it reads the dictionary, not the matrices), so the
    score job runs both on the driver, before any output folder exists."""
    path = Path(model_dir) / MODEL_FILE
    if sha256 is not None and sha256_file(path) != sha256:
        raise ModelError(f"{path} does not match the model_sha256 of its metadata.json")
    try:
        check_fasttext_file(path)
    except FastTextFileError as e:
        raise ModelError(str(e)) from None


def _ensure_fasttext():
    try:
        import fasttext
    except ImportError as e:
        raise ImportError("fastText is missing: pip install fasttext-numpy2==0.10.4") from e
    return fasttext


class FastTextClassifier:
    """`predict(texts) -> float32 array of P(positive label)`; a subclass names its kind's label."""

    positive_label: ClassVar[str]
    kind: ClassVar[str]
    """What the positive label means ("quality"), for errors."""
    trainer: ClassVar[str]
    """The command that trains this kind ("train-quality"), for errors."""

    def __init__(self, model_dir: str | Path, verify: bool = True) -> None:
        self.dir = Path(model_dir).resolve()
        self.metadata = read_metadata(self.dir, self.trainer)
        self.sha256 = self.metadata["model_sha256"]
        check_model_file(self.dir, self.sha256 if verify else None)
        fasttext = _ensure_fasttext()
        self.ft = fasttext.load_model(str(self.dir / MODEL_FILE))
        if self.positive_label not in self.ft.labels:
            raise ModelError(
                f"{self.dir / MODEL_FILE} has no {self.positive_label} label: not a {self.kind} model"
            )

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """P(positive label) per text, shape (len(texts),), float32. One C++ call for the batch."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        lines = [fasttext_line(t) for t in texts]
        try:
            labels, probs = self.ft.predict(lines, k=-1, threshold=0.0, on_unicode_error="replace")
        except UnicodeEncodeError:
            # Lone surrogates (from badly decoded pages) cannot cross into C++: replace them.
            lines = [s.encode("utf-8", "replace").decode("utf-8") for s in lines]
            labels, probs = self.ft.predict(lines, k=-1, threshold=0.0, on_unicode_error="replace")
        out = np.empty(len(lines), dtype=np.float32)
        for i, (lab, p) in enumerate(zip(labels, probs)):
            # k=-1 returns every label, sorted by probability; softmax over 2 labels sums to 1.
            out[i] = p[lab.index(self.positive_label)] if self.positive_label in lab else 0.0
        # fastText's softmax can round a hair above 1.0; a probability column must stay in [0, 1].
        return np.clip(out, 0.0, 1.0)

    def predict_one(self, text: str) -> float:
        return float(self.predict([text])[0])


class QualityModel(FastTextClassifier):
    """`predict(texts) -> float32 array of P(high quality)`; build with `load_model`."""

    positive_label = LABEL_HIGH
    kind = "quality"
    trainer = "train-quality"


M = TypeVar("M", bound=FastTextClassifier)


def load_model(model_dir: str | Path, cls: type[M] = QualityModel) -> M:  # type: ignore[assignment]
    """The `cls` model of `model_dir`, loaded (and its hash checked) once per process."""
    d = Path(model_dir).resolve()
    key = (cls, str(d), read_metadata(d, cls.trainer)["model_sha256"])
    model = _MODELS.get(key)
    if model is None:
        model = _MODELS[key] = cls(d)
    return model
