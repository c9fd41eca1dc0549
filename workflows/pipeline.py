"""The curation pipeline's commands, defined once: for `make demo`, the cluster tests and docker-compose.

Each stage is a `Step`: a package whose `__main__.py` is the entry point plus its arguments. The same
step runs in the demo's own process (`workflows.steps.call`: the package's `main(argv)`), renders as a
local command (`python -m dedup run ...`, the embedded `local[*]` master) or as a
`spark-submit --master spark://... dedup/__main__.py run ...` command, so what the demo runs, what
`tests/cluster/` submits to a real standalone cluster, and what the compose `curate` service submits
are provably the same arguments (tests/workflows/test_compose.py compares them).

Only what differs between deployments is a parameter: where the WARCs are (paths, globs, s3:// or
https:// URLs, a warc.paths listing, or a cc-index table with a condition: `IndexSource`), where
outputs go, the recipe, the good text (`positives`: the quality classifier's positive class and the
reference LM's text; by default the shared data's Wikipedia/WikiText), and whether a quality model is
given (else one is trained: those positives against the extracted documents as negatives, as DCLM's
fastText classifier does with its own data).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Stages that run as Spark jobs (under spark-submit on a cluster); the others are single-process.
SPARK_MODULES = frozenset({"curation", "dedup", "classifiers", "tokens"})


@dataclass(frozen=True, slots=True)
class Step:
    """One pipeline command: `python -m <module> <args>`, or its spark-submit form."""

    name: str
    """Stage name shown in progress lines and timings (e.g. `tokenize:web`)."""
    module: str
    """Package with a `__main__.py` (curation, dedup, classifiers, tokens, mixtures, workflows)."""
    args: tuple[str, ...]
    spark: bool = True
    """True: a Spark job (spark-submit can run it); False: plain Python (tokenizer training, plan)."""
    output: str = ""
    """Folder the step writes (its completion marker tells the demo driver the step is done)."""
    done_marker: str = "_SUCCESS"
    """File under `output` that exists only once the step finished."""

    def local(self, python: str = "python") -> list[str]:
        return [python, "-m", self.module, *self.args]

    def submit(
        self, master: str, spark_submit: str = "spark-submit", conf: dict[str, str] | None = None
    ) -> list[str]:
        """The spark-submit command; the entry point is the package's `__main__.py` (a file path)."""
        if not self.spark:
            raise ValueError(f"step {self.name!r} is not a Spark job; run it with .local()")
        cmd = [spark_submit, "--master", master]
        for k, v in sorted((conf or {}).items()):
            cmd += ["--conf", f"{k}={v}"]
        return [*cmd, f"{self.module}/__main__.py", *self.args]

    def done(self, root: Path = Path(".")) -> bool:
        return bool(self.output) and (root / self.output / self.done_marker).exists()

    def run(self, ok: tuple[int, ...] = (0,)) -> int:
        """The command in this process (workflows/steps.py `call`); StepFailed on a status not in `ok`."""
        from workflows.steps import call

        return call(self.module, self.args, ok)


@dataclass(frozen=True, slots=True)
class IndexSource:
    """Extract the records a cc-index query selects, by ranged reads (`extract --index`), not whole WARCs."""

    index: str
    """A cc-index table (Parquet file or folder, local or s3://) or a CDXJ file; with `records`, also an
    http(s):// Parquet file (workflows/pick_records.py reads it)."""
    where: str
    """The SQL condition over the index columns (curation/index/where.py)."""
    warc_base: str
    """Where the index's `warc_filename`s live (https://data.commoncrawl.org/, s3://commoncrawl/, ...)."""
    records: int | None = None
    """Only the first N selected records (a `pick-records` step writes them as a small index); None: all."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where one pipeline run reads and writes (all paths as the commands will see them)."""

    warcs: tuple[str, ...]
    """WARC paths, globs, s3:// or https:// URLs or warc.paths listings (the job expands and reads them)."""
    out: str
    """Output root: extract/, dedup/, quality-model/, scored/, tokenizer/, tokens/."""
    shared_data: str = ""
    """The shared data folder: the default positives (`quality_positives`) when `positives` is empty."""
    positives: tuple[str, ...] = ()
    """Good text (JSONL with a `text` field, Parquet, or one document per line): the quality classifier's
    positive class and the reference LM's text. Empty: the shared data's Wikipedia and WikiText."""
    index: IndexSource | None = None
    """Extract from a cc-index query instead of `warcs` (which is then empty)."""
    warc_base: str | None = None
    """Where the relative lines of a remote warc.paths listing live (extract's `cc_base_url`); None: its
    default, https://data.commoncrawl.org/."""
    quality_model: str | None = None
    """A trained quality model folder; None: train one into <out>/quality-model first."""
    lm_model: str | None = None
    """A reference LM folder (train-lm's DIR/model) for the perplexity column; None: train one into <out>/lm."""
    lm_overrides: tuple[str, ...] = ()
    """`key=value` overrides of the reference LM's training (train-lm's `--set`), e.g. `steps=150`."""
    perplexity: bool = True
    """Score perplexity (and train the LM when none is given); False: quality and toxicity only."""
    toxicity: str | None = "profanity-check"
    """Toxicity model of the score step (classifiers/toxicity.py); None: no toxicity column."""
    tokenizer_config: str = "configs/tokenizer.yaml"
    extra: dict[str, Any] = field(default_factory=dict)

    def path(self, name: str) -> str:
        return f"{self.out.rstrip('/')}/{name}"

    def positive_files(self) -> list[str]:
        return list(self.positives) or quality_positives(self.shared_data)


