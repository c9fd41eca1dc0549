"""robots.txt parsed and matched per RFC 9309, every verdict naming the line that decided it.

Why our own: Python 3.11's `urllib.robotparser` takes the first match, has no `*`/`$`, does not merge
groups and matches agents by substring; Protego 0.7.0 lets `User-agent: Google` govern `Google-Extended`
and does not let `User-agent: CCBot/2.0` govern `CCBot`; robotspy 0.13 gets those right but cannot say
which rule decided, which an opt-out audit row needs (../shared/research/optout-2026.md §4.2). None of
them passes every case of google/robotstxt's robots_test.cc (tests/curation/test_robots.py re-expresses
them), so no library is used.

Semantics (RFC 9309, read with google/robotstxt robots.cc @22b355f where the RFC leaves room):
- Lines split on LF, CR or CRLF; a UTF-8 byte-order mark (or a prefix of one) at the start is skipped;
  `#` starts a comment; `key: value` with the key matched case-insensitively by prefix, as Google does
  (`Disallow`, `disallowed`), with Google's accepted typos (`useragent`, `dissallow`, ...) and a missing
  colon (`Disallow /x`) counted but honoured.
- A group is a run of user-agent lines followed by rules; a user-agent line after a rule starts the next
  group. Blank lines, sitemaps and unknown lines do not end a group. Rules before any user-agent line
  are ignored (counted).
- A user-agent value is reduced to its product token, the leading `[A-Za-z_-]` characters, and compared
  case-insensitively for equality: `CCBot/2.0` names CCBot; `Google` does not name `Google-Extended`.
  `*` (alone, or followed by a space) is the global group.
- Every group naming the agent is merged; only when none does, the `*` groups (merged) apply; when
  neither exists, nothing is disallowed.
- The longest matching pattern (in octets of its normalised form) wins; on equal length Allow wins;
  among equals the earlier line. Empty patterns match nothing. `*` matches any run of characters, a
  final `$` anchors the end; anywhere else `$` is literal.
- Percent-encoding, on both the pattern and the URL path (RFC 9309 §2.2.2, Figures 4 and 6):
  non-ASCII octets are %-encoded, escapes of unreserved characters are decoded (`%62` is `b`), other
  escapes are upper-cased (`%2f` is `%2F`); in the URL a literal `*` or `$` equals `%2A` / `%24` in a
  pattern. Google decodes nothing and leaves the URL's encoding to its caller; where the two differ
  (two cases of robots_test.cc's ID_Encoding) the RFC is followed, and the test says so.
- Google-specific, kept: an Allow ending in `/index.htm*` also allows its directory (`/dir/$`).

Bounds on hostile input (each counted in `RobotsTxt.counts`, never a hang): the body is cut at
500 KiB (RFC 9309 §2.5; the line cut there is dropped, since a cut pattern would widen the rule),
a line at Google's 16,663 bytes; a NUL byte flags the body `binary` (it is still parsed, finding
nothing); matching uses no regular expression: a pattern is split at `*` and its pieces found left
to right (leftmost placement of each piece is optimal), O(path x pieces), so `/*a*a*a*a*a*a*b` cannot
backtrack; groups are indexed by token, so 10,000 groups cost a dict lookup per query.

Status codes and redirects are not this module's: curation/optout/capture.py turns a capture into a
`RobotsTxt` (parsed, or deciding every URL with a status reason).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_BYTES = 500 * 1024
"""RFC 9309 §2.5: crawlers must parse at least 500 KiB; content beyond it is ignored."""
MAX_LINE_BYTES = 2083 * 8 - 1
"""Google's line buffer (8 x the 2,083-byte browser URL limit, less the terminator): the rest of a
longer line is ignored (robots.cc `kMaxLineLen`)."""

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
_HIGH = re.compile(rb"[\x80-\xff]")
_TOKEN = re.compile(rb"[A-Za-z_-]*")
_VALID_TOKEN = re.compile(r"[A-Za-z_-]+")
_PATH_START = re.compile(r"[/?;]")
_TWO_WORDS = re.compile(rb"([^ \t]+)[ \t]+([^ \t]+)")
_BOM = b"\xef\xbb\xbf"
_DISALLOW_TYPOS = (b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw")
SIGNAL_VALUES = {"yes": True, "no": False}
"""Content-Signal values (contentsignals.org): anything else is counted as invalid and ignored."""


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the file as written (comment and line ending removed), with its 1-based number."""

    number: int
    text: str


