"""The sides the curation benches time, WARC -> filtered documents: datatrove's own pipeline, ours
without Spark (`process_file` over a Pool) and ours on Spark (`run_extract`), each timed the same way.

Shared by bench/curation/throughput.py (the English default against datatrove) and
bench/curation/multilingual.py (the multilingual preset against datatrove's per-language blocks); the
clock, the kept-set agreement and the table are bench/harness.py's. Each `run_*` returns a `Run`: its
wall and process-tree CPU seconds (`harness.Clock`: the whole call, set-up included), its funnel rows
under our stage names (datatrove's blocks mapped onto them, from each side's own stats.json) and the
start and end of each task (one input file), from which the set-up that is taken out of the steady rate
is counted the same way on every side (`Run.setup_core_s`).

datatrove runs offline here: its lid.176 backend loads our local lid.176.ftz (`LocalFT176LID`), its URL
filter uses tldextract's bundled suffix list (`LocalURLFilter`), and its LanguageFilter skips the
download lock it needs `fasteners` for (`LocalLanguageFilter`).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from datatrove.pipeline.filters import LanguageFilter, URLFilter
from datatrove.utils.lid import FT176LID

from bench.harness import Clock, child_pids
from curation.config import DATATROVE_FILTERS, ExtractJobConfig
from curation.filters.langid import default_model_path
from testkit.shared_data import shared_data_dir

DEFAULT_FILES = (
    "pages-aeb-181.warc.gz",
    "pages-trafilatura-eval-part0.warc.gz",
    "pages-trafilatura-eval-part1.warc.gz",
    "pages-trafilatura-eval-part2.warc.gz",
    "pages-trafilatura-eval-part3.warc.gz",
    "cc-main-2020-34-sample.warc.gz",
    "cc-main-2024-22-whirlwind.warc.gz",
    "crawl-2024-sample-0000.warc.gz",
    "crawl-2024-sample-0001.warc.gz",
)
# Our funnel rows, each with the datatrove block doing the same work, in pipeline order.
DT_STAGES = ("read", "url_filter", "extract", "langid", *(f"filter:{k}" for k in DATATROVE_FILTERS), "write")
# Ours add the cascade's pre-check (no datatrove block: datatrove extracts every page).
OUR_STAGES = ("read", "url_filter", "prelid", *DT_STAGES[2:])


class LocalFT176LID(FT176LID):
    """datatrove's lid.176 backend (its own predict()), loading a local model file."""

    def __init__(self, languages: list[str] | None, model_path: str) -> None:
        super().__init__(languages)
        self.model_path = model_path

    @property
    def model(self):
        if self._model is None:
            from fasttext.FastText import _FastText

            self._model = _FastText(self.model_path)
        return self._model


class LocalURLFilter(URLFilter):
    """datatrove's URLFilter (its own `filter()`, FineWeb's lists) with tldextract's bundled suffix
    list: TLDExtract() would fetch the public suffix list, and nothing here reaches the network."""

    def __init__(self) -> None:
        from tldextract import TLDExtract

        super().__init__()
        self.tldextractor = TLDExtract(suffix_list_urls=())


class LocalLanguageFilter(LanguageFilter):
    """datatrove's LanguageFilter (its own `filter()`, unchanged) on LocalFT176LID.

    PipelineStep.__new__ checks LanguageFilter's dependencies, which include `fasteners`: it is
    only used to lock the model download, which this class does not do, and it is not installed.
    """

    def __new__(cls, *args: Any, **kwargs: Any):
        return object.__new__(cls)

    def __init__(self, model_path: str, languages: list[str] | None, language_threshold: float) -> None:
        super().__init__(languages=languages, language_threshold=language_threshold)
        self.model = LocalFT176LID(self.languages, model_path)


