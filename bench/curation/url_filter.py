"""Speed of the URL filter: ours (curation/filters/url_filter.py) vs datatrove's URLFilter, µs per URL.

Both run FineWeb's lists (datatrove 0.10.1's package assets) on the same URLs, one document per
call as the extract job does (ours: `UrlFilter.process(Document)`, datatrove: `URLFilter.filter`
on its own Document; both documents built before timing). datatrove runs offline
(testkit/url_filter_reference.py: tldextract's bundled suffix list).

Workloads:
- `shared WARCs`: every distinct WARC-Target-URI of the shared WARC/WET files (1,429 real URLs,
  nearly all kept), the list repeated to at least `--urls` URLs so a pass lasts long enough;
- `shipped lists`: URLs made from the lists themselves (every UT1 URL entry behind http://, every
  500th listed domain with and without `www.`): pages a filter drops, the other branch.

Also: seconds to load the lists and the memory they add to the process (resident set before and
after loading, freed heap returned to the OS first; ours first, then datatrove's).
Timing: best of `--repeats` passes. The last line is one JSON object.

    python -m bench.curation.url_filter [--urls 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import sys
import tarfile
import time
import warnings
from collections.abc import Callable, Sequence

from core.stage import Document
from curation.config import UrlFilterConfig
from curation.filters.url_filter import UrlFilter
from curation.filters.urls import UT1_CATEGORIES, datatrove_asset
from testkit.url_filter_reference import datatrove_url_filter, shared_warc_urls


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _trim() -> None:
    """Return freed heap to the OS (glibc keeps it after a big build), so RSS counts what is held."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: RSS may then count freed heap
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def loaded(build: Callable[[], object]) -> tuple[object, float, float]:
    """(the built filter, seconds, resident MB it added)."""
    _trim()
    before, t0 = rss_mb(), time.perf_counter()
    obj = build()
    seconds = time.perf_counter() - t0
    _trim()
    return obj, seconds, rss_mb() - before


def list_urls() -> list[str]:
    with (
        datatrove_asset(UT1_CATEGORIES["adult"]).open("rb") as raw,
        tarfile.open(fileobj=raw, mode="r:gz") as tar,
    ):
        domains = tar.extractfile("domains").read().decode().split()[::500]  # type: ignore[union-attr]
        entries = tar.extractfile("urls").read().decode().split()  # type: ignore[union-attr]
    www = [f"http://www.{d}/" for d in domains if not d[-1].isdigit()]  # not for IP entries
    return [f"http://{e}" for e in entries] + [f"http://{d}/" for d in domains] + www


def best_us(fn: Callable[[object], object], docs: Sequence[object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for d in docs:
            fn(d)
        best = min(best, time.perf_counter() - t0)
    return best / len(docs) * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--urls", type=int, default=200_000, help="repeat each URL list to at least this many")
    ap.add_argument("--repeats", type=int, default=3, help="passes per cell; the best is reported")
    args = ap.parse_args(argv)
    # tldextract 5.3+ warns on every `registered_domain` read (datatrove 0.10.1 reads it per URL);
    # ignored once here, as a job would configure it, rather than recorded per call.
    warnings.simplefilter("ignore", DeprecationWarning)

    ours, ours_load, ours_mb = loaded(lambda: _ours())
    theirs, theirs_load, theirs_mb = loaded(datatrove_url_filter)
    real, _ = shared_warc_urls()
    workloads = {"shared WARCs": real, "shipped lists": list_urls()}

    from datatrove.data import Document as DtDocument

    print(
        f"lists loaded: ours {ours_load:.2f} s, +{ours_mb:.0f} MB; datatrove {theirs_load:.2f} s, +{theirs_mb:.0f} MB"
    )
    header = f"{'workload':<14} {'distinct':>9} {'timed':>8} {'dropped ours/dt':>16} {'ours µs':>8} {'datatrove µs':>13} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    result: dict[str, object] = {"bench": "url_filter", "repeats": args.repeats}
    for name, urls in workloads.items():
        times = -(-args.urls // len(urls))
        mine = [Document(id=str(i), text=None, metadata={"url": u}) for i, u in enumerate(urls)] * times
        other = [DtDocument(text="", id=str(i), metadata={"url": u}) for i, u in enumerate(urls)] * times
        ours_drops = sum(not isinstance(ours.process(d), Document) for d in mine[: len(urls)])
        theirs_drops = sum(theirs.filter(d) is not True for d in other[: len(urls)])
        us_ours = best_us(ours.process, mine, args.repeats)
        us_theirs = best_us(theirs.filter, other, args.repeats)
        drops = f"{ours_drops}/{theirs_drops}"
        print(
            f"{name:<14} {len(urls):>9} {len(mine):>8} {drops:>16} {us_ours:>8.2f} {us_theirs:>13.2f} "
            f"{us_theirs / us_ours:>7.1f}x",
            flush=True,
        )
        key = name.replace(" ", "_")
        result[key] = {
            "distinct_urls": len(urls),
            "timed_urls": len(mine),
            "dropped_ours": ours_drops,
            "dropped_datatrove": theirs_drops,
            "ours_us_per_url": round(us_ours, 3),
            "datatrove_us_per_url": round(us_theirs, 3),
            "speedup": round(us_theirs / us_ours, 2),
        }
    result.update(
        ours_load_s=round(ours_load, 2),
        datatrove_load_s=round(theirs_load, 2),
        ours_rss_mb=round(ours_mb),
        datatrove_rss_mb=round(theirs_mb),
    )
    print(json.dumps(result))
    return 0


def _ours() -> UrlFilter:
    stage = UrlFilter(UrlFilterConfig())
    stage.warm_up()
    return stage


if __name__ == "__main__":
    sys.exit(main())
