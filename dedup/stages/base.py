"""What every dedup stage shares: the stage contract, the context passed to it, and its folder/markers.

A stage is a small object with
- `name`: its folder OUTPUT/stages/<name>/ and its marker OUTPUT/stages/<name>.json;
- `enabled(cfg)`: whether the config runs it;
- `run(ctx) -> info`: does the work, writes under its folder, returns JSON-able counts (the marker);
- `removes`: whether it writes decision rows to stages/<name>/removed (later stages then see those
  documents as gone), `funnel_row` (its row in the funnel table) and `counters` (info keys reported
  as job counters): `add_to_stats` turns its info into its part of the funnel;
- `features(cfg)`: the per-document columns it reads (`Feature`: a Spark DDL and a function of a
  `DocBatch`), computed by `prepare` in its one pass over the text, so a new method edits no other
  stage: exact declares `_text_hash`, url `_url_norm`, minhash its bands and signature;
- `output_columns(cfg)`: the columns it adds to the output documents (none by default), written by
  its run to stages/<name>/columns keyed by `_row`, which `output` joins in (decontaminate's
  annotate mode adds `contaminated_by` and `contamination_ngrams` this way).

`StageContext.run(stage)` is the resume rule: a stage with a marker is never redone, its info is
read back from the marker, so a crashed job resumes at the first unfinished stage.
"""

from __future__ import annotations

import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from core.errors import OutputConflict
from core.output import MAX_OUTPUT_JSON_BYTES, atomic_write_json
from core.safe_json import loads_checked
from core.stats import Stats
from core.storage import join
from core.tables import Tables

# One direction only: a stage reads the config; dedup/config.py never imports this package (it
# checks a config's own stages against `Stage` without an import), so this is no circle.
from dedup.config import DedupJobConfig


class StageStore:
    """OUTPUT/stages/<name>/ tables + <name>.json markers; a stage with its marker is never redone.

    The output is a local folder or an object store (core.tables: on a URI the executors write and
    read every table themselves, and the markers are objects there), so a rerun on any machine
    resumes where the last one stopped.
    """

    def __init__(self, root: str | Path, spark: Any = None, spark_native: str = "auto") -> None:
        self.tables = Tables(root, spark, spark_native)
        self.files = self.tables.store
        self.dir = join(self.tables.root, "stages")
        self.files.makedirs(self.dir)
        self.tables.clean_stale("stages")

    def path(self, name: str) -> str:
        return join(self.dir, name)

    def has(self, name: str) -> bool:
        """Whether the table stages/<name> was finished."""
        return self.tables.exists(f"stages/{name}")

    def marker(self, name: str) -> dict[str, Any] | None:
        """The stage's info, None if it did not finish; OutputConflict naming a damaged marker
        (redoing only that stage would mix it with later stages made from its old output)."""
        p = self.path(f"{name}.json")
        if not self.files.exists(p):
            return None
        try:
            # the checked reader: a marker on a shared store is data (a damaged one: OutputConflict below)
            info = loads_checked(self.files.read_bytes(p), p, max_bytes=MAX_OUTPUT_JSON_BYTES)
        except (OSError, ValueError) as e:
            info = e
        if not isinstance(info, dict):
            why = f"({info})" if isinstance(info, Exception) else f"holds a JSON {type(info).__name__}"
            raise OutputConflict(
                f"stage marker {p} cannot be read {why}: the folder is damaged. Delete that folder "
                "(or use another --output) to start over."
            )
        return info

    def finish(self, name: str, info: dict[str, Any]) -> None:
        self.write_json(f"{name}.json", info)

    def write_json(self, name: str, obj: Any) -> None:
        """A small JSON file stages/<name>, written whole (a report, a marker)."""
        atomic_write_json(self.path(name), obj)

    def write(self, df, name: str) -> str:
        """Write df as the table stages/<name> (replacing any earlier one); returns its path."""
        return self.tables.write(df, f"stages/{name}")

    def read(self, name: str):
        return self.tables.read(f"stages/{name}")


def progress_printer(enabled: bool) -> Callable[[str], None]:
    """`say(msg)`: one `[dedup] ...` line on stderr per stage, or nothing."""
    if enabled:
        return lambda msg: print(f"[dedup] {msg}", file=sys.stderr, flush=True)
    return lambda msg: None


