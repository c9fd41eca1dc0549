"""The 1 MB adversarial inputs of the PII scrubber, shared by tests/curation/test_pii.py (each under 1 s
per MB, with the matches it must find) and `python -m bench.curation.pii_speed --suite` (the same inputs timed)."""

from __future__ import annotations

from collections.abc import Callable

MB = 1_000_000


def fill(unit: str, size: int = MB) -> str:
    return (unit * (size // len(unit) + 1))[:size]


DENSE_VALUES = {
    "email": "john.doe@example.com",
    "phone": "+1 (555) 123-4567",
    "ip": "8.8.8.8",
    "card": "4111 1111 1111 1111",
    "iban": "GB82 WEST 1234 5698 7654 32",
    "ssn": "536-22-8726",
    "secret": "AKIAIOSFODNN7EXAMPLE",
    "address": "1234 Elm Street, Springfield, IL 62704",
}

# 1 MB inputs that make careless patterns blow up: long runs of one pattern's characters without
# the rest of the pattern (quadratic re-scans), many almost-matches (per-candidate work), and
# dense real matches (output building). Grouped by the finder they target.
ADVERSARIAL: dict[str, Callable[[], str]] = {
    "email:a": lambda: "a" * MB,
    "email:@": lambda: "@" * MB,
    "email:a@": lambda: fill("a@"),
    "email:a@a.": lambda: fill("a@a."),
    "email:x@aaa": lambda: "x@" + "a" * MB,
    "email:aaa@": lambda: "a" * MB + "@",
    "email:63a!@": lambda: fill("a" * 63 + "!@"),
    "email:dots": lambda: fill("a.") + "@x",
    "email:bad-labels": lambda: fill("a@a..bb "),
    "ip:1.": lambda: fill("1."),
    "ip:dotted": lambda: fill("192.168.1.1."),
    "ip:private": lambda: fill("10.0.0.1 "),
    "ip:colons": lambda: ":" * MB,
    "ip:a:": lambda: fill("a:"),
    "ip:ff:": lambda: fill("ff:"),
    "ip:1:": lambda: fill("1:"),
    "ip:hex": lambda: "f" * MB,
    "phone:1": lambda: "1" * MB,
    "phone:1 ": lambda: fill("1 "),
    "phone:1-": lambda: fill("1-"),
    "phone:(1": lambda: fill("(1"),
    "phone:+1 ": lambda: fill("+1 "),
    "phone:digit-space": lambda: fill("12 34 56 78 90 "),
    "phone:weak": lambda: fill("467 3395 "),
    "card:digits": lambda: fill("4111 1111 1111 1112 "),
    "card:long-run": lambda: fill("4111 "),
    "ssn:runs": lambda: fill("123-45-"),
    "ssn:invalid": lambda: fill("666-12-3456 "),
    "iban:GB12": lambda: fill("GB12 "),
    "iban:groups": lambda: "GB82" + fill(" WEST"),
    "iban:alnum": lambda: fill("GB82WEST"),
    "iban:A": lambda: "A" * MB,
    "secret:pem-begins": lambda: fill("-----BEGIN RSA PRIVATE KEY-----"),
    "secret:pem-no-end": lambda: "-----BEGIN RSA PRIVATE KEY-----\n" + "A" * MB,
    "secret:pem-lines": lambda: fill("-----BEGIN RSA PRIVATE KEY-----\nMIIB\n"),
    "secret:dashes": lambda: "-" * MB,
    "secret:bearer": lambda: fill("Bearer "),
    "secret:bearer-long": lambda: "Bearer " + fill("a1"),
    "secret:bearer-dots": lambda: fill("bearer x."),
    "secret:AKIA": lambda: fill("AKIA"),
    "any:spaces": lambda: " " * MB,
    "any:newlines": lambda: "\n" * MB,
    "dense:mixed": lambda: fill(
        "Contact {email} or {phone} from {ip} about card {card}, IBAN {iban}, SSN {ssn} and key "
        "{secret}, post to {address}. ".format(**DENSE_VALUES)
    ),
    # Addresses: numbers and words without a street type, runs of street types, generic types and
    # doubtful numbers that each need the (bounded) tail match, and dense real addresses.
    "address:123 Main": lambda: fill("123 Main "),
    "address:1 A B C D": lambda: fill("1 A B C D "),
    "address:Street": lambda: fill("Street "),
    "address:123 Street*": lambda: "123 " + fill("Street "),
    "address:weak": lambda: fill("1 Lake Park "),
    "address:lower": lambda: fill("1 lake park "),
    "address:years": lambda: fill("in 1990 Main Street "),
    "address:rue": lambda: fill("12 rue "),
    "address:route": lambda: fill("1 Route 9 "),
    "address:units": lambda: fill("Apt 1 "),
    "address:city-run": lambda: "1 Main St, " + fill("Aa "),
    "address:separators": lambda: "1 Main St" + fill(" ,\n"),
    "address:dense": lambda: fill("123 Main Street "),
    "address:dense-comma": lambda: fill("1 Main St, "),
    "address:dense-unit": lambda: fill("123 Main St Apt 4 "),
    "address:dense-us": lambda: fill("1234 Main Street, Springfield, IL 62704\n"),
    "address:dense-uk": lambda: fill("Flat 3, 12 High Street, London SW1A 2AA\n"),
    "address:po-box": lambda: fill("PO Box 1 "),
    "address:apo": lambda: fill("APO AE 12345 "),
    "address:military": lambda: fill("PSC 1234, Box 5678\nAPO AE 09012\n"),
    # Number-last (European) lines: street types without numbers, runs of capitalised words before
    # a type (the name is read back at most 3 words), type-first names without a number, weak
    # name+number lines that each try the tail, years, intersections without a street type, and
    # dense real lines of each form.
    "address:eu-types": lambda: fill("Straße "),
    "address:eu-type-numbers": lambda: fill("Straße 1 "),
    "address:eu-capitalised-run": lambda: fill("Aa ") + "Straße 1",
    "address:eu-compound-run": lambda: fill("straße") + " 1",
    "address:eu-type-first": lambda: fill("Via Aa "),
    "address:eu-weak": lambda: fill("Aa 1, "),
    "address:eu-years": lambda: fill("Aa 2000, 1990 Aa "),
    "address:eu-corner": lambda: fill("corner of A and "),
    "address:eu-dense": lambda: fill("Lindenstraße 12\n"),
    "address:eu-dense-locality": lambda: fill("Via Roma 12, 00184 Roma\n"),
    "address:eu-dense-weak": lambda: fill("Aa 1, 12345 Aa\n"),
    "address:eu-dense-cue": lambda: fill("address: Aa 1\n"),
}
