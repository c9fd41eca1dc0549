"""The robots.txt matcher (curation/optout/robots.py) and capture statuses (curation/optout/capture.py).

- Google's conformance cases: every TEST of google/robotstxt robots_test.cc @22b355f re-expressed on our
  API (test names `test_google_<TEST name>`), with the two cases where RFC 9309 and Google differ named
  and asserted the RFC's way.
- The nine agent-matching cases of ../shared/research/optout-2026.md §4.2 and RFC 9309's own examples,
  asserting the deciding line and reason, not only the boolean.
- Status classes and redirects, Content-Signal lines, hostile bodies (each with its bound and counter).
- The 4,231 real robots.txt files of the shared data: every file within bounds, and known sites'
  outcomes checked against their text as read here.
"""

from __future__ import annotations

import gzip
import json
import random
from functools import cache

import pytest

from core.errors import ConfigError
from curation.optout.capture import Fetch, RobotsConfig, resolve
from curation.optout.robots import (
    MAX_BYTES,
    MAX_LINE_BYTES,
    Line,
    normalise_path,
    normalise_pattern,
    parse,
    product_token,
    request_path,
)
from testkit.shared_data import shared_data_dir


def allowed(robots: str | bytes, agent: str, url: str) -> bool:
    return parse(robots).check(url, agent).allowed


def directives(robots: str | bytes) -> tuple[int, int]:
    """(directives the parser understood, unknown lines): robots_test.cc's RobotsStatsReporter counts."""
    r = parse(robots)
    c = r.counts
    understood = sum(len(g.agents) for g in r.groups) + c["rules"] + c["rules_outside_group"] + c["sitemaps"]
    return understood, r.counts["unknown"]


# ---------------------------------------------------------------- google/robotstxt robots_test.cc


def test_google_GoogleOnly_SystemTest():
    robots = "user-agent: FooBot\ndisallow: /\n"
    assert allowed("", "FooBot", "")
    assert not allowed(robots, "FooBot", "")  # an empty URL is the path "/"
    # Google allows everything for an empty agent; a policy's agent must be a product token, so an
    # empty one is refused as the caller's mistake rather than silently allowed.
    with pytest.raises(ValueError, match="product token"):
        parse(robots).check("", "")


def test_google_ID_LineSyntax_Line():
    url = "http://foo.bar/x/y"
    assert not allowed("user-agent: FooBot\ndisallow: /\n", "FooBot", url)
    assert allowed("foo: FooBot\nbar: /\n", "FooBot", url)
    # Google-specific, kept: a missing colon is read as one when the line is two words.
    assert not allowed("user-agent FooBot\ndisallow /\n", "FooBot", url)
    assert parse("user-agent FooBot\ndisallow /\n").counts["missing_colon"] == 2


def test_google_ID_LineSyntax_Groups():
    robots = (
        "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
        "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
        "allow: /z/\ndisallow: /\n"
    )
    url = "http://foo.bar/{}".format
    assert allowed(robots, "FooBot", url("x/b"))
    assert allowed(robots, "FooBot", url("z/d"))
    assert not allowed(robots, "FooBot", url("y/c"))
    assert allowed(robots, "BarBot", url("y/c"))
    assert allowed(robots, "BarBot", url("w/a"))
    assert not allowed(robots, "BarBot", url("z/d"))
    assert allowed(robots, "BazBot", url("z/d"))
    for agent in ("FooBot", "BarBot", "BazBot"):  # the rule before any group is ignored
        assert not allowed(robots, agent, url("foo/bar/"))
    assert parse(robots).counts["rules_outside_group"] == 1
    # The two FooBot groups merge: /z/ comes from the second, the first's /x/ still holds.
    v = parse(robots).check(url("z/d"), "FooBot")
    assert v.rule == Line(15, "allow: /z/") and v.group == Line(14, "user-agent: FooBot")


def test_google_ID_LineSyntax_Groups_OtherRules():
    for other in ("Sitemap: https://foo.bar/sitemap", "Invalid-Unknown-Line: unknown"):
        robots = f"User-agent: BarBot\n{other}\nUser-agent: *\nDisallow: /\n"
        assert not allowed(robots, "FooBot", "http://foo.bar/")
        assert not allowed(robots, "BarBot", "http://foo.bar/")  # the line did not end BarBot's group


def test_google_ID_REPLineNamesCaseInsensitive():
    for robots in (
        "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
        "user-agent: FooBot\nallow: /x/\ndisallow: /\n",
        "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
    ):
        assert allowed(robots, "FooBot", "http://foo.bar/x/y")
        assert not allowed(robots, "FooBot", "http://foo.bar/a/b")


