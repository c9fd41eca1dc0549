"""Address finder speed, this checkout against another version of curation/pii/address.py.

Why: the number-last European forms add passes over every document; this prints what they cost
on real text, both versions in one process, interleaved (best of `--repeats` each), so a loaded
machine slows both alike. The baseline is a self-contained pii_address.py of an earlier commit:

    git show 8af1b06:curation/pii/address.py > /tmp/pii_address_old.py
    PYTHONPATH=$PWD python bench/curation/pii_address_vs.py --baseline /tmp/pii_address_old.py [--repeats 5]

Columns: MB/s (CPU time) of `find_addresses` over the Wikipedia sample (one call per article, as the
extract stage scrubs one document per call), the DCLM/Common Crawl sample and the Presidio
sentences, and the matches each version finds there.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere: the checkout's packages and testkit/
    sys.path.insert(0, str(REPO))

from bench.curation.pii_recall import default_data_path, load_records  # noqa: E402
from curation.pii.address import find_addresses  # noqa: E402
from testkit.shared_data import shared_data_dir  # noqa: E402

Finder = Callable[[str], list[tuple[int, int]]]


def _load(path: Path) -> Finder:
    spec = importlib.util.spec_from_file_location("pii_address_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.find_addresses


def _corpora() -> dict[str, list[str]]:
    def jsonl(rel: str) -> list[str]:
        with open(shared_data_dir() / rel, encoding="utf-8") as f:
            return [json.loads(line)["text"] for line in f]

    return {
        "wikipedia": jsonl("quality/enwiki_sample_articles.jsonl"),
        "dclm": jsonl("quality/dclm_human_labels_dev.jsonl"),
        "presidio": [r["full_text"] for r in load_records(default_data_path())],
    }


def _seconds(fn: Finder, texts: list[str]) -> float:
    """This process's CPU seconds: on a shared machine wall time also counts the other jobs."""
    t0 = time.process_time()
    for t in texts:
        fn(t)
    return time.process_time() - t0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="an earlier pii_address.py")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    sides = {"baseline": _load(args.baseline), "this": find_addresses}
    print(f"{'corpus':<10} {'MB':>5} {'baseline MB/s':>14} {'this MB/s':>10} {'matches':>15}")
    for name, texts in _corpora().items():
        mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        best = dict.fromkeys(sides, float("inf"))
        for _ in range(args.repeats):
            for side, fn in sides.items():  # interleaved: load changes hit both sides
                best[side] = min(best[side], _seconds(fn, texts))
        found = {side: sum(len(fn(t)) for t in texts) for side, fn in sides.items()}
        print(
            f"{name:<10} {mb:5.2f} {mb / best['baseline']:14.1f} {mb / best['this']:10.1f} "
            f"{found['baseline']:>7} -> {found['this']:<5}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
