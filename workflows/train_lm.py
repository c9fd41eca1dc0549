"""`python -m workflows train-lm`: train the perplexity scorer's reference LM with the project's own tools.

    python -m workflows train-lm --output out/lm [--reference FILES] [--tokenizer tokenizer.json]
                                 [--config FILE] [--set key=value ...] [--master local[2]]

Steps, run by the one step runner (workflows/steps.py) in this process, except training (DeepSpeed's
launcher, trainer/launch.py):

    reference/   the reference documents as Parquet (id, text, lang, source), split into train/ and
                 heldout/ by a keyed hash of the text (`heldout_fraction`); manifest.json last
    tokenizer/   tokens train-tokenizer (configs/tokenizer.yaml: byte-level BPE, 4,096 ids),
                 unless --tokenizer gives one
    tokens/      tokens tokenize (Spark, --master) of reference/train
    recipe.yaml  one source, one phase, exactly steps × global_batch rows of seq_len + 1 tokens
    train/       the DeepSpeed launcher: trainer.train --config configs/train-lm.yaml (debug model)
    model/       trainer.export_lm (lm.pt2, tokenizer.json, metadata.json), then the held-out
                 documents scored by the PerplexityScorer itself (classifiers/perplexity.py) and the
                 result added to metadata.json; renamed into place last

Idempotent: the folder records its config and inputs (_config.json, core.output.guard_folder; another
config or other reference files are refused), each step is skipped when its marker exists, and an
interrupted training resumes from its last checkpoint. `_SUCCESS` marks a finished folder. By default
the reference text is the shared Wikipedia articles and WikiText-2 paragraphs (WikiText in its
tokenized form: ` , ` and `@-@` as they are there), one document per article / paragraph.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import model_validator

from classifiers.data import read_inputs
from core.config import ConfigError, ConfigModel, fingerprint_of, load_config, read_yaml_mapping
from core.errors import InputError
from core.files import sha256_file
from core.output import atomic_write_json, guard_folder
from trainer.launch import run_command
from trainer.metrics import MetricsLog
from workflows.paths import SHARED_DATA_ENV, default_shared_data, project_path
from workflows.pipeline import quality_positives
from workflows.steps import StepFailed, StepRunner, call, launch

SOURCE = "reference"


class LMTrainConfig(ConfigModel):
    """What `train-lm` makes; fingerprinted into the folder's _config.json and the model's metadata."""

    languages: tuple[str, ...] = ("en",)
    """Languages the model scores (documents in others get null); the reference text's language."""
    min_chars: int = 200
    """Shorter reference documents (WikiText headings) are skipped and counted."""
    heldout_fraction: float = 0.05
    """Share of reference documents kept out of training and scored for the held-out perplexity."""
    seed: int = 0
    """Keys the held-out split (the trainer's own seed is in its config)."""
    tokenizer_config: str = "configs/tokenizer.yaml"
    """train-tokenizer's config (relative paths: to the project root)."""
    trainer_config: str = "configs/train-lm.yaml"
    """The trainer's config; the keys below override it."""
    steps: int = 300
    seq_len: int = 512
    global_batch: int = 8
    """Rows per optimizer step (no ramp-up)."""
    processes: int = 1
    """Trainer ranks (the launcher's --num_gpus); on CPU one rank uses every core."""
    trainer_overrides: tuple[str, ...] = ()
    """More `key=value` overrides for the trainer, e.g. [optimizer.lr=1e-3]."""
    eval_max_tokens: int = 512
    """The held-out documents are scored with this perplexity.max_tokens (the scorer's default)."""

    @model_validator(mode="after")
    def _check(self) -> LMTrainConfig:
        if not self.languages or not all(isinstance(x, str) and x for x in self.languages):
            raise ConfigError("languages must be a non-empty list of language codes")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ConfigError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction!r}")
        for key in ("steps", "global_batch", "processes", "min_chars"):
            if getattr(self, key) < (0 if key == "min_chars" else 1):
                raise ConfigError(f"{key} must be positive, got {getattr(self, key)!r}")
        if self.seq_len < 2 or not 2 <= self.eval_max_tokens <= self.seq_len:
            raise ConfigError(
                f"need 2 <= eval_max_tokens <= seq_len, got {self.eval_max_tokens} and {self.seq_len}"
            )
        if self.global_batch % self.processes:
            raise ConfigError(
                f"global_batch {self.global_batch} is not a multiple of processes {self.processes}"
            )
        for key in ("tokenizer_config", "trainer_config"):
            if not project_path(getattr(self, key)).is_file():
                raise ConfigError(f"{key}: {project_path(getattr(self, key))} not found")
        return self

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] = ()) -> LMTrainConfig:
        return load_config(cls, path, overrides)

    def trainer_overrides_for(self, out: Path, recipe: Path) -> list[str]:
        """The trainer's `key=value` overrides for a run into `out` on `recipe`."""
        train = out / "train"
        return [
            f"data.recipe={recipe}", f"data.seq_len={self.seq_len}", f"schedule.steps={self.steps}",
            f"schedule.global_batch={self.global_batch}", "schedule.rampup=[]",
            f"schedule.micro_batch={self.global_batch // self.processes}",
            f"logging.dir={train}", f"checkpoint.dir={train / 'ckpt'}", *self.trainer_overrides,
        ]  # fmt: skip