def test_google_ID_VerifyValidUserAgentsToObey():
    for good in ("Foobot", "Foobot-Bar", "Foo_Bar"):
        assert product_token(good) == good.lower()
    for bad in ("", "ツ", "Foobot*", " Foobot ", "Foobot/2.1", "Foobot Bar"):
        with pytest.raises(ValueError):
            product_token(bad)


def test_google_ID_UserAgentValueCaseInsensitive():
    for value in ("FOO BAR", "foo bar", "FoO bAr"):
        robots = f"User-Agent: {value}\nAllow: /x/\nDisallow: /\n"
        for agent in ("Foo", "foo"):
            assert allowed(robots, agent, "http://foo.bar/x/y")
            assert not allowed(robots, agent, "http://foo.bar/a/b")


def test_google_GoogleOnly_AcceptUserAgentUpToFirstSpace():
    robots = "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n"
    assert allowed(robots, "Foo", "http://foo.bar/x/y")
    # Google answers "disallowed" for the query `Foo Bar` (no group equals it); a query that is not
    # a product token is refused here (test_google_ID_VerifyValidUserAgentsToObey).
    with pytest.raises(ValueError):
        allowed(robots, "Foo Bar", "http://foo.bar/x/y")


def test_google_ID_GlobalGroups_Secondary():
    url = "http://foo.bar/x/y"
    glob = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
    specific = (
        "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n"
    )
    assert parse("").check(url, "FooBot").reason == "no_group"
    assert not allowed(glob, "FooBot", url)
    assert allowed(glob, "BarBot", url)
    v = parse(specific).check(url, "QuxBot")
    assert v.allowed and v.reason == "no_group" and v.agent is None


def test_google_ID_AllowDisallow_Value_CaseSensitive():
    assert not allowed("user-agent: FooBot\ndisallow: /x/\n", "FooBot", "http://foo.bar/x/y")
    assert allowed("user-agent: FooBot\ndisallow: /X/\n", "FooBot", "http://foo.bar/x/y")


@pytest.mark.parametrize(
    ("rules", "url", "expected"),
    [
        ("disallow: /x/page.html\nallow: /x/", "/x/page.html", False),
        ("allow: /x/page.html\ndisallow: /x/", "/x/page.html", True),
        ("allow: /x/page.html\ndisallow: /x/", "/x/", False),
        ("disallow: \nallow: ", "/x/page.html", True),  # empty patterns decide nothing
        ("disallow: /\nallow: /", "/x/page.html", True),  # equal length: allow wins
        ("disallow: /x\nallow: /x/", "/x", False),
        ("disallow: /x\nallow: /x/", "/x/", True),
        ("disallow: /x/page.html\nallow: /x/page.html", "/x/page.html", True),
        ("allow: /page\ndisallow: /*.html", "/page.html", False),
        ("allow: /page\ndisallow: /*.html", "/page", True),
        ("allow: /x/page.\ndisallow: /*.html", "/x/page.html", True),
        ("allow: /x/page.\ndisallow: /*.html", "/x/y.html", False),
    ],
)
def test_google_ID_LongestMatch(rules, url, expected):
    assert allowed(f"user-agent: FooBot\n{rules}\n", "FooBot", "http://foo.bar" + url) is expected


def test_google_ID_LongestMatch_specific_group_replaces_global():
    robots = "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n"
    assert allowed(robots, "FooBot", "http://foo.bar/x/page")
    assert not allowed(robots, "FooBot", "http://foo.bar/y/page")


def test_google_ID_Encoding():
    query = "/foo/bar?qux=taz&baz=http://foo.bar?tar&par"
    assert allowed(f"User-agent: FooBot\nDisallow: /\nAllow: {query}\n", "FooBot", "http://foo.bar" + query)
    for rule in ("/foo/bar/ツ", "/foo/bar/%E3%83%84", "/foo/bar/%e3%83%84"):
        robots = f"User-agent: FooBot\nDisallow: /\nAllow: {rule}\n"
        assert allowed(robots, "FooBot", "http://foo.bar/foo/bar/%E3%83%84")
        # Google: "disallowed", leaving the URL's encoding to its caller. RFC 9309 §2.2.2 requires
        # the URI's non-ASCII octets to be %-encoded before comparison, which we do: allowed.
        assert allowed(robots, "FooBot", "http://foo.bar/foo/bar/ツ")
    robots = "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n"
    assert allowed(robots, "FooBot", "http://foo.bar/foo/bar/%62%61%7A")
    # Google: "disallowed" ("should not be relied on"). RFC 9309 Figure 4 lists /foo/bar/%62%61%7A as
    # matching /foo/bar/baz (unreserved escapes are decoded, RFC 3986 §6.2.2.2): allowed.
    assert allowed(robots, "FooBot", "http://foo.bar/foo/bar/baz")


