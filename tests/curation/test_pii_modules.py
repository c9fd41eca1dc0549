"""The PII package split by detector (curation/pii/): the scrubber still sees every pattern and finder.

tests/curation/test_pii.py checks the linear-time rules on `scrub.PATTERNS` and that no pattern of
scrub.py, address.py or address_eu.py is missing from it; since the detectors moved to modules of
their own, this checks the same of every module of the package, and that the names the scrubber
re-exports are the detectors' own objects (one memo of IP answers, not a copy).
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import curation.pii
from curation.pii import card, iban, ip, phone, scrub


def _modules():
    return [
        importlib.import_module(f"curation.pii.{m.name}") for m in pkgutil.iter_modules(curation.pii.__path__)
    ]


def test_every_module_pattern_is_checked_by_the_linear_time_test() -> None:
    modules = _modules()
    assert {m.__name__.rsplit(".", 1)[1] for m in modules} >= {
        "email", "ip", "phone", "card", "iban", "ssn", "secret", "address", "address_eu", "isbn", "scrub",
    }  # fmt: skip
    listed = {id(p) for p in scrub.PATTERNS.values()}
    for module in modules:
        compiled = [n for n, v in vars(module).items() if isinstance(v, re.Pattern) and id(v) not in listed]
        assert compiled == [], f"{module.__name__}: patterns missing from scrub.PATTERNS"


def test_no_detector_pattern_overwrites_another() -> None:
    # PATTERNS merges the modules' dicts: a name used twice would silently drop a pattern from the check.
    own = [m.PATTERNS for m in _modules() if m is not scrub and hasattr(m, "PATTERNS")]
    merged_from = [d for d in own if d is not curation.pii.address_eu.PATTERNS]  # address.py includes it
    assert sum(map(len, merged_from)) == len(scrub.PATTERNS)


def test_every_type_has_its_module_finder() -> None:
    assert tuple(scrub._FINDERS) == scrub.PII_TYPES
    for pii_type, finder in scrub._FINDERS.items():
        assert finder.__module__ == f"curation.pii.{pii_type}", (pii_type, finder)


def test_reexports_are_the_detectors_objects() -> None:
    assert scrub.luhn_valid is card.luhn_valid
    assert scrub.iban_valid is iban.iban_valid and scrub.IBAN_LENGTHS is iban.IBAN_LENGTHS
    assert scrub._ip_cache is ip._ip_cache and scrub._is_public_ipv4 is ip._is_public_ipv4
    assert scrub._phone_shape is phone._phone_shape
    ip._ip_cache["203.0.113.7"] = True  # what the finder memoised is what scrub._ip_cache shows
    assert scrub._ip_cache.pop("203.0.113.7") is True
