"""Decision parity of our four filter blocks with datatrove's, per document, on all the real text we have.

Documents: every page of every shared WARC that trafilatura extracts a text from (quirks and WET
fragments included; no URL filter or language ID in front, so every language is there) and the
extraction eval sets' texts (testkit/filter_corpus.py). Both implementations run with the
default config (FineWeb's settings) on every document:
- each block on the document's text (datatrove's called directly, as datatrove calls them): same
  keep/drop and same reason, and the text C4 would keep equal;
- FineWeb also on C4's kept text, as datatrove's own pipeline feeds it;
- the extract job's decision (first drop in the order rep -> quality -> C4 -> FineWeb, every
  block on the extracted text, as this project has always run them): equal.
At least 99.9% of documents must agree on every comparison, and every disagreement must have a
known cause, listed in KNOWN_CAUSES with its explanation; the failure message lists each one.
"""

from __future__ import annotations

import pytest

from core.stage import Document, Drop, build_stage
from curation.config import DATATROVE_FILTERS, FiltersConfig
from curation.filters.words import SPLITTER
from testkit.filter_corpus import all_texts, pool_size, spawn_pool

pytestmark = pytest.mark.slow

KEYS = ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")
MIN_AGREEMENT = 0.999

# cause category (the part of _cause's answer before ":") -> why it is allowed. Empty: on the shared data, every document agrees (measured); a new
# disagreement needs its cause found and explained here before it is accepted.
KNOWN_CAUSES: dict[str, str] = {}


def _ours(stages: dict, text: str) -> dict[str, str | None]:
    """Our reasons per block (None: kept) and C4's kept text (key "c4_kept_text")."""
    out = {}
    for k in KEYS:
        r = stages[k].process(Document(id="p", text=text))
        out[k] = r.reason if isinstance(r, Drop) else None
    out["c4_kept_text"] = stages["c4_quality"].kept_text(text)
    return out


def _theirs(blocks: dict, text: str) -> dict[str, str | None]:
    """datatrove's reasons per block, called as datatrove calls them, and the text its C4 keeps."""
    from datatrove.data import Document as DtDocument

    out = {}
    # C4 first: it splits sentences line by line through datatrove's small lru_cache (5 entries), which
    # would evict the word split of `text` between the word-based blocks; after it, the other three blocks
    # and the caller's _reference_words(text) share one split (each block still gets its own Document)
    for k in sorted(KEYS, key=lambda k: k != "c4_quality"):
        doc = DtDocument(text=text, id="p")
        out[k] = _their_reason(blocks[k], doc)
        if k == "c4_quality":
            out["c4_kept_text"] = doc.text if out[k] is None else None
    return out


def _their_reason(block, doc) -> str | None:
    """One datatrove block's reason for `doc` (None: kept), read from what its filter() returns."""
    r = block.filter(doc)
    return None if r is True else (r[1] if isinstance(r, tuple) else "dropped")


def _pipeline(reasons: dict[str, str | None]) -> str | None:
    """The extract job's decision: first drop in order (every block sees the extracted text)."""
    return next((f"{k}:{reasons[k]}" for k in KEYS if reasons[k] is not None), None)


def _cause(text: str) -> str:
    """Why the two implementations may see this text differently, checked from the inputs."""
    theirs, ours = _reference_words(text), SPLITTER.words(text)
    if theirs != ours:
        first = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), min(len(theirs), len(ours)))
        return f"word_split: differs at word {first}: datatrove {theirs[first : first + 3]} vs ours {ours[first : first + 3]}"
    return "unexplained: same words, different decision"


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str]]:
    return all_texts()


_BLOCKS: tuple[dict, dict] | None = None


def _blocks() -> tuple[dict, dict]:
    """(ours, datatrove's) four blocks with the default config, built once per worker process."""
    global _BLOCKS
    if _BLOCKS is None:
        from datatrove.pipeline import filters

        cfg = FiltersConfig().enabled()
        ours = {k: build_stage("filter", k, dict(cfg[k]), f"filters.{k}", name=k) for k in KEYS}
        theirs = {k: getattr(filters, DATATROVE_FILTERS[k])(**cfg[k]) for k in KEYS}
        _BLOCKS = ours, theirs
    return _BLOCKS


def _compare(docs: list[tuple[str, str]]) -> list[tuple[str, dict, str | None, bool]]:
    """Per document: its id, {comparison: (ours, datatrove's)}, the cause when any pair differs,
    and whether the word lists differ. Runs in a worker process (spawn_pool)."""
    from datatrove.data import Document as DtDocument

    ours, theirs = _blocks()
    out = []
    for doc_id, text in docs:
        mine, ref = _ours(ours, text), _theirs(theirs, text)
        words_differ = SPLITTER.words(text) != _reference_words(text)  # before another text's split
        pairs = {k: (mine[k], ref[k]) for k in (*KEYS, "c4_kept_text")}
        if mine["c4_kept_text"] is not None and ref["c4_kept_text"] is not None:
            # FineWeb on C4's edited text, as datatrove's own pipeline runs it
            fw = ours["fineweb_quality"].process(Document(id="p", text=mine["c4_kept_text"]))
            # datatrove's FineWeb block alone on it (the other three blocks' answers are not compared here)
            fw_ref = _their_reason(theirs["fineweb_quality"], DtDocument(text=ref["c4_kept_text"], id="p"))
            pairs["fineweb_after_c4"] = (fw.reason if isinstance(fw, Drop) else None, fw_ref)
        pairs["pipeline"] = (_pipeline(mine), _pipeline(ref))
        cause = _cause(text) if any(a != b for a, b in pairs.values()) else None
        out.append((doc_id, pairs, cause, words_differ))
    return out


def test_our_blocks_decide_as_datatrove_per_document(corpus):
    comparisons = [*KEYS, "c4_kept_text", "fineweb_after_c4", "pipeline"]
    agree, compared = dict.fromkeys(comparisons, 0), dict.fromkeys(comparisons, 0)
    words_differ, disagreements = 0, []
    # the documents in interleaved slices, one per worker: the slow ones (long texts) are spread out
    n_workers = pool_size()
    with spawn_pool(n_workers) as pool:
        results = list(pool.map(_compare, [corpus[i::n_workers] for i in range(n_workers)]))
    for doc_id, pairs, cause, differ in (r for rs in results for r in rs):
        for what, (a, b) in pairs.items():
            compared[what] += 1
            if a == b:
                agree[what] += 1
            else:
                disagreements.append((doc_id, what, b, a, cause))
        words_differ += differ
    n = len(corpus)
    summary = (
        f"{n} documents; agreement per comparison: "
        + ", ".join(f"{k} {agree[k]}/{compared[k]}" for k in agree)
        + f"; word lists differing from datatrove's: {words_differ}"
    )
    print(summary)
    listing = "\n".join(
        f"  {doc_id} [{what}] datatrove={_short(b)} ours={_short(a)}: {cause}"
        for doc_id, what, b, a, cause in disagreements
    )
    assert n > 2400, summary  # every WARC page and eval text is there (1,309 + 1,171 when written)
    unknown = [d for d in disagreements if d[4].split(":")[0] not in KNOWN_CAUSES]
    assert not unknown, f"{summary}\ndisagreements without a known cause:\n{listing}"
    assert all(agree[k] >= MIN_AGREEMENT * compared[k] for k in agree), f"{summary}\n{listing}"


def _reference_words(text: str) -> list[str]:
    from datatrove.utils.text import split_into_words

    return split_into_words(text)


def _short(x) -> str:
    return repr(x) if x is None or len(x) < 80 else f"<text of {len(x)} chars>"