def test_google_ID_SpecialCharacters():
    robots = "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n"
    assert not allowed(robots, "FooBot", "http://foo.bar/foo/bar/quz")
    for path in ("/foo/quz", "/foo//quz", "/foo/bax/quz"):
        assert allowed(robots, "FooBot", "http://foo.bar" + path)
    robots = "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n"
    assert not allowed(robots, "FooBot", "http://foo.bar/foo/bar")
    for path in ("/foo/bar/qux", "/foo/bar/", "/foo/bar/baz"):
        assert allowed(robots, "FooBot", "http://foo.bar" + path)
    robots = "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n"
    assert allowed(robots, "FooBot", "http://foo.bar/foo/bar")
    assert not allowed(robots, "FooBot", "http://foo.bar/foo/quz")


def test_google_GoogleOnly_IndexHTMLisDirectory():
    robots = "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n"
    v = parse(robots).check("http://foo.com/allowed-slash/", "foobot")
    assert v.allowed and v.rule == Line(2, "Allow: /allowed-slash/index.html")
    assert not allowed(robots, "foobot", "http://foo.com/allowed-slash/index.htm")
    assert allowed(robots, "foobot", "http://foo.com/allowed-slash/index.html")
    assert not allowed(robots, "foobot", "http://foo.com/anyother-url")


def test_google_GoogleOnly_LineTooLong():
    # A line keeps its first MAX_LINE_BYTES bytes (Google: 8 x 2083 less one); the rest is ignored.
    assert MAX_LINE_BYTES == 16663
    longline = "/x/" + "a" * (2083 * 8 - 3 - len("disallow: ") + 1 - 3)
    robots = f"user-agent: FooBot\ndisallow: {longline}/qux\n"
    assert allowed(robots, "FooBot", "http://foo.bar/fux")
    assert not allowed(robots, "FooBot", f"http://foo.bar{longline}/fux")  # matches the cut rule
    assert parse(robots).counts["line_too_long"] == 1
    n = 2083 * 8 - 3 - len("allow: ") + 1 - 3
    a, b = "/x/" + "a" * n, "/x/" + "b" * n
    robots = f"user-agent: FooBot\ndisallow: /\nallow: {a}/qux\nallow: {b}/qux\n"
    assert not allowed(robots, "FooBot", "http://foo.bar/")
    assert allowed(robots, "FooBot", f"http://foo.bar{a}/qux")
    assert allowed(robots, "FooBot", f"http://foo.bar{b}/fux")


FISH_CASES = {
    "/fish": (
        [
            "/fish",
            "/fish.html",
            "/fish/salmon.html",
            "/fishheads",
            "/fishheads/yummy.html",
            "/fish.html?id=anything",
        ],
        ["/bar", "/Fish.asp", "/catfish", "/?id=fish"],
    ),
    "/fish*": (
        [
            "/fish",
            "/fish.html",
            "/fish/salmon.html",
            "/fishheads",
            "/fishheads/yummy.html",
            "/fish.html?id=anything",
        ],
        ["/bar", "/Fish.bar", "/catfish", "/?id=fish"],
    ),
    "/fish/": (
        ["/fish/", "/fish/salmon", "/fish/?salmon", "/fish/salmon.html", "/fish/?id=anything"],
        ["/bar", "/fish", "/fish.html", "/Fish/Salmon.html"],
    ),
    "/*.php": (
        [
            "/filename.php",
            "/folder/filename.php",
            "/folder/filename.php?parameters",
            "//folder/any.php.file.html",
            "/filename.php/",
            "/index?f=filename.php/",
        ],
        ["/bar", "/php/", "/index?php", "/windows.PHP"],
    ),
    "/*.php$": (
        ["/filename.php", "/folder/filename.php"],
        [
            "/bar",
            "/filename.php?parameters",
            "/filename.php/",
            "/filename.php5",
            "/php/",
            "/filename?php",
            "/aaaphpaaa",
            "//windows.PHP",
        ],
    ),
    "/fish*.php": (["/fish.php", "/fishheads/catfish.php?parameters"], ["/bar", "/Fish.PHP"]),
}