@dataclass(frozen=True, slots=True)
class Rule:
    line: Line
    allow: bool
    pattern: str
    """Normalised (module doc): what is matched, and whose length is the rule's priority."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What robots.txt says about one URL for one agent, and why.

    reason: `rule` (a rule line decided), `no_matching_rule` (a group applied, no rule matched),
    `no_group` (no group names the agent and there is no `*` group), or the status reason of a
    capture that decided every URL (curation/optout/capture.py: `no_capture`, `http_4xx`,
    `http_401_403`, `http_429`, `http_5xx`, `unreachable`, `redirect_limit`, `redirect_unresolved`)."""

    allowed: bool
    reason: str
    agent: str | None = None
    """The group that applied: the queried token, `*`, or None (no group, or the status decided)."""
    rule: Line | None = None
    """The Allow/Disallow line that decided (None unless reason is `rule`)."""
    group: Line | None = None
    """The user-agent line that put the deciding rule under `agent`."""


@dataclass(frozen=True, slots=True)
class Signal:
    """One Content-Signal key as it applies to an agent: `ai-train=no` is `Signal("ai-train", False, ...)`."""

    key: str
    value: bool
    line: Line
    agent: str
    """The group it came from: the queried token or `*`."""


@dataclass(slots=True)
class Group:
    agents: list[tuple[str, Line]] = field(default_factory=list)
    """(product token lower-cased, or `*`; its user-agent line)."""
    rules: list[Rule] = field(default_factory=list)
    signals: list[tuple[str, bool, Line]] = field(default_factory=list)
    closed: bool = False
    """An Allow/Disallow line was seen: the next user-agent line starts a new group."""


def product_token(agent: str) -> str:
    """A queried agent's lower-cased token; only a product token (`[A-Za-z_-]+`, RFC 9309 §2.2.1) is
    a valid query: a policy lists tokens, and `Foo Bar` or `CCBot/2.0` there is a mistake to report.
    `*` is a query too: what the `*` groups alone say (Apertus lists it beside the named agents)."""
    if agent == "*":
        return agent
    if not _VALID_TOKEN.fullmatch(agent):
        raise ValueError(f"not a robots.txt product token ([A-Za-z_-]+): {agent!r}")
    return agent.lower()


def _escape_high(raw: bytes) -> bytes:
    return _HIGH.sub(lambda m: b"%%%02X" % m[0][0], raw)


def _pct(m: re.Match[str]) -> str:
    byte = int(m[1], 16)
    return chr(byte) if byte in _UNRESERVED else "%" + m[1].upper()


def normalise_pattern(raw: bytes) -> str:
    """A rule's path in the form both sides are compared in (module doc); `*` and `$` keep their role."""
    if raw.isascii() and b"%" not in raw:
        return raw.decode("ascii")
    return _PCT.sub(_pct, _escape_high(raw).decode("ascii"))


def normalise_path(path: str) -> str:
    """A URL path (with query) in the compared form: a literal `*`/`$` becomes `%2A`/`%24`, so only a
    pattern's escapes match them."""
    if path.isascii() and "%" not in path and "*" not in path and "$" not in path:
        return path
    raw = _escape_high(path.encode("utf-8", "surrogateescape")).decode("ascii")
    return _PCT.sub(_pct, raw).replace("*", "%2A").replace("$", "%24")


def request_path(url: str) -> str:
    """The path, params and query of a URL (scheme, authority and fragment removed), always starting
    with `/`; `/` when there is none (robots.cc `GetPathParamsQuery`, whose cases the tests repeat)."""
    start = 2 if url.startswith("//") else 0
    proto = url.find("://", start)
    if proto < 0 or ((early := _PATH_START.search(url, start)) and early.start() < proto):
        proto = start  # no scheme, or a path/query/params begins before `://`
    else:
        proto += 3
    m = _PATH_START.search(url, proto)
    if m is None:
        return "/"
    path_start = m.start()
    hash_pos = url.find("#", start)
    if 0 <= hash_pos < path_start:
        return "/"
    path = url[path_start : hash_pos if hash_pos >= 0 else len(url)]
    return path if path[0] == "/" else "/" + path