def datatrove_pipeline(
    data_folder: str,
    paths_file: str,
    cfg: ExtractJobConfig,
    timeout: float,
    writer_dir: str | None,
    judges: list | None = None,
) -> list:
    """Reader, URL filter and extractor as FineWeb runs them, then `judges` (default: the LanguageFilter
    and the four blocks of `cfg`; bench/curation/multilingual.py gives per-language ones), then the writer.
    The classes are this module's, so dill pickles them by reference for datatrove's workers (a class of
    `__main__` would go by value)."""
    from datatrove.pipeline import filters as dt_filters
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import ParquetWriter

    pipeline = [
        WarcReader(data_folder, paths_file=paths_file, limit=-1),
        LocalURLFilter(),
        Trafilatura(
            favour_precision=cfg.extract.favor_precision,
            timeout=timeout,
            deduplicate=cfg.extract.deduplicate,
            include_tables=cfg.extract.include_tables,  # datatrove hard-codes include_comments=False
            fast=cfg.extract.fast,  # passed on to trafilatura.extract
        ),
    ]
    if judges is None:
        judges = [
            LocalLanguageFilter(
                model_path=cfg.langid.model_path or default_model_path(),
                languages=list(cfg.langid.languages) or None,
                language_threshold=cfg.langid.threshold,
            ),
            *(getattr(dt_filters, DATATROVE_FILTERS[k])(**kw) for k, kw in cfg.filters.enabled().items()),
        ]
    pipeline += judges
    if writer_dir is not None:
        pipeline.append(ParquetWriter(writer_dir, compression="zstd"))
    return pipeline


@dataclass
class StageRow:
    docs_in: int = 0
    docs_out: int = 0
    seconds: float = 0.0
    timeouts: int = 0  # pages dropped by the extraction timeout


@dataclass
class Run:
    name: str
    wall: float
    cpu: float  # CPU seconds of the run's process tree
    cores: int
    stages: dict[str, StageRow]  # keyed by our stage names
    tasks: list[tuple[float, float]]  # (start, end) of each task (one per file), seconds after the call
    failed: list[str] = field(default_factory=list)

    @property
    def task_seconds(self) -> float:
        return sum(e - s for s, e in self.tasks)

    @property
    def first_task_s(self) -> float:
        return min(s for s, _ in self.tasks)

    def outside_tasks(self) -> dict[str, float]:
        """cores x wall minus the task walls, in core-seconds: before the first task, cores idle at the
        tail (no task left for them), after the last task, and the rest (hand-offs between tasks)."""
        ends = sorted(e for _, e in self.tasks)
        last = ends[-1]
        parts = {
            "start": self.cores * self.first_task_s,
            "tail idle": sum(last - e for e in ends[-self.cores :]),
            "end": self.cores * (self.wall - last),
        }
        parts["between tasks"] = self.cores * self.wall - self.task_seconds - sum(parts.values())
        return parts

    @property
    def pages_in(self) -> int:
        """Pages past the URL filter: what extraction (or the cascade's pre-check before it) receives."""
        first = self.stages.get("prelid") or self.stages["extract"]
        return first.docs_in

    @property
    def kept(self) -> int:
        last = [s for s in OUR_STAGES if s.startswith("filter:") and s in self.stages][-1]
        return self.stages[last].docs_out

    @property
    def stage_seconds(self) -> float:
        return sum(s.seconds for s in self.stages.values())

    def per_core(self, extra_wall: float = 0.0) -> float:
        return self.pages_in / ((self.wall + extra_wall) * self.cores)

    def setup_core_s(self, task_setup: float) -> float:
        """Core-seconds of this run that are set-up, counted the same way on every side: the time
        before its first task starts (x cores: executor or Spark job start, nothing else can run),
        plus each task's own set-up, `task_setup` seconds (measured by `probe_setup`) per task."""
        return self.cores * self.first_task_s + len(self.tasks) * task_setup

    def steady_per_core(self, task_setup: float) -> float:
        """pages/s/core with set-up excluded: pages in / (cores x wall - set-up core-seconds)."""
        return self.pages_in / (self.cores * self.wall - self.setup_core_s(task_setup))