def default_reference() -> list[Path]:
    """The shared Wikipedia articles and WikiText-2 ($REFINERY_SHARED_DATA, or ../shared/data beside the project)."""
    files = [Path(f) for f in quality_positives(str(default_shared_data()))]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise InputError(f"default reference text not found ({', '.join(missing)}): give --reference FILES "
                         f"or set {SHARED_DATA_ENV}")  # fmt: skip
    return files


def heldout_key(text: str, seed: int) -> float:
    """A document's place in [0, 1) for the held-out split: keyed by the text, not its order."""
    h = hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8, key=str(seed).encode())
    return int.from_bytes(h.digest(), "little") / 2**64


def write_reference(files: list[Path], out: Path, cfg: LMTrainConfig) -> dict[str, Any]:
    """reference/{train,heldout}/part-00000.parquet and manifest.json (last): the documents and their split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts: dict[str, dict[str, list]] = {
        s: {"id": [], "text": [], "source": []} for s in ("train", "heldout")
    }
    read = read_inputs(files, cfg.min_chars)
    for f in read:
        name = Path(f.path).name
        for k, text in enumerate(f.docs):
            split = "heldout" if heldout_key(text, cfg.seed) < cfg.heldout_fraction else "train"
            for col, v in (("id", f"{name}:{k}"), ("text", text), ("source", name)):
                parts[split][col].append(v)
    for split, cols in parts.items():
        if not cols["text"]:
            raise InputError(f"the reference text gives no {split} documents (heldout_fraction "
                             f"{cfg.heldout_fraction}, {sum(len(f.docs) for f in read)} documents)")  # fmt: skip
        d = out / "reference" / split
        d.mkdir(parents=True, exist_ok=True)
        cols["lang"] = [cfg.languages[0]] * len(cols["text"])
        tmp = d / ".part-00000.parquet.tmp"
        pq.write_table(pa.table(cols), tmp, compression="zstd")
        tmp.replace(d / "part-00000.parquet")
    manifest = {
        "files": [f.summary() for f in read],
        "documents": {s: len(c["text"]) for s, c in parts.items()},
        "characters": {s: sum(map(len, c["text"])) for s, c in parts.items()},
    }
    atomic_write_json(out / "reference" / "manifest.json", manifest)
    return manifest


def write_recipe(out: Path, cfg: LMTrainConfig) -> Path:
    """One source, one phase: exactly the rows the trainer will draw (steps × global_batch)."""
    import yaml

    manifest = json.loads((out / "tokens" / "shards" / SOURCE / "manifest.json").read_text())
    total = cfg.steps * cfg.global_batch * (cfg.seq_len + 1)
    # The cap on repetition is there to flag an unintended one; here repeating the small reference
    # text is the plan, so the cap sits a margin above what the run draws.
    epochs = math.ceil(10 * (1.5 * total / max(manifest["tokens"], 1) + 1)) / 10
    recipe = {
        "name": "reference-lm",
        "seed": cfg.seed,
        "total_tokens": total,
        "max_epochs": epochs,
        "sources": {SOURCE: {"shards": str(out / "tokens" / "shards" / SOURCE), "docs": str(out / "reference" / "train")}},
        "phases": [{"name": "main", "share": 1.0, "weights": {SOURCE: 1}}],
    }  # fmt: skip
    path = out / "recipe.yaml"
    path.write_text(
        "# Written by `python -m workflows train-lm` (workflows/train_lm.py)\n" + yaml.safe_dump(recipe)
    )
    return path


def heldout_perplexity(model_dir: Path, heldout: Path, max_tokens: int) -> dict[str, Any]:
    """The held-out reference documents scored by the scorer itself: token-weighted perplexity and bits per byte."""
    import numpy as np
    import pyarrow.parquet as pq

    from classifiers.perplexity import PerplexityScorer

    texts = pq.read_table(heldout, columns=["text"]).column("text").to_pylist()
    scorer = PerplexityScorer.load(str(model_dir), {"max_tokens": max_tokens})
    t0 = time.perf_counter()
    r = scorer.nll(texts)
    ok = r.tokens > 0
    per_doc = np.exp(r.nll[ok] / r.tokens[ok])
    return {
        "documents": int(ok.sum()),
        "max_tokens": max_tokens,
        "tokens": int(r.tokens.sum()),
        "bytes": int(r.bytes.sum()),
        "perplexity": float(np.exp(r.nll.sum() / r.tokens.sum())),
        "bits_per_byte": float(r.nll.sum() / math.log(2) / r.bytes.sum()),
        "median_document_perplexity": float(np.median(per_doc)),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def lm_fingerprint(cfg: LMTrainConfig, reference: list[Path], tokenizer: Path | None) -> tuple[str, dict]:
    """(fingerprint, what went into it besides `cfg`): the identity of a train-lm folder."""
    extra = {
        "reference": [{"path": str(p.resolve()), "sha256": sha256_file(p)} for p in reference],
        # the files the config names decide the model as much as its own keys do: their settings, not
        # their bytes, so that editing a comment in configs/train-lm.yaml does not retrain the model
        "config_files": {
            k: fingerprint_of(read_yaml_mapping(project_path(getattr(cfg, k))), length=64)
            for k in ("tokenizer_config", "trainer_config")
        },
        "tokenizer": {"path": str(tokenizer.resolve()), "sha256": sha256_file(tokenizer)}
        if tokenizer
        else None,
    }
    return fingerprint_of({"config": cfg.to_dict(), **extra}), extra


def train_lm(
    output: str | Path,
    cfg: LMTrainConfig,
    reference: list[str | Path] | None = None,
    tokenizer: str | Path | None = None,
    master: str = "local[2]",
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Every step (module docstring) into `output`; returns the model's metadata.json."""
    files = [Path(p) for p in reference] if reference else default_reference()
    for p in files:
        if not p.is_file():
            raise InputError(f"reference file not found: {p}")
    tok_given = Path(tokenizer) if tokenizer else None
    if tok_given is not None and not tok_given.is_file():
        raise InputError(f"--tokenizer {tok_given} not found")
    out = Path(output).expanduser().resolve()
    fp, extra = lm_fingerprint(cfg, files, tok_given)
    guard_folder(out, "train-lm", cfg.to_dict(), fp, extra)
    steps = StepRunner(out / "timings.json", log)
    tok = tok_given.resolve() if tok_given else out / "tokenizer" / "tokenizer.json"
    steps.run(
        "reference", (out / "reference" / "manifest.json").is_file(), lambda: write_reference(files, out, cfg)
    )
    if tok_given is None:
        args = ["train-tokenizer", "--input", str(out / "reference" / "train"), "--output", str(out / "tokenizer"),
                "--config", str(project_path(cfg.tokenizer_config))]  # fmt: skip
        steps.run("train-tokenizer", tok.is_file(), lambda: call("tokens", args, log=log))
    tokenize = ["tokenize", "--input", str(out / "reference" / "train"), "--tokenizer", str(tok),
                "--output", str(out / "tokens"), "--source", SOURCE, "--master", master, "--no-progress"]  # fmt: skip
    steps.run(
        "tokenize",
        (out / "tokens" / "shards" / SOURCE / "manifest.json").is_file(),
        lambda: call("tokens", tokenize, log=log),
    )
    recipe = write_recipe(out, cfg)  # cheap, and always what this config says
    steps.run(
        "train", MetricsLog.read(out / "train").finished(cfg.steps), lambda: _train(out, cfg, recipe, log)
    )
    steps.run("export", (out / "model" / "metadata.json").is_file(), lambda: _export(out, cfg, tok, log))
    atomic_write_json(out / "_SUCCESS", {"fingerprint": fp})
    return json.loads((out / "model" / "metadata.json").read_text())


