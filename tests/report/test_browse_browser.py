"""browse.html in a real browser: headless Chromium from the OS packages, driven by Selenium (issue 46).

The page is made from real outputs: tests/report/conftest.py's `report_run` (the reduced demo's extract
over real WARCs, dedup, quality model, score), plus a dedup run over its extracted pages with a few near-duplicate
copies of them planted (testkit.neardup.edit: the real pages have none), so a cluster has members. The
tests click as a user does (reason -> documents, cluster -> diff, histogram brush -> documents, source
-> selector boundary, the language filter) and check what is on screen against the Parquet files.

Safety: hostile documents (script tags, an `onerror` attribute breakout, a `javascript:` URL, an RTL
override) are shown as literal text, run nothing, create no element, and the page requests nothing
but itself (Chrome's performance log: every Network.requestWillBeSent of the page).

The `browser` tier needs `chromium` and `chromedriver` (Debian: `apt-get install chromium
chromium-driver`; `make test` installs them when it runs as root); without them it skips with the
reason, and under CI=true it fails instead (testkit/tiers.py). Screenshots of each view go to
$BROWSE_SHOTS (default: the test's temporary folder).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from report.browse import Limits, collect_browse, write_browse
from testkit.tiers import refused

pytestmark = pytest.mark.browser

HOSTILE_SCRIPT = "<script>window.__pwned=1</script>"
HOSTILE_IMG = '"><img src=x onerror="window.__pwned=1">'
HOSTILE_URL = "javascript:alert(1)"
RTL_URL = "https://example.org/\u202egnp.exe"


# ---------------------------------------------------------------- the browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium with its performance log on (the page's network events)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        refused(
            "browser tier: chromium and chromedriver are not installed (Debian: apt-get install chromium "
            "chromium-driver; `make test` does it when run as root)"
        )
    try:
        from selenium import webdriver
    except ImportError:
        refused("browser tier: selenium is not installed (pip install -e '.[test]')")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container has no user namespace for the sandbox
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1500,1000",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=driver_path))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("BROWSE_SHOTS") or tmp_path_factory.mktemp("browse-shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(driver, page: Path) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get_log("performance")  # drop what earlier pages logged
    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.body.dataset.ready") == "1")


def requests_made(driver) -> list[str]:
    """URLs of every request the page started since open_page (Chrome's Network domain events).

    Not chrome:// ones: those are the browser's own WebUI (the blank first tab's resources can still be
    loading when the first page opens: a `make quick` run logged cr_elements/*.js), and a page cannot
    start them: Chrome refuses every chrome:// URL to web content, file:// pages included."""
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg["method"] == "Network.requestWillBeSent":
            url = msg["params"]["request"]["url"]
            if not url.startswith("chrome://"):
                urls.append(url)
    return urls


def only_itself(driver, page: Path) -> None:
    urls = requests_made(driver)
    assert urls, "the performance log recorded no request: the check would prove nothing"
    assert set(urls) == {page.resolve().as_uri()}, urls


def click(driver, css: str, **data: str):
    """Click the element matching `css` whose data-* attributes equal `data`; returns it."""
    from selenium.webdriver.common.by import By

    for e in driver.find_elements(By.CSS_SELECTOR, css):
        if all(e.get_attribute(f"data-{k}") == v for k, v in data.items()):
            e.click()
            return e
    raise AssertionError(f"no {css} with {data} on screen")


def texts(driver, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def values_of(driver, css: str) -> list[float]:
    """The exact scores of the cards' badges (data-value), in screen order."""
    from selenium.webdriver.common.by import By

    return [float(e.get_attribute("data-value")) for e in driver.find_elements(By.CSS_SELECTOR, css)]


def tab(driver, view: str) -> None:
    click(driver, ".tab", view=view)


def select(driver, select_id: str, value: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, select_id)).select_by_value(value)


# ---------------------------------------------------------------- the run


def _rows(folder: Path, columns: list[str] | None = None) -> list[dict]:
    return [
        r for f in sorted(folder.rglob("*.parquet")) for r in pq.read_table(f, columns=columns).to_pylist()
    ]


@pytest.fixture(scope="module")
def dup_run(report_run, spark, tmp_path_factory) -> Path:
    """report_run's extract, scores and recipe, with a dedup run over its pages plus planted copies:
    two lightly edited copies of each of three real pages and one exact copy (case changed)."""
    import random

    from core.spark import SparkOptions
    from dedup.config import DedupJobConfig
    from dedup.job import run_dedup
    from testkit.neardup import edit

    run = tmp_path_factory.mktemp("browse-run")
    inputs = run / "input"
    inputs.mkdir()
    src = sorted((report_run / "extract" / "docs").rglob("*.parquet"))
    for f in src:
        shutil.copy(f, inputs / f.name)
    table = pa.concat_tables(pq.read_table(f) for f in src)
    rows = table.to_pylist()
    base = sorted((r for r in rows if 250 <= len(r["text"].split()) <= 700), key=lambda r: r["id"])[:3]
    vocab = sorted({w for r in rows for w in r["text"].split() if w.isalpha()})
    rng = random.Random(46)
    planted = []
    for k, r in enumerate(base):
        for j in range(2):
            # another URL, so that MinHash (not the URL stage) finds the copy
            planted.append({**r, "id": f"planted-{k}-{j}", "warc_offset": 10**9 + 10 * k + j,
                            "url": f"{r['url']}?copy={j}", "text": edit(r["text"], 0.01, rng, vocab)})  # fmt: skip
    exact = {"id": "planted-exact", "warc_offset": 10**9 + 99, "url": f"{base[0]['url']}?exact"}
    planted.append({**base[0], **exact, "text": base[0]["text"].upper()})
    pq.write_table(pa.Table.from_pylist(planted, schema=table.schema), inputs / "planted.parquet")
    quiet = SparkOptions(spark.sparkContext.master, progress=False)
    run_dedup(str(inputs), str(run / "dedup"), DedupJobConfig(), spark=quiet)
    for part in ("extract", "scored"):
        (run / part).symlink_to(report_run / part)
    (run / "recipe.yaml").write_text(
        "name: browse\ntotal_tokens: 10K\nsources:\n"
        "  web: {docs: scored}\n"
        "  web_hq: {docs: scored, select: {lang: en, quality: 'top 50%'}}\n"
        "phases:\n  - {name: main, share: 1.0, weights: {web: 1, web_hq: 1}}\n"
    )
    write_browse(run)
    return run


@pytest.fixture(scope="module")
def data(dup_run) -> dict:
    """What the page embeds (the same function write_browse called)."""
    return collect_browse(dup_run)


# ---------------------------------------------------------------- views


@pytest.mark.spark
def test_reason_to_documents(browser, dup_run, data, shots):
    """Pick a filter's reason: its dropped pages are listed, the first is read whole (URL, language,
    text), and kept pages of the same WARC are beside it."""
    page = dup_run / "browse.html"
    open_page(browser, page)
    rejected = _rows(dup_run / "extract" / "rejected")
    stage, reason = "filter:gopher_quality", "gopher_quality:gopher_below_alpha_threshold"
    expect = [r for r in rejected if r["stage"] == stage and r["reason"] == reason]
    assert expect, "the real WARCs no longer give this drop: pick another reason"
    click(browser, "button.reason", stage=stage, reason=reason)
    listed = [
        e.get_attribute("data-doc") for e in browser.find_elements("css selector", "#drop-docs .drop-doc")
    ]
    assert sorted(listed) == sorted(r["id"] for r in expect)
    shown = browser.find_element("css selector", "#drop-detail .doc")
    row = next(r for r in expect if r["id"] == shown.get_attribute("data-doc"))
    assert shown.find_element("css selector", ".d-url").text == row["url"]
    assert f"dropped by {stage}: {reason}" in shown.text and row["lang"] in shown.text
    # the text: the recorded text where the extract wrote one, else its snippet
    body = shown.find_element("css selector", ".d-text").text
    recorded = row.get("text") or row["snippet"]
    assert body.split()[:20] == recorded.split()[:20]
    # the rule's evidence as the extract recorded it: "alpha_words_ratio 0.7991 < 0.8"
    metric, value, op, threshold = shown.find_element("css selector", ".evidence").text.split()
    assert (metric, op) == (row["metric"], row["op"])
    assert float(value) == pytest.approx(row["value"], rel=1e-3)
    assert float(threshold) == pytest.approx(row["threshold"], rel=1e-3)
    kept = browser.find_elements("css selector", "#drop-kept .doc")
    src = row["warc_file"].rsplit("/", 1)[-1]
    assert kept and all(f"source {src}" in k.text for k in kept)
    browser.save_screenshot(str(shots / "dropped.png"))
    # another reason: the list follows the click
    click(browser, "button.reason", stage="read", reason="non_html")
    assert all("?" in t for t in texts(browser, "#drop-docs .drop-doc .d-meta"))
    only_itself(browser, page)


@pytest.mark.spark
def test_cluster_to_diff(browser, dup_run, data, shots):
    """Open a cluster: the kept page and the pages removed in its place side by side; each removed one
    read without its red spans is its own text, and without its green spans the kept one's text."""
    page = dup_run / "browse.html"
    open_page(browser, page)
    decisions = _rows(dup_run / "dedup" / "removed_ids")
    planted_partners = {d["partner_id"] for d in decisions if d["id"].startswith("planted-")}
    assert planted_partners, "dedup removed none of the planted copies"
    clusters = data["clusters"]["clusters"]
    docs = data["docs"]
    # MinHash found the edited copies (another URL each), the exact stage the upper-cased one
    reasons = {m["reason"] for c in clusters for m in c["members"]}
    assert {"near_duplicate", "exact_duplicate"} <= reasons, reasons
    c = next(
        c
        for c in clusters
        if docs[c["kept"]]["id"] in planted_partners and c["members"][0]["reason"] == "near_duplicate"
    )
    kept_id = docs[c["kept"]]["id"]
    tab(browser, "clusters")
    click(browser, "button.cluster", cluster=c["id"])
    cards = browser.find_elements("css selector", "#cluster-members .member")
    assert cards[0].get_attribute("data-doc") == kept_id and "KEPT" in cards[0].text
    assert "keep policy `best`" in cards[0].text  # dedup/_config.json's cluster.keep
    removed_here = {d["id"] for d in decisions if d["partner_id"] == kept_id}
    assert {e.get_attribute("data-doc") for e in cards[1:]} == removed_here
    texts_by_id = {r["id"]: r["text"] for r in _rows(dup_run / "input", ["id", "text"])}
    limit = data["limits"]["text_chars"]
    edited = 0
    for card in cards[1:]:
        body = card.find_element("css selector", ".d-text")
        own = browser.execute_script(
            "var c = arguments[0].cloneNode(true); c.querySelectorAll('.del').forEach(function (e) { e.remove(); });"
            " return c.textContent;",
            body,
        )
        other = browser.execute_script(
            "var c = arguments[0].cloneNode(true); c.querySelectorAll('.ins').forEach(function (e) { e.remove(); });"
            " return c.textContent;",
            body,
        )
        assert own == texts_by_id[card.get_attribute("data-doc")][:limit]
        assert other == texts_by_id[kept_id][:limit]
        edited += bool(body.find_elements("css selector", ".ins, .del"))
    assert edited, "no highlighted span: the planted edits were not shown"
    browser.save_screenshot(str(shots / "clusters.png"))
    only_itself(browser, page)


@pytest.mark.spark
def test_histogram_brush_to_documents(browser, dup_run, data, shots):
    """Drag over the left half of the quality histogram: the label counts every scored page in that
    range (checked against the Parquet), and every page listed has a quality inside it."""
    from selenium.webdriver.common.action_chains import ActionChains

    page = dup_run / "browse.html"
    open_page(browser, page)
    tab(browser, "scores")
    select(browser, "score-col", "quality")
    svg = browser.find_element("css selector", "#hist svg")
    w = svg.size["width"]
    # from the first bin to the middle (offsets are from the element's centre)
    ActionChains(browser).move_to_element_with_offset(svg, -w // 2 + 45, 0).click_and_hold().move_by_offset(
        w // 2 - 40, 0
    ).release().perform()
    label = browser.find_element("css selector", "#brush-label")
    lo, hi = float(label.get_attribute("data-lo")), float(label.get_attribute("data-hi"))
    assert lo < hi
    q = [r["quality"] for r in _rows(dup_run / "scored" / "docs", ["quality"]) if r["quality"] is not None]
    top = max(q)
    n = sum(lo <= v < hi or (v == hi == top) for v in q)
    assert re.search(rf": {n} documents, \d+ sampled shown", label.text), (label.text, n)
    values = values_of(browser, "#score-docs .doc .badge")
    assert values and all(lo <= v <= hi for v in values)
    h = data["scores"]["quality"]
    a, b = h["edges"].index(lo), h["edges"].index(hi) - 1
    assert len(values) == sum(len(h["docs"][i]) for i in range(a, b + 1))  # the sample of those bins
    browser.save_screenshot(str(shots / "scores.png"))
    only_itself(browser, page)


@pytest.mark.spark
def test_source_to_selector_boundary(browser, dup_run, data, shots):
    """A recipe source with `quality: top 50%`: the page names the threshold it resolves to (the
    tokenize job's own resolution, core.selectors), and lists the pages nearest to it on each side."""
    from core.selectors import parse_selectors, resolve_percentiles

    page = dup_run / "browse.html"
    open_page(browser, page)
    files = [str(f) for f in sorted((dup_run / "scored" / "docs").rglob("*.parquet"))]
    _lang, sel_q = resolve_percentiles(parse_selectors({"lang": "en", "quality": "top 50%"}), files)[0]
    t = float(sel_q.value)
    tab(browser, "selectors")
    click(browser, "button.sel-source", source="web_hq")
    cut = browser.find_element("css selector", ".cut[data-column=quality]")
    assert float(cut.get_attribute("data-threshold")) == pytest.approx(t, rel=1e-6)  # float32 column
    assert cut.find_element("css selector", ".threshold").text.startswith("quality >= 0.")
    inside = values_of(browser, ".cut .inside .badge")
    outside = values_of(browser, ".cut .outside .badge")
    # each side nearest first: the English pages with the smallest distance to t, on its side
    q = [r for r in _rows(dup_run / "scored" / "docs", ["lang", "quality"]) if r["quality"] is not None]
    above = sorted(r["quality"] for r in q if r["lang"] == "eng_Latn" and r["quality"] >= t)
    below = sorted((r["quality"] for r in q if r["lang"] == "eng_Latn" and r["quality"] < t), reverse=True)
    k = data["limits"]["boundary"]
    assert inside == pytest.approx(above[:k]) and outside == pytest.approx(below[:k])
    assert len(inside) == min(k, len(above)) > 0 and len(outside) == min(k, len(below)) > 0
    browser.save_screenshot(str(shots / "selectors.png"))
    only_itself(browser, page)


@pytest.mark.spark
def test_language_and_source_filters(browser, dup_run, shots):
    """The language filter narrows every list: English shows only the filters' drops, `?` (no
    language: dropped before language ID) only the reader's and extractor's. The source filter keeps
    one WARC's documents, in the drops and in the score ranges alike."""
    from selenium.webdriver.common.action_chains import ActionChains

    page = dup_run / "browse.html"
    open_page(browser, page)
    select(browser, "f-lang", "eng_Latn")
    stages = {e.get_attribute("data-stage") for e in browser.find_elements("css selector", "button.reason")}
    assert stages and "read" not in stages and any(s.startswith("filter:") for s in stages)
    click(browser, "button.reason", stage="langid", reason="lang_low_score")
    assert all(t.startswith("eng_Latn") for t in texts(browser, "#drop-docs .drop-doc .d-meta"))
    browser.save_screenshot(str(shots / "language-filter.png"))
    select(browser, "f-lang", "?")
    stages = {e.get_attribute("data-stage") for e in browser.find_elements("css selector", "button.reason")}
    assert stages and stages <= {"read", "extract", "prelid"}
    tab(browser, "selectors")
    click(browser, "button.sel-source", source="web_hq")
    assert not browser.find_elements("css selector", ".cut .doc")  # no scored page lacks a language
    select(browser, "f-lang", "")
    warc = "crawl-2024-sample-0000.warc.gz"
    select(browser, "f-src", warc)
    tab(browser, "dropped")
    click(
        browser,
        "button.reason",
        stage="filter:gopher_quality",
        reason="gopher_quality:gopher_below_alpha_threshold",
    )
    metas = texts(browser, "#drop-docs .drop-doc .d-meta")
    assert metas and all(m.endswith(warc) for m in metas)
    tab(browser, "scores")
    svg = browser.find_element("css selector", "#hist svg")
    ActionChains(browser).move_to_element_with_offset(
        svg, -svg.size["width"] // 2 + 42, 0
    ).click_and_hold().move_by_offset(svg.size["width"] - 60, 0).release().perform()
    metas = texts(browser, "#score-docs .doc .d-meta")
    assert metas and all(f"source {warc}" in m for m in metas)
    browser.save_screenshot(str(shots / "source-filter.png"))
    only_itself(browser, page)


# ---------------------------------------------------------------- hostile documents and scale


def _hostile_run(root: Path) -> Path:
    """A run whose kept, dropped and scored documents carry hostile titles, URLs and texts."""
    run = root / "hostile"
    hostile = [
        {"title": HOSTILE_SCRIPT, "url": HOSTILE_URL, "text": HOSTILE_IMG + " and " + HOSTILE_SCRIPT},
        {"title": HOSTILE_IMG, "url": RTL_URL, "text": "\u202eoverride " + HOSTILE_SCRIPT},
        {
            "title": "plain",
            "url": "https://example.org/a",
            "text": "</script><script>window.__pwned=1</script>",
        },
    ]
    docs = [
        {"id": f"h{i}", "warc_file": "hostile.warc.gz", "lang": "eng_Latn", "quality": 0.2 + 0.3 * i, **h}
        for i, h in enumerate(hostile)
    ]
    for part in ("extract", "scored"):
        (run / part / "docs").mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(docs), run / part / "docs" / "part-0.parquet")
    (run / "extract" / "rejected").mkdir()
    rejected = [
        {
            "id": f"r{i}",
            "url": h["url"],
            "warc_file": "hostile.warc.gz",
            "warc_offset": i,
            "stage": "filter:x",
            "reason": "x:hostile",
            "detail": HOSTILE_IMG,
            "lang": "eng_Latn",
            "snippet": h["text"],
            "metric": HOSTILE_SCRIPT,
            "value": 1.0,
            "threshold": 2.0,
        }
        for i, h in enumerate(hostile)
    ]
    pq.write_table(pa.Table.from_pylist(rejected), run / "extract" / "rejected" / "u.parquet")
    (run / "recipe.yaml").write_text(
        "name: h\ntotal_tokens: 1000\nsources:\n  s: {docs: scored, select: {quality: '> 0.5'}}\n"
        "phases:\n  - {name: main, share: 1.0, weights: {s: 1}}\n"
    )
    write_browse(run)
    return run


def test_hostile_documents_run_nothing(browser, tmp_path, shots):
    """Script tags, an attribute breakout, a javascript: URL and an RTL override, in every view: no
    script runs, no element is made from them, their literal text is on screen, nothing is requested."""
    from selenium.webdriver.common.action_chains import ActionChains

    run = _hostile_run(tmp_path)
    page = run / "browse.html"
    html = page.read_text()
    assert "<script>window" not in html and "<img" not in html  # escaped in the JSON block
    open_page(browser, page)
    body = browser.find_element("css selector", "body")
    for view in ("dropped", "scores", "selectors"):
        tab(browser, view)
        if view == "dropped":
            for b in browser.find_elements("css selector", "#drop-docs .drop-doc"):
                b.click()
                assert HOSTILE_SCRIPT in body.text and HOSTILE_IMG in body.text
            assert HOSTILE_URL in body.text
            assert "https://example.org/[U+202E]gnp.exe" in body.text  # the override is shown, not obeyed
            assert f"{HOSTILE_SCRIPT} 1 < 2" in texts(browser, ".evidence")
            browser.save_screenshot(str(shots / "hostile-dropped.png"))
        if view == "scores":
            svg = browser.find_element("css selector", "#hist svg")
            w = svg.size["width"]
            ActionChains(browser).move_to_element_with_offset(
                svg, -w // 2 + 42, 0
            ).click_and_hold().move_by_offset(w - 60, 0).release().perform()
            assert len(browser.find_elements("css selector", "#score-docs .doc")) == 3
            assert HOSTILE_SCRIPT in body.text
        if view == "selectors":
            click(browser, "button.sel-source", source="s")
            assert HOSTILE_URL in body.text or HOSTILE_IMG in body.text
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0
    assert browser.execute_script("return document.scripts.length") == 2  # the data block and the page's own
    assert browser.execute_script("return document.querySelectorAll('a[href]').length") == 0
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    only_itself(browser, page)


def test_ten_thousand_documents_open(browser, tmp_path, shots, data_dir):
    """10,000 sampled dropped documents of real text (3,000 characters each, a 30 MB page): the page
    reports when its first view was on screen, in the browser's own clock (issue 46: < 2 s).

    The time is printed and written to $BROWSE_SHOTS/load.json, not asserted at 2 s: CI's two cores run
    other tests beside this one, and a wall-time bound they can miss would fail the tier for the
    machine, not the page. What is asserted holds on any machine: all 10,000 are in the page and only
    the first page of the list (50) is in the DOM, the design that keeps the time flat in the sample's
    size, and it opened within 30 s (on an idle core it takes well under 2 s; eager rendering of every
    document in the list would be the regression this catches by the DOM count, not the clock).
    """
    from testkit.neardup import real_documents

    texts_ = [t for t in real_documents(data_dir) if len(t) >= 3000]
    run = tmp_path / "big"
    (run / "extract" / "rejected").mkdir(parents=True)
    langs = ["eng_Latn", "deu_Latn", "fra_Latn", "rus_Cyrl", "zho_Hans", "spa_Latn", "jpn_Jpan", "arb_Arab"]
    rows = [
        {
            "id": f"d{i}",
            "url": f"https://example.org/{i}",
            "warc_file": f"w{i % 7}.warc.gz",
            "warc_offset": i,
            "stage": f"filter:f{i % 5}",
            "reason": f"f{i % 5}:r{i % 25}",
            "detail": "",
            "lang": langs[i % 8],
            "snippet": texts_[i % len(texts_)][:3000],
            "value": float(i % 100),
            "threshold": 50.0,
            "metric": "m",
        }
        for i in range(10_000)
    ]
    pq.write_table(pa.Table.from_pylist(rows), run / "extract" / "rejected" / "u.parquet")
    path = write_browse(run, limits=Limits(per_cell=100, max_dropped=10_000, text_chars=3000))
    open_page(browser, path)
    n = browser.execute_script(
        "return JSON.parse(document.getElementById('browse-data').textContent).docs.length"
    )
    assert n == 10_000
    ready = browser.execute_script("return window.__browseReady")
    nav = browser.execute_script("var n = performance.getEntriesByType('navigation')[0]; return n.toJSON();")
    timing = {
        "documents": n,
        "page_bytes": path.stat().st_size,
        "first_view_ms": ready,
        "dom_content_loaded_ms": nav["domContentLoadedEventEnd"],
        "load_event_ms": nav["loadEventEnd"],
    }
    print(f"\nbrowse.html with 10,000 documents: {json.dumps(timing)}")
    (shots / "load.json").write_text(json.dumps(timing, indent=1) + "\n")
    assert len(browser.find_elements("css selector", "#drop-docs .drop-doc")) == 50
    assert 0 < ready < 30_000
    browser.save_screenshot(str(shots / "ten-thousand.png"))
    only_itself(browser, path)