def our_stages(stats: dict[str, Any]) -> dict[str, StageRow]:
    return {
        st["stage"]: StageRow(
            st["docs_in"], st["docs_out"], st["seconds"], st.get("drops", {}).get("extract_timeout", 0)
        )
        for st in stats["stages"]
    }


def our_tasks(out: Path, t0: float) -> list[tuple[float, float]]:
    """(start, end) of each file's task after `t0`, from stats/<unit>.json ("started", "seconds")."""
    tasks = []
    for p in (out / "stats").glob("*.json"):
        d = json.loads(p.read_text())
        tasks.append((d["started"] - t0, d["started"] + d["seconds"] - t0))
    return tasks


def _total(v: Any) -> float:
    """A stat's total as datatrove's stats.json stores it: a bare number, or a dict with "total"."""
    if isinstance(v, dict):
        return v.get("total", 0)
    return getattr(v, "total", v) or 0


def datatrove_stages(logging_dir: Path, with_writer: bool) -> dict[str, StageRow]:
    """Our stage name -> datatrove block counts and seconds, from the merged stats.json."""
    blocks = json.loads((logging_dir / "stats.json").read_text())
    names = list(DT_STAGES) if with_writer else list(DT_STAGES[:-1])
    if len(blocks) != len(names):
        raise RuntimeError(f"datatrove stats.json has {len(blocks)} blocks, expected {len(names)}")
    rows = {}
    for name, block in zip(names, blocks):
        s, secs = block["stats"], _total(block["time_stats"])
        if name == "read":
            n = int(_total(s.get("documents", 0)))
            rows[name] = StageRow(n, n, secs)
        else:
            total = int(_total(s.get("total", 0)))
            out = total if name == "write" else int(_total(s.get("forwarded", 0)))
            rows[name] = StageRow(total, out, secs, int(_total(s.get("timeout", 0))))
    return rows


_LOG_TS = re.compile(r"^(?:\[NODE \d+\] )?(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \|")


def datatrove_tasks(logging_dir: Path, t0: float) -> list[tuple[float, float]]:
    """(start, end) of each task after `t0`: first and last timestamps of its logs/task_*.log."""
    tasks = []
    for p in sorted((logging_dir / "logs").glob("task_*.log")):
        stamps = [m.group(1) for line in p.read_text().splitlines() if (m := _LOG_TS.match(line))]
        if stamps:
            start, end = (
                datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f").timestamp() for s in (stamps[0], stamps[-1])
            )
            tasks.append((start - t0, end - t0))
    return tasks


def run_datatrove(
    files: list[str],
    cfg: ExtractJobConfig,
    cores: int,
    timeout: float,
    work: Path,
    writer: str,
    spark_pids,
    judges: list | None = None,
) -> Run:
    from datatrove.executor import LocalPipelineExecutor

    work.mkdir(parents=True)
    root = os.path.commonpath([os.path.dirname(f) for f in files])
    paths_file = work / "paths.txt"
    paths_file.write_text("".join(os.path.relpath(f, root) + "\n" for f in files))
    writer_dir = str(work / "docs") if writer == "parquet" else None
    logging_dir = work / "logs"
    executor = LocalPipelineExecutor(
        datatrove_pipeline(root, str(paths_file), cfg, timeout, writer_dir, judges),
        tasks=len(files),
        workers=cores,
        logging_dir=str(logging_dir),
        skip_completed=False,
    )
    with Clock(exclude=spark_pids) as clock:
        executor.run()
    tasks = datatrove_tasks(logging_dir, clock.t0)
    done = len(list((logging_dir / "completions").glob("*")))
    failed = [] if done == len(files) else [f"{len(files) - done} of {len(files)} tasks not completed"]
    stages = datatrove_stages(logging_dir, writer_dir is not None)
    return Run("datatrove LocalPipelineExecutor", clock.wall, clock.cpu, cores, stages, tasks, failed)


