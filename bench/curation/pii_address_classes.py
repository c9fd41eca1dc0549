"""The Presidio file's 598 STREET_ADDRESS spans by form, and how many of each `scrub` finds.

Why: the file's spans are not one form. Its generator (Faker) writes street lines of many
countries, prefixes some with a second random number ("28245 Puruntie 82"), and labels a postal
address as 1-4 separate spans (the prefix number, the street line, the unit, the trailing postal
code), plus intersections ("the corner of A and B") and street names with no number at all. A
single recall over all 598 mixes forms a grammar can find with forms it cannot, so this script
classifies every span by its own shape (regexes written here, independent of
curation/pii/address.py) and prints, per class, the count, how many `find_pii` finds, and a
ceiling: what a detector of street lines could reach at best.

Ceiling per class: a street line, PO box or intersection can be found from its own text (ceiling
= count); a fragment (bare number, bare unit) only as part of a whole address, so its ceiling is
the fragments whose record also holds a street line or PO box span within 80 characters; a street
name without a house number ("Marina Fort", "Herceg Gateway") has no marker but the name (0).

    PYTHONPATH=$PWD python bench/curation/pii_address_classes.py [--show CLASS]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script from anywhere: the checkout's packages and testkit/
    sys.path.insert(0, str(REPO))

from bench.curation.pii_recall import ADDRESS_FORM, default_data_path, load_records  # noqa: E402
from curation.pii.scrub import find_pii  # noqa: E402

# Checked in order; the first class whose pattern searches the span wins.
_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("military / PO box", re.compile(r"(?i)\b(?:p\.?o\.? box|psc \d|unit \d+ box|[adf]po a[aep] \d)")),
    ("intersection 'the corner of A and B'", re.compile(r"(?i)^the corner of ")),
    ("pair 'Name and Street N'", re.compile(r"^\S+(?: \S+)? and .*\d")),
    ("US/UK/CA street line", ADDRESS_FORM),
    ("fragment: bare number", re.compile(r"^\d{1,6}$")),
    ("fragment: bare unit", re.compile(r"(?i)^(?:apt|suite)\.? \d+$")),
    # "31 Rue Al Imam Al Bakri", "33 avenue de Provence": number, then a type word, then the name.
    ("number-first, type-first (French)", re.compile(r"(?i)^(?:\d+ ){1,2}(?:rue|av|avenue|boulevard|bd)\b")),
    # "Rua do Arenque 1634", "Kiannonkatu 98", "Villacher Strasse 89", "Erzsébet tér 19.": a name
    # then a house number, at the start of the span or after a random prefix number.
    (
        "number-last street line",
        re.compile(r"^(?:\d+ )?(?:[^\W\d_][\w.'’/-]* ){1,6}\d{1,5}[A-Za-z]?\.?(?:\s|,|$)"),
    ),
    ("number-first, other languages", re.compile(r"^(?:\d+ ){1,2}[^\W\d_]")),
    ("street name, no number", re.compile(r"^[^\W\d_][\w'’ -]*$")),
)
_ANCHORS = ("US/UK/CA street line", "number-last street line", "number-first, type-first (French)",
            "number-first, other languages", "military / PO box")  # fmt: skip
_NEAR = 80  # characters between a fragment and a street line of the same address at most


def classify(value: str) -> str:
    for name, pattern in _CLASSES:
        if pattern.search(value):
            return name
    return "other"


def tally(records: list[dict]) -> tuple[Counter, Counter, Counter, dict[str, list[tuple[str, bool]]]]:
    """(count, found, ceiling) per class and the values of each class with whether found."""
    count: Counter = Counter()
    found: Counter = Counter()
    ceiling: Counter = Counter()
    values: dict[str, list[tuple[str, bool]]] = defaultdict(list)
    for record in records:
        text = record["full_text"]
        spans = [
            (s["start_position"], s["end_position"], classify(s["entity_value"]))
            for s in record["spans"]
            if s["entity_type"] == "STREET_ADDRESS"
        ]
        predicted = [p for p in find_pii(text) if p.type == "address"]
        for start, end, cls in spans:
            hit = any(p.start < end and start < p.end for p in predicted)
            count[cls] += 1
            found[cls] += hit
            values[cls].append((text[start:end], hit))
            if cls.startswith("fragment"):
                near = any(
                    c in _ANCHORS and (abs(s - end) <= _NEAR or abs(start - e) <= _NEAR) for s, e, c in spans
                )
                ceiling[cls] += near
            elif cls != "street name, no number":
                ceiling[cls] += 1
    return count, found, ceiling, values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", default=None, help="print the values of classes containing this text")
    args = parser.parse_args(argv)
    count, found, ceiling, values = tally(load_records(default_data_path()))
    width = max(len(c) for c in count)
    print(f"{'class'.ljust(width)}  count  found  recall  ceiling")
    for cls, n in count.most_common():
        print(f"{cls.ljust(width)}  {n:5d}  {found[cls]:5d}  {found[cls] / n:6.3f}  {ceiling[cls]:7d}")
    total = sum(count.values())
    print(
        f"{'all'.ljust(width)}  {total:5d}  {sum(found.values()):5d}  "
        f"{sum(found.values()) / total:6.3f}  {sum(ceiling.values()):7d} ({sum(ceiling.values()) / total:.3f})"
    )
    if args.show:
        for cls, vals in values.items():
            if args.show in cls:
                for v, hit in vals:
                    print(f"  {'+' if hit else '-'} {v!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