def quality_positives(shared_data: str) -> list[str]:
    """High-quality reference text: Wikipedia articles and WikiText paragraphs (one doc per line)."""
    q = f"{shared_data.rstrip('/')}/quality"
    return [f"{q}/enwiki_sample_articles.jsonl", f"{q}/wikitext-2-valid.txt"]


SAMPLE_DIR, SAMPLE_FILE = "index-sample", "records.parquet"


def extract_steps(lay: Layout) -> list[Step]:
    """`extract` of the WARCs, or of an index query (first `pick-records` when only N records are wanted)."""
    extract = lay.path("extract")
    if lay.index is None:
        source = ["--input", *lay.warcs]
        if lay.warc_base is not None:
            source += ["--set", f"cc_base_url={lay.warc_base}"]
        return [Step("extract", "curation", ("extract", *source, "--output", extract), output=extract)]
    ix, steps = lay.index, []
    index = ix.index
    if ix.records is not None:
        # The sample holds exactly the picked rows (and the condition's columns), so the same
        # condition selects all of them again in `extract`, which records it in its _config.json.
        sample = lay.path(SAMPLE_DIR)
        index = f"{sample}/{SAMPLE_FILE}"
        pick = ("pick-records", "--index", ix.index, "--where", ix.where, "--records", str(ix.records))
        steps.append(Step("pick-records", "workflows", (*pick, "--output", index), spark=False,
                          output=sample, done_marker=SAMPLE_FILE))  # fmt: skip
    source = ("--index", index, "--where", ix.where, "--warc-base", ix.warc_base)
    return [*steps, Step("extract", "curation", ("extract", *source, "--output", extract), output=extract)]


def curation_steps(lay: Layout) -> list[Step]:
    """(pick-records) → extract → dedup → (train-quality) → (train-lm) → score: the Spark part the cluster runs.

    The score step writes quality, perplexity (the reference LM) and toxicity (profanity-check).
    """
    extract, dedup, scored = lay.path("extract"), lay.path("dedup"), lay.path("scored")
    model = lay.quality_model or lay.path("quality-model")
    steps = [
        *extract_steps(lay),
        Step("dedup", "dedup", ("run", "--input", extract, "--output", dedup), output=dedup),
    ]
    if lay.quality_model is None:
        steps.append(
            Step(
                "train-quality",
                "classifiers",
                (
                    "train-quality",
                    "--positive",
                    *lay.positive_files(),
                    "--negative",
                    extract,
                    "--output",
                    model,
                ),
                spark=False,
                output=model,
                done_marker="metadata.json",
            )
        )
    score = ["score", "--input", dedup, "--output", scored, "--model", model]
    if lay.perplexity:
        lm = lay.lm_model or f"{lay.path('lm')}/model"
        if lay.lm_model is None:
            steps.append(
                Step(
                    "train-lm",
                    "workflows",
                    (
                        "train-lm",
                        "--output",
                        lay.path("lm"),
                        "--reference",
                        *lay.positive_files(),
                        *(a for kv in lay.lm_overrides for a in ("--set", kv)),
                    ),
                    spark=False,  # its tokenize step starts its own local Spark; training is DeepSpeed
                    output=lay.path("lm"),
                )
            )
        score += ["--perplexity", lm]
    if lay.toxicity:
        score += ["--toxicity", lay.toxicity]
    steps.append(Step("score", "classifiers", tuple(score), output=scored))
    return steps


def tokenize_steps(lay: Layout, recipe_path: str | Path) -> list[Step]:
    """train-tokenizer, then one `tokenize` per recipe source, with that source's own `select`.

    The selections come from the recipe itself (mixtures.recipe), so the shards are made with exactly
    what the recipe says its sources hold.
    """
    from mixtures.recipe import Recipe

    scored, tok_dir, tokens = lay.path("scored"), lay.path("tokenizer"), lay.path("tokens")
    steps = [
        Step(
            "train-tokenizer",
            "tokens",
            ("train-tokenizer", "--input", scored, "--output", tok_dir, "--config", lay.tokenizer_config),
            spark=False,
            output=tok_dir,
            done_marker="tokenizer_meta.json",  # written last (tokens/tokenizer.py)
        )
    ]
    for src in Recipe.load(recipe_path).sources.values():
        args = ["tokenize", "--input", scored, "--tokenizer", f"{tok_dir}/tokenizer.json"]
        args += ["--output", tokens, "--source", src.name]
        for column, spec in src.select_spec().items():
            # Strings as they are ("en", ">= 0.6"); lists and numbers in JSON, which the CLI reads as YAML.
            args += ["--select", f"{column}={spec if isinstance(spec, str) else json.dumps(spec)}"]
        steps.append(
            Step(
                f"tokenize:{src.name}",
                "tokens",
                tuple(args),
                output=f"{tokens}/shards/{src.name}",
                done_marker="manifest.json",
            )
        )
    return steps


def plan_step(
    recipe_path: str | Path, out: str, seq_len: int | None = None, heldout: int | None = None
) -> Step:
    """`mixtures plan` of the recipe; with the trainer's data.seq_len and eval.sequences_per_source it counts
    exactly what the trainer's sampler will draw and refuse (mixtures/draw.py)."""
    args = ["plan", str(recipe_path), "--model-params", "3M"]
    if seq_len is not None:
        args += ["--seq-len", str(seq_len)]
    if heldout is not None:
        args += ["--heldout-sequences", str(heldout)]
    return Step("plan", "mixtures", tuple(args), spark=False, output=out)


def pipeline(lay: Layout, recipe_path: str | Path) -> list[Step]:
    """Every curation command, WARCs to the token shards of the recipe's sources."""
    return [*curation_steps(lay), *tokenize_steps(lay, recipe_path)]


def shell(cmd: list[str]) -> str:
    return shlex.join(cmd)