def _compile(rule: Rule, group_line: Line, pattern: str | None = None) -> tuple:
    """(priority, allow first, line, kind, data, rule, group line): sorted, the first match decides.
    kind 0: prefix, 1: exact (`$`, no `*`), 2: pieces around `*` with an end anchor or not."""
    p = rule.pattern if pattern is None else pattern
    end = p.endswith("$")
    body = p[:-1] if end else p
    if "*" not in body:
        kind, data = (1, body) if end else (0, body)
    else:
        kind, data = 2, (tuple(body.split("*")), end)
    return (-len(p), not rule.allow, rule.line.number, kind, data, rule, group_line)


def _glob(path: str, pieces: tuple[str, ...], end: bool) -> bool:
    """Pattern pieces (split at `*`) against the path: the first anchored at the start, the middle
    ones at their leftmost place after the previous (never worse than any later place), the last at
    the end when anchored. No backtracking: at most one `find` per piece."""
    first = pieces[0]
    if not path.startswith(first):
        return False
    pos = len(first)
    for piece in pieces[1:-1]:
        if piece:
            at = path.find(piece, pos)
            if at < 0:
                return False
            pos = at + len(piece)
    last = pieces[-1]
    if end:
        return len(path) - len(last) >= pos and path.endswith(last)
    return not last or path.find(last, pos) >= 0


BUCKET_CHARS = 4
"""Rules are indexed by the first 4 characters of their literal prefix: a query scans the rules of
its path's bucket and those with a shorter prefix (`/`, `/*.php`), not every rule of the group."""


class _Rules:
    """One agent's merged rules, sorted so that the first match decides (longest, Allow, earlier line)."""

    __slots__ = ("buckets", "label", "short")

    def __init__(self, label: str, compiled: list[tuple]) -> None:
        self.label = label
        self.buckets: dict[str, list[tuple]] = {}
        self.short: list[tuple] = []
        for c in sorted(compiled, key=lambda c: c[:3]):
            prefix = c[4] if c[3] < 2 else c[4][0][0]
            if len(prefix) >= BUCKET_CHARS:
                self.buckets.setdefault(prefix[:BUCKET_CHARS], []).append(c)
            else:
                self.short.append(c)

    def first_match(self, path: str) -> tuple | None:
        a = _first(self.buckets.get(path[:BUCKET_CHARS], ()), path)
        b = _first(self.short, path)
        if a is None or b is None:
            return a or b
        return a if a[:3] < b[:3] else b


def _first(rules: Iterable[tuple], path: str) -> tuple | None:
    for c in rules:
        kind, data = c[3], c[4]
        if kind == 0:
            if path.startswith(data):
                return c
        elif kind == 1:
            if path == data:
                return c
        elif _glob(path, *data):
            return c
    return None