@pytest.mark.parametrize("allow", FISH_CASES)
def test_google_GoogleOnly_DocumentationChecks(allow):
    robots = parse(f"user-agent: FooBot\ndisallow: /\nallow: {allow}\n")
    yes, no = FISH_CASES[allow]
    assert [p for p in yes if not robots.check("http://foo.bar" + p, "FooBot").allowed] == []
    assert [p for p in no if robots.check("http://foo.bar" + p, "FooBot").allowed] == []


def test_google_GoogleOnly_DocumentationChecks_precedence():
    assert allowed("user-agent: FooBot\nallow: /p\ndisallow: /\n", "FooBot", "http://example.com/page")
    assert allowed(
        "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n", "FooBot", "http://example.com/folder/page"
    )
    assert not allowed(
        "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n", "FooBot", "http://example.com/page.htm"
    )
    robots = "user-agent: FooBot\nallow: /$\ndisallow: /\n"
    assert allowed(robots, "FooBot", "http://example.com/")
    assert not allowed(robots, "FooBot", "http://example.com/page.html")


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r", "mixed", "no final newline"])
def test_google_ID_LinesNumbersAreCountedCorrectly(eol):
    lines = ["User-Agent: foo", "Allow: /some/path", "User-Agent: bar", "", "", "Disallow: /"]
    if eol == "mixed":
        robots = "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /"
    elif eol == "no final newline":
        robots = "\n".join(lines)
    else:
        robots = eol.join(lines) + eol
    assert directives(robots) == (4, 0)
    v = parse(robots).check("/x", "bar")
    assert v.rule == Line(6, "Disallow: /") and v.group == Line(3, "User-Agent: bar")