def run_pool(
    files: list[str], cfg: ExtractJobConfig, cores: int, out: Path, spark_pids, label: str = ""
) -> Run:
    from core.output import OutputDir
    from core.stats import Stats
    from curation.pipeline import process_file, stage_order

    with Clock(exclude=spark_pids) as clock:
        OutputDir(out).prepare("extract", cfg.to_dict(), cfg.fingerprint())
        with multiprocessing.get_context("forkserver").Pool(cores) as pool:
            task = partial(process_file, cfg=cfg, out_root=str(out))
            results = list(pool.imap_unordered(task, files, chunksize=1))
    per_file = [json.loads(p.read_text()) for p in sorted((out / "stats").glob("*.json"))]
    merged = Stats.merged(per_file, order=stage_order(cfg)).to_dict()
    failed = [f"{r['input']}: {r['error']}" for r in results if r["status"] != "done"]
    name = f"ours: process_file x Pool({cores}){label}"
    return Run(name, clock.wall, clock.cpu, cores, our_stages(merged), our_tasks(out, clock.t0), failed)


def start_spark(cores: int, preload: bool = True) -> tuple[float, float, set[int]]:
    """Start the SparkSession run_extract reuses: (session s, first-job s, the JVM's pids). With
    `preload`, the settings `extract` starts its session with (curation/spark_daemon.py: the
    daemon builds the default stages once, workers fork from it); without, Spark's plain daemon."""
    from core.spark import get_spark
    from curation.pipeline import SPARK_CONF

    before = child_pids()
    t0 = time.time()
    spark = get_spark(f"local[{cores}]", "refinery-extract", SPARK_CONF if preload else None)
    t1 = time.time()
    spark.sparkContext.parallelize(range(cores), cores).map(lambda x: x + 1).collect()  # Python workers
    return t1 - t0, time.time() - t1, child_pids() - before


def run_spark(files: list[str], cfg: ExtractJobConfig, cores: int, out: Path, spark_pids) -> Run:
    from core.spark import SparkOptions
    from curation.job import run_extract

    with Clock(roots={os.getpid(), *spark_pids}) as clock:
        res = run_extract(files, str(out), cfg, spark=SparkOptions(f"local[{cores}]", progress=False))
    stats = json.loads((out / "stats.json").read_text())
    failed = [f"{f['input']}: {f['error']}" for f in res.failed]
    name = f"ours: Spark run_extract local[{cores}]"
    return Run(name, clock.wall, clock.cpu, cores, our_stages(stats), our_tasks(out, clock.t0), failed)


def resolve_files(given: list[str] | None, default: tuple[str, ...] = DEFAULT_FILES) -> list[str]:
    """Local files, globs or folders (as `extract --input` takes them), or names in the shared warc/ folder
    (`default` when none are given), largest first."""
    from core.errors import InputError
    from curation.inputs import resolve_inputs

    warc = shared_data_dir() / "warc"
    out = []
    for name in given or default:
        if not Path(name).exists() and (warc / name).is_file():
            name = str(warc / name)
        try:
            out += [str(Path(f).resolve()) for f in resolve_inputs([name])]
        except InputError as e:
            raise SystemExit(f"no such WARC: {name} ({e})") from None
    return sorted(dict.fromkeys(out), key=lambda f: -Path(f).stat().st_size)


def large_inputs(files: list[str], n: int, mb: float, work: Path) -> list[str]:
    """`n` files of at least `mb` MB each, every input concatenated in turn until the size is reached
    (a .warc.gz is a list of gzip members, so a concatenation is a valid WARC). A real crawl file is
    ~1 GB; with a few of them per core, set-up is a small share of any side's time. The same pages
    repeat (trafilatura's in-document `deduplicate` cache sees repeats on both sides alike)."""
    work.mkdir(parents=True)
    data = [Path(f).read_bytes() for f in files]
    out = []
    for i in range(n):
        p = work / f"large-{i}.warc.gz"
        size, k = 0, i  # each file starts at another input, so the files differ in order
        with open(p, "wb") as fh:
            while size < mb * 1e6:
                chunk = data[k % len(data)]
                fh.write(chunk)
                size, k = size + len(chunk), k + 1
        out.append(str(p))
    return out