@dataclass(slots=True)
class RobotsTxt:
    """One parsed robots.txt (`parse`), or a capture whose status decides every URL (`decided`).

    `check(url, agent)` is the query; `content_signals(agent)` the Content-Signal keys for an agent;
    `counts` what parsing met (lines, groups, rules, typos, truncation, ...), for the snapshot's stats."""

    groups: list[Group] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    status_reason: str | None = None
    status_allows: bool = True
    _by_token: dict[str, list[int]] = field(default_factory=dict)
    _compiled: dict[str, _Rules | None] = field(default_factory=dict)

    @classmethod
    def decided(cls, allowed: bool, reason: str) -> RobotsTxt:
        """A capture with no rules to read: `reason` (a status class) decides every URL."""
        return cls(status_reason=reason, status_allows=allowed)

    def _index(self) -> None:
        self._by_token.clear()
        for i, g in enumerate(self.groups):
            for token in dict.fromkeys(t for t, _ in g.agents):
                self._by_token.setdefault(token, []).append(i)

    def _select(self, token: str) -> tuple[str | None, list[int]]:
        """The groups that apply to `token`: every group naming it, else every `*` group."""
        if token in self._by_token:
            return None, self._by_token[token]
        return "*", self._by_token.get("*", [])

    def _rules_for(self, agent: str) -> _Rules | None:
        """The agent's merged rules, compiled and indexed once per agent (keyed as queried, so a
        repeated query skips the token check too)."""
        if agent in self._compiled:
            return self._compiled[agent]
        token = product_token(agent)
        star, idx = self._select(token)
        out = None
        if idx:
            compiled = []
            for i in idx:
                g = self.groups[i]
                head = next(line for t, line in g.agents if t == (star or token))
                for r in g.rules:
                    if r.pattern:
                        compiled.append(_compile(r, head))
                        if alias := _index_html_alias(r):
                            compiled.append(_compile(r, head, alias))
            out = _Rules(star or agent, compiled)
        self._compiled[agent] = out
        return out

    def check(self, url: str, agent: str) -> Verdict:
        """May `agent` (a product token) fetch `url` (a URL or a path)? See `Verdict` for the reasons."""
        if self.status_reason is not None:
            product_token(agent)
            return Verdict(self.status_allows, self.status_reason)
        rules = self._rules_for(agent)
        if rules is None:
            return Verdict(True, "no_group")
        c = rules.first_match(normalise_path(request_path(url)))
        if c is None:
            return Verdict(True, "no_matching_rule", rules.label)
        return Verdict(c[5].allow, "rule", rules.label, c[5].line, c[6])

    def content_signals(self, agent: str) -> dict[str, Signal]:
        """The Content-Signal keys that apply to `agent`, from the groups its rules come from (a
        Content-Signal line belongs to its group, as contentsignals.org places it). Where those
        groups give one key both values, `no` wins: a reservation is not undone by another line."""
        if self.status_reason is not None:
            return {}
        token = product_token(agent)
        star, idx = self._select(token)
        out: dict[str, Signal] = {}
        for i in idx:
            for key, value, line in self.groups[i].signals:
                if key not in out or (out[key].value and not value):
                    out[key] = Signal(key, value, line, star or agent)
        return out

    def to_json(self) -> str:
        """The parsed groups (and counts, status) as compact JSON, what a snapshot row stores so the
        matcher can be rebuilt (`from_json`) without the body; patterns are stored normalised."""
        groups = [
            {
                "agents": [[t, ln.number, ln.text] for t, ln in g.agents],
                "rules": [[r.line.number, r.line.text, int(r.allow), r.pattern] for r in g.rules],
                "signals": [[k, int(v), ln.number, ln.text] for k, v, ln in g.signals],
            }
            for g in self.groups
        ]
        status = [self.status_reason, self.status_allows] if self.status_reason is not None else None
        return json.dumps({"groups": groups, "counts": self.counts, "status": status}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RobotsTxt:
        data = json.loads(text)
        robots = cls(counts=data["counts"])
        if data["status"] is not None:
            robots.status_reason, robots.status_allows = data["status"]
        for g in data["groups"]:
            robots.groups.append(
                Group(
                    agents=[(t, Line(n, text)) for t, n, text in g["agents"]],
                    rules=[Rule(Line(n, text), bool(a), p) for n, text, a, p in g["rules"]],
                    signals=[(k, bool(v), Line(n, text)) for k, v, n, text in g["signals"]],
                    closed=bool(g["rules"]),
                )
            )
        robots._index()
        return robots

    def agents(self) -> Iterable[str]:
        """Every token a group names (lower-cased), `*` included."""
        return self._by_token.keys()


def _index_html_alias(rule: Rule) -> str | None:
    """Google-specific: `Allow: /dir/index.html` also allows `/dir/` (robots.cc HandleAllow)."""
    if not rule.allow:
        return None
    slash = rule.pattern.rfind("/")
    if slash < 0 or not rule.pattern.startswith("/index.htm", slash):
        return None
    return rule.pattern[: slash + 1] + "$"


def parse(body: bytes | str, max_bytes: int = MAX_BYTES) -> RobotsTxt:
    """Parse a robots.txt body (bytes as served; a str is taken as UTF-8) within the module's bounds."""
    raw = body.encode("utf-8", "surrogateescape") if isinstance(body, str) else body
    counts = dict.fromkeys(
        ("lines", "groups", "rules", "unknown", "typos", "missing_colon", "rules_outside_group",
         "invalid_agent", "sitemaps", "signals", "signal_invalid", "signal_outside_group",
         "line_too_long", "truncated", "ignored_bytes", "binary"),
        0,
    )  # fmt: skip
    if len(raw) > max_bytes:
        # The line the limit cuts is dropped: a cut `Disallow: /private-area` would block all of /p.
        cut = max(raw.rfind(b"\n", 0, max_bytes + 1), raw.rfind(b"\r", 0, max_bytes + 1), 0)
        counts["truncated"], counts["ignored_bytes"] = 1, len(raw) - cut
        raw = raw[:cut]
    for n in (3, 2, 1):  # a BOM, or the first bytes of one, as Google skips them
        if raw.startswith(_BOM[:n]):
            raw = raw[n:]
            break
    counts["binary"] = int(b"\x00" in raw)
    robots = RobotsTxt(counts=counts)
    group: Group | None = None
    number = 0
    for number, line in enumerate(raw.splitlines(), 1):
        if len(line) > MAX_LINE_BYTES:
            counts["line_too_long"] += 1
            line = line[:MAX_LINE_BYTES]
        if (hash_at := line.find(b"#")) >= 0:
            line = line[:hash_at]
        if not (line := line.strip()):
            continue
        kv = _key_value(line, counts)
        if kv is None:
            continue
        kind, value = kv
        if kind == "user-agent":
            if group is None or group.closed:
                group = Group()
                robots.groups.append(group)
            group.agents.append((_group_token(value, counts), _line(number, line)))
        elif kind in ("allow", "disallow"):
            if group is None:
                counts["rules_outside_group"] += 1
                continue
            group.closed = True
            group.rules.append(Rule(_line(number, line), kind == "allow", normalise_pattern(value)))
            counts["rules"] += 1
        elif kind == "content-signal":
            _add_signals(group, value, _line(number, line), counts)
        elif kind == "sitemap":
            counts["sitemaps"] += 1
        else:
            counts["unknown"] += 1
    counts["lines"] = number
    counts["groups"] = len(robots.groups)
    robots._index()
    return robots


def _line(number: int, line: bytes) -> Line:
    return Line(number, line.decode("utf-8", "replace"))


def _key_value(line: bytes, counts: dict[str, int]) -> tuple[str, bytes] | None:
    """(directive, value) of a line (comment and surrounding blanks removed), None if unparseable."""
    sep = line.find(b":")
    if sep >= 0:
        key, value = line[:sep].strip(), line[sep + 1 :].strip()
    elif m := _TWO_WORDS.fullmatch(line):
        # Google: `Disallow /x` means what it says when the line is exactly two words.
        key, value = m[1], m[2]
        counts["missing_colon"] += 1
    else:
        counts["unknown"] += 1
        return None
    if not key:
        counts["unknown"] += 1
        return None
    kind, typo = _directive(key.lower())
    counts["typos"] += typo
    return kind, value


def _directive(key: bytes) -> tuple[str, bool]:
    """The directive a lower-cased key names, by prefix as robots.cc does, and whether by a typo."""
    if key.startswith(b"user-agent"):
        return "user-agent", False
    if key.startswith((b"useragent", b"user agent")):
        return "user-agent", True
    if key.startswith(b"allow"):
        return "allow", False
    if key.startswith(b"disallow"):
        return "disallow", False
    if key.startswith(_DISALLOW_TYPOS):
        return "disallow", True
    if key.startswith(b"sitemap"):
        return "sitemap", False
    if key.startswith(b"site-map"):
        return "sitemap", True
    if key == b"content-signal":
        return "content-signal", False
    return "other", False


def _group_token(value: bytes, counts: dict[str, int]) -> str:
    """`*` for the global group (Google also takes `* anything`), else the value's product token."""
    if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
        return "*"
    token = _TOKEN.match(value)[0]  # type: ignore[index]  # `*` matches the empty string too
    if not token:
        counts["invalid_agent"] += 1  # `User-agent: /x` or `123bot` names no agent
    return token.decode("ascii").lower()


def _add_signals(group: Group | None, value: bytes, line: Line, counts: dict[str, int]) -> None:
    """`Content-Signal: search=yes, ai-train=no` into the group's signals (contentsignals.org)."""
    if group is None:
        counts["signal_outside_group"] += 1
        return
    for part in value.decode("utf-8", "replace").split(","):
        key, eq, val = part.partition("=")
        key, val = key.strip().lower(), val.strip().lower()
        if not eq or not key or val not in SIGNAL_VALUES:
            counts["signal_invalid"] += 1
            continue
        group.signals.append((key, SIGNAL_VALUES[val], line))
        counts["signals"] += 1
