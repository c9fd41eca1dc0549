"""The nesting depth of an HTML page, measured in one linear scan before any parser sees it.

resiliparse's main-content extraction (the `resiliparse` extractor and the cc-index
language column) is quadratic in the depth of the tree: a 440 KB page of 40,000 nested <div>s takes
~25 s in one C++ call that no signal can interrupt. libxml2 (hence trafilatura) stops parsing at
depth 256 of its own accord, and Chromium's parser stops nesting at 512; no real page comes near
(the deepest page of the shared WARCs measures 52 here). `bound_depth` finds the first start tag
that would open an element deeper than the cap and cuts the page there, which is what libxml2
already does to trafilatura's input: every extractor sees the same page, and its cost is bounded
by the page's size times the cap.

The scan is a small model of the HTML5 tree builder's stack of open elements, kept linear so a
hostile page cannot make the scan itself slow (each start tag pushes at most one element, each
pop is paid for by its push, every check is O(1) through per-name position lists):
  - comments, raw-text elements (script, style, textarea, title, ...) and void elements open nothing;
  - a close tag pops down to its element only when that element is in scope (HTML5's scope
    boundaries: table, td, th, ...), and a formatting close tag (</b>) only past non-special
    elements (an approximation of the adoption agency, which keeps special elements open);
  - implied end tags: <p> and block starts close an open <p>, <li> an open <li>, <td>/<tr> the
    open cell/row, <a> an open <a>, <option> an <option>, as the tree builder does;
  - a self-closing slash counts only on SVG/MathML elements (HTML ignores it: <div/> opens a div);
    HTML tags that break out of foreign content pop it, integration points parse as HTML.
Where the model differs from the real tree builder it counts deeper, never shallower by more
than a small constant factor, so a page cannot hide depth from it; tests/curation/
test_hostile_html.py checks both directions (hostile variants are caught, real pages are not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TAG_DEPTH = 256
"""Default cap: libxml2's own limit, so trafilatura's output is unchanged by it."""

# Start tags: `<name` or `</name`; comments `<!--`. Anything else (`<!DOCTYPE`, `<?xml`, `< 3`) is text.
_TAG = re.compile(r"<(?:(!--)|(/?)([A-Za-z][^\t\n\f\r />]*))")

VOID = frozenset(
    [
        "area",
        "base",
        "basefont",
        "bgsound",
        "br",
        "col",
        "command",
        "embed",
        "frame",
        "hr",
        "image",
        "img",
        "input",
        "keygen",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)
RAW_TEXT = frozenset(["script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"])
# HTML5 "has an element in scope" boundaries (plus button for </p>'s button scope).
SCOPE = frozenset(
    ["applet", "caption", "html", "table", "td", "th", "marquee", "object", "template", "button"]
)
TABLE_PARTS = frozenset(["caption", "colgroup", "tbody", "thead", "tfoot", "tr", "td", "th"])
FORMATTING = frozenset(
    ["a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike", "strong", "tt", "u"]
)
# h1-h6: part of SPECIAL, CLOSES_P and BREAKOUT below, and a heading closes an open heading (scan).
HEADINGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
# HTML5 "special" elements (those that stop the adoption agency and <li>'s implied end tag).
SPECIAL = HEADINGS | frozenset(
    [
        "address",
        "applet",
        "area",
        "article",
        "aside",
        "base",
        "basefont",
        "bgsound",
        "blockquote",
        "body",
        "br",
        "button",
        "caption",
        "center",
        "col",
        "colgroup",
        "dd",
        "details",
        "dir",
        "div",
        "dl",
        "dt",
        "embed",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "frame",
        "frameset",
        "head",
        "header",
        "hgroup",
        "hr",
        "html",
        "iframe",
        "img",
        "input",
        "keygen",
        "li",
        "link",
        "listing",
        "main",
        "marquee",
        "menu",
        "meta",
        "nav",
        "noembed",
        "noframes",
        "noscript",
        "object",
        "ol",
        "p",
        "param",
        "plaintext",
        "pre",
        "script",
        "search",
        "section",
        "select",
        "source",
        "style",
        "summary",
        "table",
        "tbody",
        "td",
        "template",
        "textarea",
        "tfoot",
        "th",
        "thead",
        "title",
        "tr",
        "track",
        "ul",
        "wbr",
        "xmp",
    ]
)
# Start tags that close an open <p> in button scope.
CLOSES_P = HEADINGS | frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "center",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "header",
        "hgroup",
        "main",
        "menu",
        "nav",
        "ol",
        "p",
        "search",
        "section",
        "summary",
        "ul",
        "pre",
        "listing",
        "form",
        "plaintext",
        "table",
        "hr",
        "xmp",
        "dd",
        "dt",
        "li",
    ]
)
# HTML tags that end SVG/MathML content (HTML5 "in foreign content", the breakout list).
BREAKOUT = HEADINGS | frozenset(
    [
        "b",
        "big",
        "blockquote",
        "body",
        "br",
        "center",
        "code",
        "dd",
        "div",
        "dl",
        "dt",
        "em",
        "embed",
        "head",
        "hr",
        "i",
        "img",
        "li",
        "listing",
        "menu",
        "meta",
        "nobr",
        "ol",
        "p",
        "pre",
        "ruby",
        "s",
        "small",
        "span",
        "strong",
        "strike",
        "sub",
        "sup",
        "table",
        "tt",
        "u",
        "ul",
        "var",
    ]
)
FOREIGN_ROOTS = frozenset(("svg", "math"))
INTEGRATION_POINTS = frozenset(
    ["foreignobject", "desc", "title", "annotation-xml", "mi", "mo", "mn", "ms", "mtext"]
)
_NOT_LI_STOPS = frozenset(("address", "div", "p"))


@dataclass(slots=True)
class Depth:
    """What the scan found: the deepest nesting up to `cut`, and where the page goes over a cap
    (the offset of the start tag that would open an element past it; None if it never does)."""

    depth: int
    cut: int | None = None
    why: str = ""  # "depth" (deeper than the cap) or "elements" (more elements than the page has tags)


# Elements the scan may open beyond the page's own tags: HTML5 re-opens formatting elements
# (<b>, <font>) that a block end closed, once per later text, up to 3 identical ones each time.
# A real page re-opens a few per tag; a hostile one (<p><b id=N>x</p> repeated) makes the tree builder
# clone every one of them again and again: quadratic nodes, 3 s for 55 KB in resiliparse.
CLONES_PER_TAG = 4
CLONE_ALLOWANCE = 10_000

MARKERS = frozenset(["applet", "object", "marquee", "template", "td", "th", "caption"])
_ATTRS = re.compile(r"\s+")


class _Stack:
    """The stack of open elements with O(1) "is X open above the last Y" checks, and the
    formatting elements closed by a block end that HTML5 re-opens at the next text or inline tag."""

    __slots__ = ("at", "foreign", "ghosts", "keys", "names", "pushes", "scope", "special", "strict")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.keys: list[str] = []  # per element: name and attributes (formatting elements' identity)
        self.foreign: list[bool] = []  # per element: an SVG/MathML element (not HTML)
        self.at: dict[str, list[int]] = {}  # name -> stack indices of its open elements
        self.scope: list[int] = []  # indices of scope boundaries
        self.special: list[int] = []  # indices of special elements
        self.strict: list[int] = []  # special minus address/div/p: what stops <li>'s implied close
        # per marker level (a cell, caption, object, template): formatting elements to re-open,
        # in order, and how many of each identity (name and attributes) there are
        self.ghosts: list[tuple[list[tuple[str, str]], dict[str, int]]] = [([], {})]
        self.pushes = 0

    def push(self, name: str, key: str, foreign: bool) -> None:
        i = len(self.names)
        self.pushes += 1
        self.names.append(name)
        self.keys.append(key)
        self.foreign.append(foreign)
        self.at.setdefault(name, []).append(i)
        if not foreign:
            if name in SCOPE:
                self.scope.append(i)
            if name in SPECIAL:
                self.special.append(i)
                if name not in _NOT_LI_STOPS:
                    self.strict.append(i)
            if name in MARKERS:
                self.ghosts.append(([], {}))
        elif name in INTEGRATION_POINTS:
            self.scope.append(i)

    def pop_to(self, i: int, forget: int = -1) -> None:
        """Pop every element from the top down to (and including) index i. Formatting elements
        popped stay in HTML5's list of active formatting elements, to be re-opened (`forget`: the
        index of the one an end tag or a new <a> removes from that list)."""
        while len(self.names) > i:
            j = len(self.names) - 1
            name, key, foreign = self.names.pop(), self.keys.pop(), self.foreign.pop()
            self.at[name].pop()
            for marks in (self.scope, self.special, self.strict):
                if marks and marks[-1] == j:
                    marks.pop()
            if foreign:
                continue
            if name in MARKERS and len(self.ghosts) > 1:
                self.ghosts.pop()  # closing a cell clears the list back to its marker
            elif name in FORMATTING and j != forget:
                order, counts = self.ghosts[-1]
                # Noah's Ark: at most 3 identical entries (the scan counts only those off the stack)
                if counts.get(key, 0) < 3:
                    counts[key] = counts.get(key, 0) + 1
                    order.append((name, key))

    def forget_ghost(self, name: str) -> None:
        """An end tag for a formatting element that is not open removes its last list entry."""
        order, counts = self.ghosts[-1]
        # bounded look-back: a hostile run of end tags cannot make each one scan a long list
        for k in range(len(order) - 1, max(len(order) - 64, -1), -1):
            if order[k][0] == name:
                counts[order[k][1]] -= 1
                del order[k]
                return

    def last(self, name: str) -> int:
        idx = self.at.get(name)
        return idx[-1] if idx else -1

    def last_of(self, names) -> int:
        return max((self.last(n) for n in names), default=-1)

    def in_scope(self, name: str) -> int:
        """Index of the topmost open `name` with no scope boundary above it, else -1."""
        i = self.last(name)
        if i < 0 or (self.scope and self.scope[-1] > i):
            return -1
        return i

    def html_context(self) -> bool:
        """Whether a new element is parsed as HTML (top is HTML or an integration point)."""
        return not self.foreign or not self.foreign[-1] or self.names[-1] in INTEGRATION_POINTS


def scan_depth(html: str, cap: int) -> Depth:
    """The page's nesting depth, scanning only until it first goes over `cap` (see the module doc).

    A page with no more `<` than the cap cannot go over it: it is passed by one C-speed count, and
    its `depth` is then that count (an upper bound), not a scan's result.
    """
    tags = html.count("<")
    if tags <= cap:
        return Depth(tags)
    return _scan(html, cap, CLONES_PER_TAG * tags + CLONE_ALLOWANCE)


def nesting_depth(html: str) -> int:
    """The page's nesting depth by the full scan, without a cap (to measure real pages)."""
    return _scan(html, len(html) + 1, CLONES_PER_TAG * html.count("<") + CLONE_ALLOWANCE).depth


