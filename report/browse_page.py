"""browse.html's markup, style and script (report/browse.py fills in the data): no library, no request.

Kept as a Python string rather than a data file so that it ships inside the package with the code that
fills it. The script's rules (report/browse.py's docstring says why): document strings reach the page
only through `textContent` (the `el` and `txt` helpers; no `innerHTML` anywhere), never as an attribute
that loads or runs anything (no href, src or on*), and bidirectional control characters in URLs and
titles are shown as visible marks. Long lists render 50 items at a time, so 10,000 sampled documents
open as fast as 100.
"""

TEMPLATE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Refinery data browser</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; background: #fafafa; }
header { background: #263238; color: #eee; padding: 8px 14px; display: flex; gap: 16px; align-items: center; flex-wrap: wrap; }
header h1 { font-size: 17px; margin: 0; }
header .run { font-size: 12px; color: #aab; }
nav button, .tab { background: #37474f; color: #eee; border: 0; padding: 6px 12px; cursor: pointer; border-radius: 3px; }
nav button.on { background: #ffb300; color: #000; }
header label { font-size: 13px; }
main { padding: 10px 14px; }
.view { display: none; }
.view.on { display: block; }
.cols { display: grid; grid-template-columns: 260px 300px 1fr 300px; gap: 10px; align-items: start; }
.list { max-height: 80vh; overflow-y: auto; overflow-x: hidden; background: #fff; border: 1px solid #ddd; }
.list button { display: block; width: 100%; text-align: left; overflow-wrap: anywhere; background: none; border: 0; border-bottom: 1px solid #eee; padding: 5px 8px; cursor: pointer; font: inherit; }
.list button:hover { background: #f1f5f9; }
.list button.on { background: #fff3c4; }
.list h3 { margin: 0; padding: 6px 8px; font-size: 13px; background: #eceff1; }
.count { color: #666; font-size: 12px; }
.doc { background: #fff; border: 1px solid #ddd; padding: 8px; margin-bottom: 8px; overflow-wrap: anywhere; }
.d-title { font-weight: 600; unicode-bidi: isolate; }
.d-url { font-family: monospace; font-size: 12px; color: #1a5276; unicode-bidi: isolate; }
.d-meta { font-size: 12px; color: #555; }
.evidence { background: #fdecea; padding: 3px 6px; margin: 4px 0; font-family: monospace; }
.d-text { white-space: pre-wrap; font: 13px/1.45 Georgia, serif; unicode-bidi: isolate; max-height: 60vh; overflow: auto; margin: 6px 0 0; }
.short .d-text { max-height: 9em; }
.note { color: #777; font-size: 12px; font-style: italic; }
.members { display: flex; gap: 8px; overflow-x: auto; align-items: flex-start; }
.member { flex: 0 0 360px; }
.member.kept { border: 2px solid #2e7d32; }
.badge { display: inline-block; padding: 1px 6px; border-radius: 3px; font-size: 12px; color: #fff; background: #c62828; }
.kept .badge { background: #2e7d32; }
.ins { background: #c8e6c9; }
.del { background: #ffcdd2; text-decoration: line-through; }
svg.hist { background: #fff; border: 1px solid #ddd; user-select: none; cursor: crosshair; }
.bar { fill: #4c72b0; }
.bar.in { fill: #ffb300; }
.brush { fill: rgba(255, 179, 0, .25); stroke: #ff8f00; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; }
.cut { margin-bottom: 18px; }
.empty { color: #777; padding: 10px; }
</style>
</head>
<body>
<header>
<h1>Refinery data browser</h1>
<span class="run" id="run"></span>
<nav>
<button class="tab" data-view="dropped">Dropped</button>
<button class="tab" data-view="clusters">Duplicate clusters</button>
<button class="tab" data-view="scores">Scores</button>
<button class="tab" data-view="selectors">Selectors</button>
</nav>
<label>Language <select id="f-lang"><option value="">all</option></select></label>
<label>Source <select id="f-src"><option value="">all</option></select></label>
</header>
<main>
<section class="view" id="view-dropped">
<div class="cols">
<div class="list" id="reasons"></div>
<div class="list" id="drop-docs"></div>
<div id="drop-detail"></div>
<div id="drop-kept"></div>
</div>
</section>
<section class="view" id="view-clusters">
<div class="cols" style="grid-template-columns: 280px 1fr">
<div class="list" id="cluster-list"></div>
<div class="members" id="cluster-members"></div>
</div>
</section>
<section class="view" id="view-scores">
<label>Score <select id="score-col"></select></label> <span class="note">drag over the histogram to read the documents of a range</span>
<div id="hist"></div>
<div id="brush-label" class="note"></div>
<div id="score-docs"></div>
</section>
<section class="view" id="view-selectors">
<div class="cols" style="grid-template-columns: 240px 1fr">
<div class="list" id="sel-sources"></div>
<div id="sel-cuts"></div>
</div>
</section>
</main>
<script type="application/json" id="browse-data">/*DATA*/</script>
<script>
"use strict";
(function () {
  var D = JSON.parse(document.getElementById("browse-data").textContent);
  var DOCS = D.docs;
  var PAGE = 50;
  var state = { view: "dropped", lang: "", src: "", stage: null, reason: null, cluster: null, col: null, brush: null, source: null };
  function $(id) { return document.getElementById(id); }
  // Every element is made here; a string from the data only ever becomes a text node or a data-* attribute.
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }
  function add(parent) { for (var i = 1; i < arguments.length; i++) if (arguments[i] != null) parent.appendChild(arguments[i]); return parent; }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  var BIDI = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g;
  // A URL or title with a direction override can show another URL than it is: the controls are shown.
  function visible(s) { return String(s).replace(BIDI, function (c) { return "[U+" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0") + "]"; }); }
  function fmt(v) {
    if (typeof v !== "number") return String(v);
    if (v !== 0 && (Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3)) return v.toExponential(2);
    return String(Number(v.toPrecision(4)));
  }
  function pass(d) { return (!state.lang || d.lang === state.lang) && (!state.src || d.src === state.src); }

  function evidence(r) {
    if (r.metric == null && r.value == null) return null;
    var s = (r.metric || "value") + " ";
    if (typeof r.value === "number" && typeof r.threshold === "number") {
      // the rule's own comparison where the extract recorded it (`op`), else the numbers' order
      var rel = r.op || (r.value < r.threshold ? "<" : r.value > r.threshold ? ">" : "=");
      var v = fmt(r.value), t = fmt(r.threshold);
      if (v === t) { v = String(r.value); t = String(r.threshold); }  // "0.8 < 0.8" says nothing
      s += v + " " + rel + " " + t;
    } else {
      s += fmt(r.value) + (r.threshold != null ? " (threshold " + fmt(r.threshold) + ")" : "");
    }
    return el("div", "evidence", s);
  }

  // One document: title, URL (as text, never a link), language, source, scores, text (bounded).
  function docCard(i, opts) {
    opts = opts || {};
    var d = DOCS[i];
    var box = el("div", "doc" + (opts.short ? " short" : ""));
    box.setAttribute("data-doc", d.id);
    if (opts.head) add(box, opts.head);
    add(box, el("div", "d-title", visible(d.title || "(no title)")));
    add(box, el("div", "d-url", visible(d.url || "(no url)")));
    var meta = "lang " + d.lang + " \u00b7 source " + d.src;
    for (var k in d.scores) meta += " \u00b7 " + k + " " + fmt(d.scores[k]);
    if (d.fetch) meta += " \u00b7 fetched " + d.fetch;
    add(box, el("div", "d-meta", meta));
    if (d.evidence) {
      var ev = "measured:";
      for (var key in d.evidence) ev += " " + key + " " + fmt(d.evidence[key]) + ";";
      add(box, el("div", "d-meta d-evidence", ev));
    }
    if (opts.extra) for (var j = 0; j < opts.extra.length; j++) add(box, opts.extra[j]);
    if (opts.body) add(box, opts.body);
    else {
      var t = el("div", "d-text", d.text);
      t.setAttribute("dir", "auto");
      add(box, t);
    }
    var shown = Array.from(d.text).length;  // characters as Python counts them (code points)
    if (d.n > shown) add(box, el("div", "note", "first " + shown + " of " + d.n + " characters"));
    var controls = d.text.match(BIDI);
    if (controls) add(box, el("div", "note", "the text holds " + controls.length + " direction control(s) (" + visible(controls[0]) + "), obeyed only inside its own box"));
    return box;
  }

  function paged(container, items, render) {
    var shown = 0;
    function more() {
      var b = container.querySelector(".more");
      if (b) container.removeChild(b);
      var end = Math.min(items.length, shown + PAGE);
      for (; shown < end; shown++) add(container, render(items[shown], shown));
      if (shown < items.length) {
        var btn = el("button", "more", "more (" + (items.length - shown) + " left)");
        btn.addEventListener("click", more);
        add(container, btn);
      }
    }
    more();
  }

  // ------------------------------------------------------------ (a) dropped
  var drops = {};
  D.dropped.rows.forEach(function (r) {
    var s = (drops[r.stage] = drops[r.stage] || {});
    (s[r.reason] = s[r.reason] || []).push(r);
  });
  function renderDropped() {
    var list = clear($("reasons"));
    var stages = Object.keys(drops).sort();
    if (!stages.length) add(list, el("div", "empty", "no dropped documents recorded (extract/rejected, dedup/removed)"));
    if (D.dropped.cells_left_out) add(list, el("div", "note", D.dropped.cells_left_out + " (stage, reason, language) cells over the page's budget are not shown"));
    stages.forEach(function (stage) {
      add(list, el("h3", null, stage));
      Object.keys(drops[stage]).sort().forEach(function (reason) {
        var rows = drops[stage][reason].filter(function (r) { return pass(DOCS[r.doc]); });
        if (!rows.length && (state.lang || state.src)) return;
        var total = ((D.dropped.counts[stage] || {})[reason]);
        var b = el("button", "reason" + (stage === state.stage && reason === state.reason ? " on" : ""));
        b.setAttribute("data-stage", stage);
        b.setAttribute("data-reason", reason);
        add(b, el("span", null, reason + " "), el("span", "count", rows.length + " shown" + (total != null ? " of " + total + " dropped" : "")));
        b.addEventListener("click", function () { state.stage = stage; state.reason = reason; renderDropped(); });
        add(list, b);
      });
    });
    var docs = clear($("drop-docs"));
    clear($("drop-detail"));
    clear($("drop-kept"));
    if (!state.stage || !drops[state.stage] || !drops[state.stage][state.reason]) return;
    var rows = drops[state.stage][state.reason].filter(function (r) { return pass(DOCS[r.doc]); });
    if (!rows.length) { add(docs, el("div", "empty", "none in this language / source")); return; }
    paged(docs, rows, function (r, k) {
      var d = DOCS[r.doc];
      var b = el("button", "drop-doc");
      b.setAttribute("data-doc", d.id);
      add(b, el("div", "d-title", visible(d.title || d.url || d.id)), el("div", "d-meta", d.lang + " \u00b7 " + d.src));
      b.addEventListener("click", function () { showDrop(r); });
      return b;
    });
    showDrop(rows[0]);
  }
  function showDrop(r) {
    var extra = [el("div", "d-meta", "dropped by " + r.stage + ": " + r.reason)];
    var ev = evidence(r);
    if (ev) extra.push(ev);
    if (r.detail) extra.push(el("div", "detail", r.detail));
    if (r.snippet) extra.push(el("div", "note", "this run recorded only the first characters of the text (snippet)"));
    add(clear($("drop-detail")), docCard(r.doc, { extra: extra }));
    var d = DOCS[r.doc];
    var kept = clear($("drop-kept"));
    add(kept, el("h3", null, "kept from the same source"));
    var ids = (D.kept[d.src + "|" + d.lang] || []).slice();
    if (ids.length < 3) for (var c in D.kept) if (c.indexOf(d.src + "|") === 0 && c !== d.src + "|" + d.lang) ids = ids.concat(D.kept[c]);
    ids = ids.filter(function (i) { return !state.lang || DOCS[i].lang === state.lang; }).slice(0, 6);
    if (!ids.length) add(kept, el("div", "empty", "no kept document of " + d.src));
    ids.forEach(function (i) { add(kept, docCard(i, { short: true })); });
  }

  // ------------------------------------------------------------ (b) clusters
  function words(s) { return s.split(/(\s+)/).filter(function (w) { return w.length; }); }
  // Word diff of b against a: [op, word] with op "=", "+" (only in b) or "-" (only in a); LCS by DP
  // after trimming the common prefix and suffix (difflib's result for these small texts).
  function diff(a, b) {
    var pre = 0;
    while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
    var suf = 0;
    while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
    var A = a.slice(pre, a.length - suf), B = b.slice(pre, b.length - suf), n = A.length, m = B.length;
    var out = a.slice(0, pre).map(function (w) { return ["=", w]; });
    if (n * m > 4e6) {
      A.forEach(function (w) { out.push(["-", w]); });
      B.forEach(function (w) { out.push(["+", w]); });
    } else {
      var L = new Uint32Array((n + 1) * (m + 1));
      for (var i = n - 1; i >= 0; i--) for (var j = m - 1; j >= 0; j--)
        L[i * (m + 1) + j] = A[i] === B[j] ? L[(i + 1) * (m + 1) + j + 1] + 1 : Math.max(L[(i + 1) * (m + 1) + j], L[i * (m + 1) + j + 1]);
      var x = 0, y = 0;
      while (x < n && y < m) {
        if (A[x] === B[y]) { out.push(["=", A[x]]); x++; y++; }
        else if (L[(x + 1) * (m + 1) + y] >= L[x * (m + 1) + y + 1]) { out.push(["-", A[x]]); x++; }
        else { out.push(["+", B[y]]); y++; }
      }
      for (; x < n; x++) out.push(["-", A[x]]);
      for (; y < m; y++) out.push(["+", B[y]]);
    }
    a.slice(a.length - suf).forEach(function (w) { out.push(["=", w]); });
    return out;
  }
  function diffBody(ops) {
    var pre = el("div", "d-text");
    pre.setAttribute("dir", "auto");
    var changed = 0;
    ops.forEach(function (o) {
      if (o[0] === "=") add(pre, document.createTextNode(o[1]));
      else { add(pre, el("span", o[0] === "+" ? "ins" : "del", o[1])); if (/\S/.test(o[1])) changed++; }
    });
    return { body: pre, changed: changed };
  }
  function renderClusters() {
    var list = clear($("cluster-list"));
    var cs = D.clusters.clusters || [];
    var shown = cs.filter(function (c) { return pass(DOCS[c.kept]) || c.members.some(function (m) { return pass(DOCS[m.doc]); }); });
    if (!shown.length) add(list, el("div", "empty", D.clusters.note || "no duplicate cluster in this sample"));
    shown.forEach(function (c) {
      var b = el("button", "cluster" + (state.cluster === c.id ? " on" : ""));
      b.setAttribute("data-cluster", c.id);
      add(b, el("div", "count", "size " + c.size + " \u00b7 " + c.members.length + " removed shown \u00b7 " + c.members[0].reason),
        el("div", "d-title", visible(DOCS[c.kept].title || DOCS[c.kept].url)));
      b.addEventListener("click", function () { state.cluster = c.id; renderClusters(); });
      add(list, b);
    });
    var box = clear($("cluster-members"));
    var c = cs.filter(function (x) { return x.id === state.cluster; })[0];
    if (!c) return;
    var kept = DOCS[c.kept];
    var head = el("div", null);
    add(head, el("span", "badge", "KEPT"), el("div", "why", c.why));
    var k = docCard(c.kept, { head: head });
    k.classList.add("member", "kept");
    add(box, k);
    var kw = words(kept.text);
    c.members.forEach(function (m) {
      var d = DOCS[m.doc];
      var r = diffBody(diff(kw, words(d.text)));
      var h = el("div", null);
      add(h, el("span", "badge", "removed: " + m.reason + " (" + m.stage + ")"),
        el("div", "note", r.changed ? r.changed + " words differ from the kept one (green: only here; red: only in the kept one)" : "same words as the kept one"));
      var card = docCard(m.doc, { head: h, body: r.body });
      card.classList.add("member");
      add(box, card);
    });
  }

  // ------------------------------------------------------------ (c) scores
  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) { var e = document.createElementNS(SVG, tag); for (var k in attrs) e.setAttribute(k, attrs[k]); return e; }
  var W = 820, H = 220, PADL = 40, PADB = 30;
  // A document's score on its card, with the exact number in data-value (the tests read it).
  function scoreBadge(i, col) {
    var v = DOCS[i].scores[col];
    var b = el("div", "badge", col + " " + fmt(v));
    b.setAttribute("data-value", String(v));
    return b;
  }
  function renderScores() {
    var cols = Object.keys(D.scores || {});
    var sel = $("score-col");
    if (!sel.options.length) cols.forEach(function (c) { var o = el("option", null, c); o.value = c; add(sel, o); });
    var hist = clear($("hist"));
    clear($("score-docs"));
    if (!cols.length) { add(hist, el("div", "empty", "no score column (scored/docs)")); return; }
    state.col = state.col || cols[0];
    sel.value = state.col;
    var h = D.scores[state.col], nb = h.counts.length;
    var counts = h.counts;
    var byLang = false;
    if (state.lang) {
      counts = h.langs[state.lang] || h.langs.other || counts.map(function () { return 0; });
      byLang = true;
    }
    var max = Math.max.apply(null, counts.concat([1]));
    var s = svg("svg", { "class": "hist", width: W, height: H, "data-column": state.col });
    var bw = (W - PADL - 10) / nb;
    for (var i = 0; i < nb; i++) {
      var bh = counts[i] ? Math.max(1, (H - PADB - 10) * counts[i] / max) : 0;
      var inB = state.brush && i >= state.brush[0] && i <= state.brush[1];
      var r = svg("rect", { "class": "bar" + (inB ? " in" : ""), x: PADL + i * bw + 1, y: H - PADB - bh, width: Math.max(1, bw - 2), height: bh, "data-bin": i });
      var tt = svg("title", {});
      tt.textContent = fmt(h.edges[i]) + " \u2013 " + fmt(h.edges[i + 1]) + ": " + counts[i];
      r.appendChild(tt);
      s.appendChild(r);
    }
    [0, Math.floor(nb / 2), nb].forEach(function (i) {
      var t = svg("text", { x: PADL + i * bw, y: H - 10, "font-size": 11, "text-anchor": "middle" });
      t.textContent = fmt(h.edges[i]);
      s.appendChild(t);
    });
    var yl = svg("text", { x: 4, y: 14, "font-size": 11 });
    yl.textContent = String(max);
    s.appendChild(yl);
    var brushRect = svg("rect", { "class": "brush", x: 0, y: 0, width: 0, height: H - PADB });
    s.appendChild(brushRect);
    add(hist, s);
    add(hist, el("div", "note", (h.log ? "log-scale bins; " : "") + (byLang ? "counts of language " + state.lang : "counts of every document") + "; documents below are a sample per bin" + (h.nonfinite ? "; " + h.nonfinite + " NaN or infinite values are not binned" : "")));
    // The brush: drag across bins; the range snaps to whole bins (the sample is drawn per bin).
    var x0 = null;
    function bin(ev) {
      var box = s.getBoundingClientRect();
      return Math.max(0, Math.min(nb - 1, Math.floor((ev.clientX - box.left - PADL) / bw)));
    }
    s.addEventListener("mousedown", function (ev) { x0 = bin(ev); ev.preventDefault(); });
    s.addEventListener("mousemove", function (ev) {
      if (x0 === null) return;
      var a = Math.min(x0, bin(ev)), b = Math.max(x0, bin(ev));
      brushRect.setAttribute("x", PADL + a * bw);
      brushRect.setAttribute("width", (b - a + 1) * bw);
    });
    function up(ev) {
      if (x0 === null) return;
      var a = Math.min(x0, bin(ev)), b = Math.max(x0, bin(ev));
      x0 = null;
      window.removeEventListener("mouseup", up);
      state.brush = [a, b];
      renderScores();
    }
    s.addEventListener("mousedown", function () { window.addEventListener("mouseup", up); });
    if (state.brush) showRange(h, counts);
  }
  function showRange(h, counts) {
    var a = state.brush[0], b = state.brush[1], ids = [], n = 0;
    for (var i = a; i <= b; i++) { ids = ids.concat(h.docs[i]); n += counts[i]; }
    ids = ids.filter(function (i) { return pass(DOCS[i]); });
    ids.sort(function (x, y) { return DOCS[x].scores[state.col] - DOCS[y].scores[state.col]; });
    var label = $("brush-label");
    label.textContent = state.col + " in [" + fmt(h.edges[a]) + ", " + fmt(h.edges[b + 1]) + "]: " + n + " documents, " + ids.length + " sampled shown";
    label.setAttribute("data-lo", h.edges[a]);
    label.setAttribute("data-hi", h.edges[b + 1]);
    var box = clear($("score-docs"));
    paged(box, ids, function (i) {
      return docCard(i, { short: true, head: scoreBadge(i, state.col) });
    });
  }

  // ------------------------------------------------------------ (d) selectors
  function renderSelectors() {
    var list = clear($("sel-sources"));
    var srcs = D.selectors.sources || [];
    if (!srcs.length) add(list, el("div", "empty", D.selectors.note || "no recipe"));
    srcs.forEach(function (s) {
      var b = el("button", "sel-source" + (state.source === s.source ? " on" : ""));
      b.setAttribute("data-source", s.source);
      add(b, el("div", null, s.source), el("div", "count", JSON.stringify(s.select)));
      b.addEventListener("click", function () { state.source = s.source; renderSelectors(); });
      add(list, b);
    });
    var box = clear($("sel-cuts"));
    var s = srcs.filter(function (x) { return x.source === state.source; })[0];
    if (!s) return;
    if (s.note) add(box, el("div", "empty", s.note));
    if (!s.cuts.length && !s.note) add(box, el("div", "empty", "no numeric threshold in this selection"));
    s.cuts.forEach(function (c) {
      var cut = el("div", "cut");
      cut.setAttribute("data-column", c.column);
      cut.setAttribute("data-threshold", String(c.threshold));
      var given = c.given != null && typeof c.given === "string" && c.given.indexOf(c.op) !== 0 ? " (given as \u201c" + c.given + "\u201d, resolved by " + s.resolved_by + ")" : "";
      add(cut, el("h3", "threshold", c.column + " " + c.op + " " + fmt(c.threshold) + given));
      add(cut, el("div", "note", "among documents passing the source's other selectors; nearest to the threshold on each side"));
      var sides = el("div", "sides");
      [["inside", "just inside: selected"], ["outside", "just outside: not selected"]].forEach(function (p) {
        var col = el("div", "side " + p[0]);
        add(col, el("h3", null, p[1]));
        var ids = c[p[0]].filter(function (i) { return pass(DOCS[i]); });
        if (!ids.length) add(col, el("div", "empty", "none"));
        ids.forEach(function (i) { add(col, docCard(i, { short: true, head: scoreBadge(i, c.column) })); });
        add(sides, col);
      });
      add(cut, sides);
      add(box, cut);
    });
  }

  // ------------------------------------------------------------ filters, tabs, start
  var RENDER = { dropped: renderDropped, clusters: renderClusters, scores: renderScores, selectors: renderSelectors };
  function render() {
    document.querySelectorAll(".tab").forEach(function (t) { t.classList.toggle("on", t.getAttribute("data-view") === state.view); });
    document.querySelectorAll(".view").forEach(function (v) { v.classList.toggle("on", v.id === "view-" + state.view); });
    RENDER[state.view]();
  }
  function options(select, values) {
    values.forEach(function (v) { var o = el("option", null, visible(v)); o.value = v; add(select, o); });
  }
  var langs = {}, srcs = {};
  DOCS.forEach(function (d) { langs[d.lang] = 1; srcs[d.src] = 1; });
  options($("f-lang"), Object.keys(langs).sort());
  options($("f-src"), Object.keys(srcs).sort());
  $("f-lang").addEventListener("change", function (e) { state.lang = e.target.value; render(); });
  $("f-src").addEventListener("change", function (e) { state.src = e.target.value; render(); });
  $("score-col").addEventListener("change", function (e) { state.col = e.target.value; state.brush = null; render(); });
  document.querySelectorAll(".tab").forEach(function (t) {
    t.addEventListener("click", function () { state.view = t.getAttribute("data-view"); render(); });
  });
  $("run").textContent = D.run + " \u00b7 " + DOCS.length + " documents sampled" +
    (D.refused && D.refused.count ? " \u00b7 " + D.refused.count + " path(s) named by the run's files lie outside it and were not read" : "");
  var first = Object.keys(drops).sort()[0];
  if (first) { state.stage = first; state.reason = Object.keys(drops[first]).sort()[0]; }
  render();
  // Read by the browser test: when the first view was on screen, in this page's own clock.
  window.__browseReady = performance.now();
  document.body.setAttribute("data-ready", "1");
})();
</script>
</body>
</html>
"""
