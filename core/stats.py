"""Per-stage counters that merge across tasks, and the funnel table printed at the end of a job.

For every stage: documents and bytes in and out, seconds spent, and drops per reason (count and
bytes). One `Stats` is filled per input file, written as `stats/<unit>.json`, and the job merges
them into `stats.json`. Bytes are UTF-8 bytes of the text a stage received (raw record bytes for
`read`), so "bytes out" of one stage is "bytes in" of the next.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class StageStats:
    docs_in: int = 0
    docs_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0
    drops: Counter = field(default_factory=Counter)
    drop_bytes: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "docs_in": self.docs_in,
            "docs_out": self.docs_out,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "seconds": round(self.seconds, 6),
            "drops": dict(sorted(self.drops.items())),
            "drop_bytes": dict(sorted(self.drop_bytes.items())),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StageStats:
        return cls(
            docs_in=d["docs_in"],
            docs_out=d["docs_out"],
            bytes_in=d["bytes_in"],
            bytes_out=d["bytes_out"],
            seconds=d["seconds"],
            drops=Counter(d.get("drops", {})),
            drop_bytes=Counter(d.get("drop_bytes", {})),
        )

    def merge(self, other: StageStats) -> None:
        self.docs_in += other.docs_in
        self.docs_out += other.docs_out
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.seconds += other.seconds
        self.drops.update(other.drops)
        self.drop_bytes.update(other.drop_bytes)


class Stats:
    """Ordered stages -> StageStats, plus free-form counters (e.g. charset sources)."""

    def __init__(self) -> None:
        self.stages: dict[str, StageStats] = {}
        self.counters: Counter = Counter()

    def stage(self, name: str) -> StageStats:
        st = self.stages.get(name)
        if st is None:
            st = self.stages[name] = StageStats()
        return st

    def enter(self, stage: str, nbytes: int) -> None:
        st = self.stage(stage)
        st.docs_in += 1
        st.bytes_in += nbytes

    def keep(self, stage: str, nbytes: int) -> None:
        st = self.stage(stage)
        st.docs_out += 1
        st.bytes_out += nbytes

    def drop(self, stage: str, reason: str, nbytes: int) -> None:
        st = self.stage(stage)
        st.drops[reason] += 1
        st.drop_bytes[reason] += nbytes

    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.stage(stage).seconds += time.perf_counter() - t0

    def to_dict(self) -> dict[str, Any]:
        # A list, not a mapping: the funnel order must survive JSON writers that sort keys.
        return {
            "stages": [{"stage": k, **v.to_dict()} for k, v in self.stages.items()],
            "counters": dict(sorted(self.counters.items())),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Stats:
        s = cls()
        for v in d.get("stages", []):
            s.stages[v["stage"]] = StageStats.from_dict(v)
        s.counters = Counter(d.get("counters", {}))
        return s

    @classmethod
    def merged(cls, items: Iterable[dict[str, Any]], order: Iterable[str] = ()) -> Stats:
        """Sum of per-file stats; stages listed in `order` come first, in that order."""
        out = cls()
        for name in order:
            out.stage(name)
        for d in items:
            other = cls.from_dict(d)
            for k, v in other.stages.items():
                out.stage(k).merge(v)
            out.counters.update(other.counters)
        return out


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def funnel_table(stats: Stats, top_reasons: int = 4) -> str:
    """The funnel as a text table: one row per stage, with its top drop reasons."""
    headers = [
        "stage",
        "docs in",
        "docs out",
        "dropped",
        "bytes in",
        "bytes out",
        "seconds",
        "top drop reasons",
    ]
    rows = []
    for name, st in stats.stages.items():
        dropped = sum(st.drops.values())
        # Filter reasons are "<filter>:<rule>"; the row already names the filter.
        prefix = name.removeprefix("filter:") + ":"
        reasons = ", ".join(f"{r.removeprefix(prefix)} {c}" for r, c in st.drops.most_common(top_reasons))
        if st.docs_in == 0 and not st.drops:
            continue
        rows.append(
            [
                name,
                f"{st.docs_in:,}",
                f"{st.docs_out:,}",
                f"{dropped:,}",
                _fmt_bytes(st.bytes_in),
                _fmt_bytes(st.bytes_out),
                f"{st.seconds:.1f}",
                reasons,
            ]
        )
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [
        "  ".join(h.ljust(w) if i in (0, 7) else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths))),
        "  ".join("-" * w for w in widths),
    ]
    for r in rows:
        lines.append(
            "  ".join(c.ljust(w) if i in (0, 7) else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        )
    return "\n".join(lines)