# `<name attrs>` (group 2: "/" for an end tag; 4: attributes; 5: ">" or "" at the end of the page,
# where an unterminated tag is dropped) or `<!--`. Anything else (`<!DOCTYPE`, `< 3`) is text.
# `[^>]*` then `>` or the end: each `<` is matched once, linear even when no `>` follows.
_TAG = re.compile(r"<(?:(!--)|(/?)([A-Za-z][^\t\n\f\r />]*)([^>]*)(>|\Z))")


def _scan(html: str, cap: int, budget: int) -> Depth:
    st = _Stack()
    deepest, pos, n = 0, 0, len(html)
    search = _TAG.search
    while pos < n:
        m = search(html, pos)
        if m is None:
            break
        comment, closing, name, attrs, gt = m.groups()
        if comment:  # up to -->, or the rest of the page when unterminated
            end = html.find("-->", m.end())
            if end < 0:
                break
            pos = end + 3
            continue
        if not gt:
            break  # an unterminated tag at the end of the page opens nothing
        if m.start() > pos and st.ghosts[-1][0]:
            # text re-opens the formatting elements a block end closed (`<p><b>x</p>y`: y is bold)
            if not _reopen(st, cap, budget):
                return Depth(cap, m.start(), "depth" if len(st.names) >= cap else "elements")
            deepest = max(deepest, len(st.names))
        pos = m.end()
        name = name.lower()
        if closing:
            _close(st, name)
            continue
        html_ctx = st.html_context()
        if not html_ctx and name in BREAKOUT:
            # An HTML tag inside SVG/MathML closes the foreign content first.
            while st.names and st.foreign[-1] and st.names[-1] not in INTEGRATION_POINTS:
                st.pop_to(len(st.names) - 1)
            html_ctx = True
        foreign = not html_ctx or name in FOREIGN_ROOTS
        if foreign:
            if attrs.endswith("/"):  # self-closing is honoured on SVG/MathML elements only
                continue
        else:
            if name == "plaintext":
                break  # the rest of the page is text
            if name in ("html", "head", "body") and st.last(name) >= 0:
                continue  # a second <body> only merges attributes
            _implied_closes(st, name)
            if st.ghosts[-1][0] and name not in SPECIAL:
                # so do inline start tags
                if not _reopen(st, cap, budget):
                    return Depth(cap, m.start(), "depth" if len(st.names) >= cap else "elements")
                deepest = max(deepest, len(st.names))
            if name in VOID:
                continue
        if len(st.names) >= cap or st.pushes >= budget:
            return Depth(cap, m.start(), "depth" if len(st.names) >= cap else "elements")
        st.push(name, name + " " + _ATTRS.sub(" ", attrs.strip()) if name in FORMATTING else name, foreign)
        deepest = max(deepest, len(st.names))
        if not foreign and name in RAW_TEXT:
            # Raw text: no tags until the matching close tag (or the end of the page).
            end = _find_close(html, name, pos)
            if end < 0:
                break
            st.pop_to(len(st.names) - 1)
            pos = end
    return Depth(deepest)


