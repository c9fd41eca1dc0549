"""Read a WARC file into pages (`iter_records`), with the engine the config names.

Two engines yield the same sequence of `Page` and `Skip` items for the same file: `warcio`
(curation/warc/warcio_reader.py, which reads every version and quirk) and `fastwarc`
(curation/warc/fastwarc_reader.py: FastWARC where it reads a file exactly as warcio does, warcio for the
rest). This module only chooses; both engines import their shared pieces from warcio_reader, so no
module imports back the one that chose it.
"""

from __future__ import annotations

from collections.abc import Iterator

from curation.config import ReaderConfig
from curation.warc.fastwarc_reader import iter_records_fastwarc
from curation.warc.warcio_reader import Page, Skip, crawl_from_name, iter_records_warcio, parse_warc_date

__all__ = ["Page", "Skip", "crawl_from_name", "iter_records", "parse_warc_date"]


def iter_records(
    path: str, cfg: ReaderConfig, crawl_hint: str | None = None, start: int = 0, end: int | None = None
) -> Iterator[Page | Skip]:
    """Yield a Page or a Skip for every record of the WARC at local `path`; never raises on bad data.

    With `start`/`end` (a range of curation/warc/ranges.py, starting at a record's gzip member), only
    the records starting in [start, end), with the items and absolute offsets the whole file gives.
    """
    if cfg.engine == "fastwarc":
        return iter_records_fastwarc(path, cfg, crawl_hint, start, end)
    return iter_records_warcio(path, cfg, crawl_hint, start, end)