@dataclass
class StageContext:
    """What a stage may use: Spark, the config, its folders, and what the stages before it did."""

    spark: Any
    cfg: DedupJobConfig
    root: str
    """the job's output folder or URI"""
    store: StageStore
    files: list[str]
    partitions: int
    say: Callable[[str], None]
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    """the info of every stage run (or resumed) so far, in order"""
    done: list[str] = field(default_factory=list)
    """stages whose decision rows (stages/<name>/removed) exist: documents they removed are gone"""
    resumed: list[str] = field(default_factory=list)
    stages: Sequence[Stage] = ()
    """the job's stage list (prepare computes every one's `features`); () in unit tests of one stage"""
    _prep: Any = None

    def run(self, stage: Stage) -> dict[str, Any]:
        """Run `stage`, or read back its info when its marker says an earlier run finished it."""
        info = self.store.marker(stage.name)
        if info is not None:
            self.resumed.append(stage.name)
            self.say(f"{stage.name}: done in an earlier run, skipped")
        else:
            t0 = time.perf_counter()
            info = stage.run(self)
            info["seconds"] = round(time.perf_counter() - t0, 3)
            self.store.finish(stage.name, info)
            self.say(f"{stage.name}: {info['seconds']:.1f} s  {_summary(info)}")
        self.infos[stage.name] = info
        if stage.removes:
            self.done.append(stage.name)
        return info

    def ran(self, name: str) -> bool:
        return name in self.infos

    def read(self, name: str):
        """The table a stage wrote under stages/<name>."""
        return self.store.read(name)

    def write(self, df, name: str) -> str:
        return self.store.write(df, name)

    @property
    def prep(self):
        """The prepared input (stages/prepare/): input columns, `_row` and every hash."""
        if self._prep is None:
            self._prep = self.read("prepare")
        return self._prep

    @property
    def columns(self) -> set[str]:
        return set(self.prep.columns)

    @property
    def keep_cols(self) -> list[str]:
        """What the keep policies and decisions read: the narrow columns, never the text."""
        return ["_row", "id", "_bytes"] + [c for c in ("quality", "fetch_time", "crawl") if c in self.columns]

    def decisions(self, names: list[str]):
        """The decision rows written by the stages `names` (None when there are none)."""
        tables = [self.store.read(f"{n}/removed") for n in names]
        return reduce(lambda a, b: a.unionByName(b), tables) if tables else None


@dataclass
class Flow:
    """Documents and bytes still in the funnel as the stages' rows are added to it."""

    docs: int = 0
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class DocBatch:
    """One Arrow batch of prepared input as `prepare` hands it to each stage's features."""

    batch: pa.RecordBatch
    """every input column"""
    texts: list[str | None]
    urls: list[str | None]
    """None for every row when the input has no `url` column"""
    norms: list[bytes | None]
    """normalized text (dedup.normalize.normalize_bytes); None for a null or blank text, b"" for one
    with no word (`_reason` says which: empty_text, no_words)"""


@dataclass(frozen=True, slots=True)
class Feature:
    """Per-document columns a stage reads, computed by `prepare` for every document.

    `make()` runs once per Spark task on the executor (a hasher's tables are built there, not
    shipped) and returns the function of one `DocBatch` -> {column: Arrow array of len(batch)}.
    Both must pickle (module-level functions, or closures of picklable values).
    """

    ddl: str
    """Spark DDL of the columns, in order, e.g. "_text_hash long"; private names start with `_`."""
    make: Callable[[], Callable[[DocBatch], dict[str, pa.Array]]]


class Stage(ABC):
    """Base of a dedup stage (see the module docstring); subclasses set the class attributes."""

    name: ClassVar[str]
    removes: ClassVar[bool] = False
    funnel_row: ClassVar[str | None] = None
    """its row in the funnel table; None: it removes nothing"""
    counters: ClassVar[tuple[str, ...]] = ()
    """keys of its info reported as job counters"""

    def enabled(self, cfg: DedupJobConfig) -> bool:
        return True

    def features(self, cfg: DedupJobConfig) -> tuple[Feature, ...]:
        """The per-document columns this stage reads (see `Feature`); computed whether or not the
        stage is enabled, so that stages which read another's keys (copies_of) always find them."""
        return ()

    def output_columns(self, cfg: DedupJobConfig) -> tuple[str, ...]:
        """Columns this stage adds to the output documents: its run writes them with `_row` to
        stages/<name>/columns, and `output` joins them in (null for a row it wrote nothing for); an
        input column of the same name is replaced."""
        return ()

    @abstractmethod
    def run(self, ctx: StageContext) -> dict[str, Any]:
        """Do the stage's work (writing under ctx.store) and return its info (counts, `removed`)."""

    def add_to_stats(self, stats: Stats, info: dict[str, Any], flow: Flow) -> None:
        """Its funnel row (what came in, drops per reason from info["removed"], what went on) and counters."""
        if self.funnel_row is not None:
            st = stats.stage(self.funnel_row)
            st.docs_in, st.bytes_in = flow.docs, flow.bytes
            st.seconds = info.get("seconds", 0.0)
            for reason, c in info.get("removed", {}).items():
                st.drops[reason] += c["docs"]
                st.drop_bytes[reason] += c["bytes"]
                flow.docs -= c["docs"]
                flow.bytes -= c["bytes"]
            st.docs_out, st.bytes_out = flow.docs, flow.bytes
        for key in self.counters:
            if key in info:
                stats.counters[key] = info[key]


def _summary(info: dict[str, Any]) -> str:
    removed = info.get("removed", {})
    parts = [f"{k}={v['docs']}" for k, v in sorted(removed.items())]
    parts += [f"{k}={v}" for k, v in info.items() if isinstance(v, int) and k != "seconds"]
    return ", ".join(parts)