def _reopen(st: _Stack, cap: int, budget: int) -> bool:
    """Push the formatting elements to re-open; False when that goes over a cap."""
    order = st.ghosts[-1][0]
    st.ghosts[-1] = ([], {})
    for g_name, g_key in order:
        if len(st.names) >= cap or st.pushes >= budget:
            return False
        st.push(g_name, g_key, False)
    return True


_RAW_CLOSE = {name: re.compile(rf"</{name}[\t\n\f\r />]", re.IGNORECASE) for name in RAW_TEXT}


def _find_close(html: str, name: str, pos: int) -> int:
    """Offset just past `</name ...>` from pos, case-insensitively, or -1."""
    m = _RAW_CLOSE[name].search(html, pos)
    if m is None:
        return -1
    gt = html.find(">", m.end() - 1)
    return len(html) if gt < 0 else gt + 1


def _implied_closes(st: _Stack, name: str) -> None:
    """The end tags HTML5's tree builder implies before inserting a start tag `name`."""
    if name in CLOSES_P:
        i = st.in_scope("p")
        if i >= 0:
            st.pop_to(i)
    if name in ("li", "dd", "dt"):
        targets = ("li",) if name == "li" else ("dd", "dt")
        i = st.last_of(targets)
        # closes the open item only when no special element (other than address/div/p) is above it
        if i >= 0 and (not st.strict or st.strict[-1] <= i):
            st.pop_to(i)
    elif name in ("td", "th", "tr", "tbody", "thead", "tfoot", "caption", "colgroup"):
        table = st.last("table")
        closes = {
            "td": ("td", "th"),
            "th": ("td", "th"),
            "tr": ("td", "th", "tr"),
        }.get(name, ("td", "th", "tr", "tbody", "thead", "tfoot", "caption", "colgroup"))
        cells = [i for i in (st.last(c) for c in closes) if i > table]
        if cells:
            st.pop_to(min(cells))
    elif name in ("a", "nobr"):
        i = st.last(name)
        if i >= 0 and (not st.special or st.special[-1] < i):
            st.pop_to(i, forget=i)
    elif name == "option" or name == "optgroup":
        while st.names and st.names[-1] in (("option",) if name == "option" else ("option", "optgroup")):
            st.pop_to(len(st.names) - 1)
    elif name in HEADINGS and st.names and st.names[-1] in HEADINGS:
        st.pop_to(len(st.names) - 1)
    elif name == "button":
        i = st.in_scope("button")
        if i >= 0:
            st.pop_to(i)


def _close(st: _Stack, name: str) -> None:
    """A close tag: pop to its element when the tree builder would, else ignore it."""
    if name in ("html", "body", "head", "br"):
        return  # </body> and </html> do not pop (later content still goes into <body>)
    if name == "table":
        i = st.last("table")  # table scope: cells inside the table do not stop </table>
        if i >= 0:
            st.pop_to(i)
        return
    if name in TABLE_PARTS:
        i = st.last(name)
        if i > st.last("table"):  # a part of the innermost table only
            st.pop_to(i)
        return
    if name in FORMATTING:
        i = st.last(name)
        if i < 0:
            st.forget_ghost(name)
        elif not st.special or st.special[-1] < i:
            st.pop_to(i, forget=i)
        return
    i = st.in_scope(name)
    if i >= 0:
        st.pop_to(i)


def bound_depth(html: str, cap: int) -> tuple[str, Depth]:
    """The page cut before its first element deeper than `cap` (unchanged when none is)."""
    d = scan_depth(html, cap)
    return (html if d.cut is None else html[: d.cut]), d