def _train(out: Path, cfg: LMTrainConfig, recipe: Path, log: Callable[[str], None]) -> None:
    """The trainer (one rank started directly, more through the launcher: trainer.launch.run_command);
    StepFailed when it stopped short of `steps`."""
    overrides = cfg.trainer_overrides_for(out, recipe)
    cmd, env = run_command(str(project_path(cfg.trainer_config)), overrides, processes=cfg.processes)
    launch(cmd, log, env)
    if not MetricsLog.read(out / "train").finished(cfg.steps):
        raise StepFailed(
            f"the trainer stopped before step {cfg.steps} (see {out / 'train' / 'metrics.jsonl'})", 1
        )


def _export(out: Path, cfg: LMTrainConfig, tok: Path, log) -> None:
    """trainer.export_lm into a temporary folder, the held-out perplexity added, then renamed to model/."""
    tmp = out / ".model.export"
    shutil.rmtree(tmp, ignore_errors=True)  # a crashed attempt: exporting again is cheap
    args = ["--checkpoints", str(out / "train" / "ckpt"), "--output", str(tmp), "--tokenizer", str(tok),
            "--languages", *cfg.languages]  # fmt: skip
    call("trainer.export_lm", args, log=log)
    meta = json.loads((tmp / "metadata.json").read_text())
    meta["heldout"] = heldout_perplexity(tmp, out / "reference" / "heldout", cfg.eval_max_tokens)
    meta["train_lm"] = {
        "config": cfg.to_dict(),
        "reference": json.loads((out / "reference" / "manifest.json").read_text()),
    }
    atomic_write_json(tmp / "metadata.json", meta)
    tmp.rename(out / "model")
