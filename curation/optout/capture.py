"""What a robots.txt capture means: its HTTP status and redirects turned into a `RobotsTxt` (RFC 9309 §2.3).

A capture is the chain of responses fetched for one host's `/robots.txt`: the first for the host itself,
each 3xx followed by the response for its `Location`. `resolve(chain, config)` gives either the parsed
file of the final 2xx response, or a `RobotsTxt` whose status reason decides every URL:

| capture                                   | verdict        | reason                 | why |
|-------------------------------------------|----------------|------------------------|-----|
| none                                      | allow all      | `no_capture`           | nothing says no (Apertus' reading; the report counts it) |
| 2xx                                       | the rules      | `rule`, ...            | §2.3.1.1 |
| 401 / 403                                 | allow all      | `http_401_403`         | §2.3.1.3: 4xx is "unavailable"; config `http_401_403: disallow` gives Common Crawl's and CPython 3.11's reading |
| 429                                       | disallow all   | `http_429`             | Google treats it as unreachable; config `http_429: allow` reads it as a 4xx |
| other 4xx                                 | allow all      | `http_4xx`             | §2.3.1.3 |
| 5xx, or no HTTP response                  | disallow all   | `http_5xx`, `unreachable` | §2.3.1.4: MUST assume complete disallow |
| > `max_redirects` (5) redirects           | allow all      | `redirect_limit`       | §2.3.1.2: after 5 hops MAY treat as unavailable (4xx) |
| a redirect with no Location, or whose target was not fetched | allow all | `redirect_unresolved` | unavailable: no file was obtained |

Why 401/403 allow by default: RFC 9309 puts every 4xx in "unavailable", which permits crawling, and
Google does the same; a 403 on robots.txt is mostly an anti-bot wall, not a statement about AI use.
The other reading (Common Crawl's own analysis, CPython 3.11 `read()`) is one setting away, and the
report shows the delta (about 2.5% of top-1M hosts, research §3.2). Rules of the final response apply
to the initial host (§2.3.1.2). Other status codes (1xx, >= 600) are read as unreachable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urljoin

from core.config import ConfigModel, check_at_least, check_positive
from curation.optout.robots import MAX_BYTES, RobotsTxt, parse


class RobotsConfig(ConfigModel):
    """How a capture's status and redirects are read (the table of the module doc)."""

    http_401_403: Literal["allow", "disallow"] = "allow"
    """RFC 9309 (4xx: unavailable, crawl allowed); `disallow`: Common Crawl's and CPython 3.11's reading."""
    http_429: Literal["allow", "disallow"] = "disallow"
    """Google reads 429 as unreachable (disallow all); `allow` reads it as any other 4xx."""
    max_redirects: int = 5
    """RFC 9309 §2.3.1.2: follow at least five; more and the file counts as unavailable."""
    max_bytes: int = MAX_BYTES
    """RFC 9309 §2.5: parse at least 500 KiB; the rest is ignored and counted."""

    def model_post_init(self, _: object) -> None:
        check_positive("max_bytes", self.max_bytes)
        check_at_least("max_redirects", self.max_redirects, 0)


@dataclass(frozen=True, slots=True)
class Fetch:
    """One response of a capture chain: the URL fetched, its status (None: no HTTP response at all),
    the body (for 2xx) and the Location header (for 3xx)."""

    url: str
    status: int | None
    body: bytes = b""
    location: str | None = None


def status_class(status: int | None, config: RobotsConfig) -> tuple[bool, str] | None:
    """(allowed, reason) for a status that decides every URL, None for a 2xx (the body decides)."""
    if status is None or not 100 <= status < 600:
        return False, "unreachable"
    if 200 <= status < 300:
        return None
    if status in (401, 403):
        return config.http_401_403 == "allow", "http_401_403"
    if status == 429:
        return config.http_429 == "allow", "http_429"
    if 400 <= status < 500:
        return True, "http_4xx"
    if status >= 500:
        return False, "http_5xx"
    return False, "unreachable"  # 1xx as a final status: no file, no answer


def resolve(chain: Sequence[Fetch] | None, config: RobotsConfig | None = None) -> RobotsTxt:
    """The robots.txt in force for the chain's first host (module doc); `redirects` hops are counted
    in the result's `counts`."""
    config = config or RobotsConfig()
    if not chain:
        return RobotsTxt.decided(True, "no_capture")
    redirects = 0
    for i, fetch in enumerate(chain):
        status = fetch.status
        if status is not None and 300 <= status < 400:
            redirects += 1
            if redirects > config.max_redirects:
                return _with_redirects(RobotsTxt.decided(True, "redirect_limit"), redirects)
            nxt = chain[i + 1] if i + 1 < len(chain) else None
            if not fetch.location or nxt is None or nxt.url != urljoin(fetch.url, fetch.location):
                return _with_redirects(RobotsTxt.decided(True, "redirect_unresolved"), redirects)
            continue
        decided = status_class(status, config)
        robots = RobotsTxt.decided(*decided) if decided else parse(fetch.body, config.max_bytes)
        return _with_redirects(robots, redirects)
    raise AssertionError("unreachable: the loop returns at the last response")


def _with_redirects(robots: RobotsTxt, redirects: int) -> RobotsTxt:
    robots.counts["redirects"] = redirects
    return robots