def test_google_ID_UTF8ByteOrderMarkIsSkipped():
    body = b"User-Agent: foo\nAllow: /AnyValue\n"
    for bom in (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef"):
        assert directives(bom + body) == (2, 0)
    assert directives(b"\xef\x11\xbf" + body) == (1, 1)  # a broken BOM makes the first line garbage
    assert directives(b"User-Agent: foo\n\xef\xbb\xbfAllow: /AnyValue\n") == (1, 1)  # only at the start


def test_google_ID_NonStandardLineExample_Sitemap():
    groups = "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\n"
    for robots in (
        groups + "Sitemap: http://foo.bar/sitemap.xml\n",
        "Sitemap: http://foo.bar/sitemap.xml\n" + groups,
    ):
        r = parse(robots)
        assert r.counts["sitemaps"] == 1 and r.counts["unknown"] == 0


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("", "/"),
        ("http://www.example.com", "/"),
        ("http://www.example.com/", "/"),
        ("http://www.example.com/a", "/a"),
        ("http://www.example.com/a/", "/a/"),
        ("http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
        ("http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("example.com", "/"),
        ("example.com/", "/"),
        ("example.com/a", "/a"),
        ("example.com/a/", "/a/"),
        ("example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("a", "/"),
        ("a/", "/"),
        ("/a", "/a"),
        ("a/b", "/b"),
        ("example.com?a", "/?a"),
        ("example.com/a;b#c", "/a;b"),
        ("//a/b/c", "/b/c"),
    ],
)
def test_google_TestGetPathParamsQuery(url, path):
    assert request_path(url) == path


def test_google_TestMaybeEscapePattern():
    assert normalise_pattern(b"http://www.example.com") == "http://www.example.com"
    assert normalise_pattern(b"/a/b/c") == "/a/b/c"
    assert normalise_pattern("á".encode()) == "%C3%A1"
    assert normalise_pattern(b"%aa") == "%AA"


# ---------------------------------------------------------------- the research's nine cases, RFC 9309


NINE = [
    ("User-agent: CCBot/2.0\nDisallow: /\n", "CCBot", "/", False, 2),
    ("User-agent: Google\nDisallow: /\n", "Google-Extended", "/", True, None),
    ("User-agent: *\nDisallow: /\n\nUser-agent: GPTBot\nAllow: /\n", "GPTBot", "/", True, 5),
    ("User-agent: *\nDisallow: /wp-admin/\nAllow: /wp-admin/admin-ajax.php\n", "GPTBot", "/wp-admin/admin-ajax.php", True, 3),
    ("User-agent: *\nDisallow: /*.pdf$\n", "GPTBot", "/a/b.pdf", False, 2),
    ("User-agent: GPTBot\nDisallow: /a/\n\nUser-agent: GPTBot\nDisallow: /b/\n", "GPTBot", "/b/x", False, 5),
    ("User-agent: bot\nDisallow: /\n", "GPTBot", "/", True, None),
    ("User-agent: gptbot\nDisallow: /\n", "GPTBot", "/", False, 2),
    ("User-agent: GPTBot\n\nDisallow: /\n", "GPTBot", "/", False, 3),
]  # fmt: skip


@pytest.mark.parametrize(("robots", "agent", "path", "expected", "line"), NINE)
def test_research_nine_agent_cases(robots, agent, path, expected, line):
    v = parse(robots).check("https://example.com" + path, agent)
    assert v.allowed is expected
    assert (v.rule.number if v.rule else None) == line


def test_stdlib_robotparser_fails_the_nine_cases_it_is_not_used_for():
    """Why no library: Python 3.11's parser gets 7 of the 9 wrong (the research's count)."""
    from urllib.robotparser import RobotFileParser

    wrong = 0
    for robots, agent, path, expected, _ in NINE:
        rp = RobotFileParser()
        rp.parse(robots.splitlines())
        wrong += rp.can_fetch(agent, "https://example.com" + path) is not expected
    assert wrong == 7


RFC_EXAMPLE = """\
User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
"""


@pytest.mark.parametrize(
    ("agent", "path", "expected", "line", "reason"),
    [
        ("otherbot", "/example/x", False, 3, "rule"),
        ("otherbot", "/a.gif", False, 2, "rule"),
        ("otherbot", "/publications/x", True, 4, "rule"),
        ("foobot", "/example/page.html", True, 8, "rule"),
        ("foobot", "/example/allowed.gif", True, 9, "rule"),
        ("foobot", "/x", False, 7, "rule"),
        ("barbot", "/example/page.html", False, 13, "rule"),
        ("bazbot", "/example/page.html", False, 13, "rule"),
        ("bazbot", "/a.gif", True, None, "no_matching_rule"),  # its own group, not `*`
        ("quxbot", "/example/x", True, None, "no_matching_rule"),  # named, no rules: all allowed
    ],
)
def test_rfc9309_section5_example(agent, path, expected, line, reason):
    v = parse(RFC_EXAMPLE).check(path, agent)
    assert (v.allowed, v.rule.number if v.rule else None, v.reason) == (expected, line, reason)


def test_rfc9309_figure6_escaped_specials_are_literals():
    robots = parse("User-agent: *\nDisallow: /path/file-with-a-%2A.html\nDisallow: /path/foo-%24\n")
    assert not robots.check("/path/file-with-a-*.html", "x").allowed
    assert not robots.check("/path/file-with-a-%2a.html", "x").allowed
    assert robots.check("/path/file-with-a-x.html", "x").allowed
    assert not robots.check("/path/foo-$", "x").allowed
    assert robots.check("/path/foo-x", "x").allowed


def test_verdict_names_the_agent_group_and_line():
    robots = parse(
        "# c\nUser-agent: CCBot/1.0\nUser-agent: GPTBot\nDisallow: /private # why\n\nUser-agent: *\nAllow: /\n"
    )
    v = robots.check("https://a.org/private/x", "ccbot")
    assert v == type(v)(
        False, "rule", "ccbot", Line(4, "Disallow: /private"), Line(2, "User-agent: CCBot/1.0")
    )
    v = robots.check("https://a.org/private/x", "GPTBot")
    assert v.group == Line(3, "User-agent: GPTBot") and v.agent == "GPTBot"
    v = robots.check("https://a.org/private/x", "ClaudeBot")
    assert (v.allowed, v.agent, v.rule) == (True, "*", Line(7, "Allow: /"))


# ---------------------------------------------------------------- capture status and redirects

BODY = b"User-agent: *\nDisallow: /private\n"
ROBOTS = "https://a.org/robots.txt"


@pytest.mark.parametrize(
    ("status", "allowed_", "reason"),
    [(404, True, "http_4xx"), (410, True, "http_4xx"), (401, True, "http_401_403"), (403, True, "http_401_403"),
     (429, False, "http_429"), (500, False, "http_5xx"), (503, False, "http_5xx"), (None, False, "unreachable"),
     (600, False, "unreachable")],
)  # fmt: skip
def test_status_decides_every_url(status, allowed_, reason):
    v = resolve([Fetch(ROBOTS, status, BODY)]).check("https://a.org/private", "GPTBot")
    assert (v.allowed, v.reason, v.rule) == (allowed_, reason, None)


def test_401_403_and_429_follow_the_config():
    block = RobotsConfig(http_401_403="disallow", http_429="allow")
    assert not resolve([Fetch(ROBOTS, 403)], block).check("/", "GPTBot").allowed
    assert resolve([Fetch(ROBOTS, 429)], block).check("/", "GPTBot").allowed
    with pytest.raises(ConfigError):
        RobotsConfig(http_401_403="block")


def test_no_capture_allows_and_200_parses():
    assert resolve(None).check("/private", "GPTBot").reason == "no_capture"
    assert resolve([]).check("/private", "GPTBot").allowed
    v = resolve([Fetch(ROBOTS, 200, BODY)]).check("/private", "GPTBot")
    assert (v.allowed, v.rule) == (False, Line(2, "Disallow: /private"))


def chain(hops: int, final: Fetch | None) -> list[Fetch]:
    urls = [f"https://a.org/r{i}/robots.txt" for i in range(hops)] + ["https://www.a.org/robots.txt"]
    out = [Fetch(urls[i], 301 if i % 2 else 302, location=urls[i + 1]) for i in range(hops)]
    return out + ([Fetch(urls[-1], final.status, final.body)] if final else [])


def test_redirects_up_to_five_are_followed_and_more_are_unavailable():
    robots = resolve(chain(5, Fetch("", 200, BODY)))
    assert not robots.check("/private", "GPTBot").allowed and robots.counts["redirects"] == 5
    v = resolve(chain(6, Fetch("", 200, BODY))).check("/private", "GPTBot")
    assert (v.allowed, v.reason) == (True, "redirect_limit")  # RFC 9309 §2.3.1.2: as if 4xx
    assert resolve(chain(2, Fetch("", 503))).check("/", "GPTBot").reason == "http_5xx"
    assert resolve(chain(1, None)).check("/", "GPTBot").reason == "redirect_unresolved"
    assert resolve([Fetch(ROBOTS, 301)]).check("/", "GPTBot").reason == "redirect_unresolved"
    wrong = [Fetch(ROBOTS, 301, location="/elsewhere.txt"), Fetch("https://b.org/robots.txt", 200, BODY)]
    assert resolve(wrong).check("/", "GPTBot").reason == "redirect_unresolved"  # not the Location's target
    relative = [Fetch(ROBOTS, 301, location="/r/robots.txt"), Fetch("https://a.org/r/robots.txt", 200, BODY)]
    assert not resolve(relative).check("/private", "GPTBot").allowed


# ---------------------------------------------------------------- Content-Signal


def test_content_signal_is_read_per_group():
    robots = parse(
        "User-Agent: *\nContent-Signal: ai-train=no, search=yes, ai-input=yes\nAllow: /\n\n"
        "User-agent: GPTBot\nContent-signal: search=yes\nDisallow: /x\n"
    )
    s = robots.content_signals("ClaudeBot")
    assert {k: v.value for k, v in s.items()} == {"ai-train": False, "search": True, "ai-input": True}
    assert s["ai-train"].line == Line(2, "Content-Signal: ai-train=no, search=yes, ai-input=yes")
    assert s["ai-train"].agent == "*"
    # GPTBot's own group replaces `*` for its signals too: no ai-train preference is stated for it.
    assert {k: v.value for k, v in robots.content_signals("GPTBot").items()} == {"search": True}
    assert robots.check("/page", "ClaudeBot").allowed  # a signal is not a rule
    assert robots.counts["signals"] == 4


def test_content_signal_no_wins_and_bad_values_are_counted():
    robots = parse(
        "Content-Signal: ai-train=no\nUser-agent: *\nContent-Signal: ai-train=yes\nContent-Signal: ai-train=no, "
        "search=maybe, junk\n"
    )
    s = robots.content_signals("x")
    assert s["ai-train"].value is False and s["ai-train"].line.number == 4
    assert robots.counts["signal_invalid"] == 2 and robots.counts["signal_outside_group"] == 1
    assert resolve([Fetch(ROBOTS, 503)]).content_signals("x") == {}


# ---------------------------------------------------------------- hostile input


# A bounded input must not hang: each hostile test fails after HANG_S (pytest-timeout) instead of
# stalling the suite. Its seconds are bench/curation/robots.py's to measure, not an assertion here
# (CI's shared cores); 60 s is ~100x what these take, and an exponential matcher would never finish.
HANG_S = 60


@pytest.mark.security
@pytest.mark.timeout(HANG_S)
def test_huge_body_is_cut_at_500_kib_and_the_cut_line_dropped():
    head = b"User-agent: *\n"
    filler = b"Disallow: /filler\n" * ((MAX_BYTES - len(head)) // 18)
    pad = MAX_BYTES - len(head) - len(filler) - 3
    body = head + filler + b"#" * pad + b"\nDisallow: /private-area\n" + b"Disallow: /more\n" * 300_000
    robots = parse(body)
    assert robots.counts["truncated"] == 1
    assert robots.counts["ignored_bytes"] == len(body) - (len(head) + len(filler) + pad)
    assert robots.check("/p", "x").allowed  # `Disallow: /p` (the cut line) was not kept
    assert robots.check("/filler", "x").rule.text == "Disallow: /filler"


@pytest.mark.security
@pytest.mark.timeout(HANG_S)
def test_endless_line_and_binary_body_are_bounded():
    endless = b"User-agent: *\nDisallow: /" + b"a" * (8 * 2**20)
    robots = parse(endless)
    assert robots.counts["truncated"] == 1 and robots.counts["rules"] == 0
    long_line = b"User-agent: *\nDisallow: /" + b"a" * 100_000 + b"\n"
    r = parse(long_line)
    assert r.counts["line_too_long"] == 1 and len(r.groups[0].rules[0].pattern) == MAX_LINE_BYTES - len(
        "Disallow: "
    )
    binary = random.Random(7).randbytes(2**20)
    robots = parse(binary)
    assert robots.counts["binary"] == 1 and robots.counts["truncated"] == 1
    assert robots.check("/x", "GPTBot").allowed


def letters(i: int) -> str:
    out = ""
    while True:
        i, r = divmod(i, 26)
        out += chr(97 + r)
        if not i:
            return "bot" + out


@pytest.mark.security
@pytest.mark.timeout(HANG_S)
def test_ten_thousand_groups_cost_a_lookup():
    # 5,000 named groups and 5,000 `*` groups (merged into one of 5,000 rules), within 500 KiB.
    body = "".join(
        f"User-agent: {letters(i)}\nDisallow: /p{i}\nUser-agent: *\nDisallow: /s{i}/\n" for i in range(5_000)
    )
    robots = parse(body)
    assert robots.counts["groups"] == 10_000 and robots.counts["truncated"] == 0
    v = [robots.check(f"/p{i}", letters(i)) for i in range(0, 5_000, 50)]
    assert all(not x.allowed for x in v)
    v = [robots.check(f"/s{i}/x", "other") for i in range(0, 5_000, 250)]
    assert all(not x.allowed and x.agent == "*" for x in v)
    assert robots.check("/s5000/", "other").reason == "no_matching_rule"


@pytest.mark.security
@pytest.mark.timeout(HANG_S)
def test_wildcards_that_would_backtrack_match_in_linear_time():
    robots = parse("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*b\nDisallow: /*a*a*a*a*a*a*c$\n")
    path = "/" + "a" * 200_000
    assert robots.check(path, "x").allowed
    assert not robots.check(path + "b", "x").allowed and not robots.check(path + "c", "x").allowed
    assert robots.check(path + "cx", "x").allowed


# ---------------------------------------------------------------- the real files


@cache
def real_files() -> dict[str, bytes]:
    path = shared_data_dir() / "robots" / "robots-top-websites.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return {r["host"]: r["robots_txt"].encode(r["encoding"]) for r in rows}


def test_every_real_file_parses_within_bounds():
    files = real_files()
    assert len(files) == 4231
    truncated = set()
    for host, body in files.items():
        robots = parse(body)
        robots.check("/", "GPTBot")
        if robots.counts["truncated"]:
            truncated.add(host)
        assert robots.counts["lines"] <= body.count(b"\n") + body.count(b"\r") + 1
    assert truncated == {h for h, b in files.items() if len(b) > MAX_BYTES}
    assert len(truncated) == 3


def text_line(host: str, number: int) -> str:
    return real_files()[host].decode("utf-8").splitlines()[number - 1].strip()


def test_real_github_ccbot_group_and_star_block():
    host = "github.com"
    assert text_line(host, 4) == "User-agent: CCBot"
    assert text_line(host, 5) == "Allow: /*/*/tree/master"
    assert text_line(host, 10) == "Disallow: /*/*/tree/*"
    assert (text_line(host, 1397), text_line(host, 1399)) == ("User-agent: *", "Disallow: /")
    robots = parse(real_files()[host])
    v = robots.check("https://github.com/torvalds/linux/tree/master", "CCBot")
    assert (v.allowed, v.rule.number, v.group.number) == (True, 5, 4)  # longer than line 10's pattern
    v = robots.check("https://github.com/torvalds/linux/tree/v6.0", "CCBot")
    assert (v.allowed, v.rule.number) == (False, 10)
    v = robots.check("https://github.com/torvalds/linux", "GPTBot")
    assert (v.allowed, v.agent, v.rule.number) == (False, "*", 1399)


def test_real_google_query_rules_longest_match():
    host = "www.google.com"
    assert [text_line(host, n) for n in (1, 2, 3, 10, 11, 12)] == [
        "User-agent: *", "Disallow: /search", "Allow: /search/about", "Allow: /?hl=", "Disallow: /?hl=*&",
        "Allow: /?hl=*&gws_rd=ssl$",
    ]  # fmt: skip
    robots = parse(real_files()[host])
    assert [
        robots.check(u, "GPTBot").rule.number for u in ("/?hl=en", "/?hl=en&x=1", "/?hl=en&gws_rd=ssl")
    ] == [10, 11, 12]
    assert [robots.check(u, "GPTBot").allowed for u in ("/search?q=a", "/search/about")] == [False, True]


def test_real_wikipedia_percent_encoded_rule():
    host = "en.wikipedia.org"
    assert (text_line(host, 153), text_line(host, 160), text_line(host, 163)) == (
        "User-agent: *", "Disallow: /wiki/Special:", "Disallow: /wiki/Special%3A",
    )  # fmt: skip
    robots = parse(real_files()[host])
    assert robots.check("/wiki/Special:Random", "GPTBot").rule.number == 160
    assert robots.check("/wiki/Special%3aRandom", "GPTBot").rule.number == 163  # escapes compare upper-cased
    assert robots.check("/wiki/Main_Page", "GPTBot").allowed


def test_real_gutenberg_lower_case_ccbot_and_versioned_agents():
    host = "www.gutenberg.org"
    assert (text_line(host, 7), text_line(host, 8)) == ("User-agent: Yahoo Pipes 2.0", "Disallow: /")
    assert (text_line(host, 55), text_line(host, 56)) == ("User-agent: ccbot", "Disallow: /")
    robots = parse(real_files()[host])
    v = robots.check("/ebooks/1342", "CCBot")
    assert (v.allowed, v.rule.number, v.group.number) == (False, 56, 55)
    assert robots.check("/ebooks/1342", "Yahoo").rule.number == 8
    v = robots.check("/ebooks/1342", "GPTBot")
    assert v.allowed and v.agent == "*" and v.reason == "no_matching_rule"


def google_matches(path: str, pattern: str) -> bool:
    """Reference: robots.cc `Matches`, the set of path positions the pattern prefix can reach."""
    pos = [0]
    for i, ch in enumerate(pattern):
        if ch == "$" and i == len(pattern) - 1:
            return pos[-1] == len(path)
        if ch == "*":
            pos = list(range(pos[0], len(path) + 1))
        else:
            pos = [p + 1 for p in pos if p < len(path) and path[p] == ch]
            if not pos:
                return False
    return True


def reference_verdict(robots, path: str, agent: str) -> tuple[bool, int | None]:
    """Longest match over every rule of the agent's groups (else `*`'s), Allow on ties, first line."""
    token = agent.lower()
    groups = [g for g in robots.groups if any(t == token for t, _ in g.agents)]
    groups = groups or [g for g in robots.groups if any(t == "*" for t, _ in g.agents)]
    best = None
    for rule in (r for g in groups for r in g.rules if r.pattern):
        aliases = [rule.pattern]
        if rule.allow and rule.pattern[rule.pattern.rfind("/") :].startswith("/index.htm"):
            aliases.append(rule.pattern[: rule.pattern.rfind("/") + 1] + "$")
        for p in aliases:
            if google_matches(path, p):
                key = (-len(p), not rule.allow, rule.line.number)
                best = min(best or key, key)
    return (True, None) if best is None else (not best[1], best[2])


def test_indexed_matcher_agrees_with_a_brute_force_reference_on_real_files():
    from bench.curation.robots import AGENTS, paths_for

    files = real_files()
    hosts = random.Random(5).sample(sorted(files), 400)
    checked = 0
    for host in hosts:
        robots = parse(files[host])
        text = files[host].decode("utf-8", "replace")
        for agent in AGENTS:
            for p in paths_for(text):
                v = robots.check(p, agent)
                assert (v.allowed, v.rule.number if v.rule else None) == reference_verdict(
                    robots, normalise_path(request_path(p)), agent
                ), (host, agent, p)
                checked += 1
    assert checked > 10_000
