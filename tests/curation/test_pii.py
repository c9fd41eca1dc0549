"""Tests of curation.pii.scrub: per-type positives/negatives, offsets, config, overlaps, linear time,
and recall/precision on Presidio's labelled synthetic sentences (shared data)."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import pickle
import random
import re
import re._constants as sre_constants
import re._parser as sre_parser
from types import ModuleType

import pytest

import core.stage as core_stage
from core.stage import Document, DocumentStage, Drop, run_stages
from core.stats import Stats
from curation.config import ConfigError
from curation.pii import address as pii_address
from curation.pii import address_eu as pii_address_eu
from curation.pii import scrub as pii
from curation.pii.scrub import (
    PII_TYPES,
    PiiConfig,
    PiiPlaceholders,
    PiiScrubber,
    PiiSpan,
    PiiStage,
    find_pii,
    iban_valid,
    luhn_valid,
    scrub,
)
from testkit.pii_inputs import ADVERSARIAL, DENSE_VALUES, MB
from testkit.shared_data import shared_data_dir
from tests.support.bench import load_bench


def found(text: str, config: PiiConfig | None = None) -> list[tuple[str, str]]:
    """(type, matched original text) for each span; offsets are checked by construction."""
    return [(s.type, text[s.start : s.end]) for s in find_pii(text, config)]


def with_luhn_digit(prefix: str) -> str:
    """`prefix` (digits, maybe grouped by spaces) plus the digit that makes it pass the Luhn check."""
    return next(prefix + d for d in "0123456789" if luhn_valid((prefix + d).replace(" ", "")))


# ---------------------------------------------------------------------------------------------
# Per-type positives and negatives
# ---------------------------------------------------------------------------------------------

# (text, expected matched value): the value is the exact slice of the original text.
POSITIVES: dict[str, list[tuple[str, str]]] = {
    "email": [
        ("Mail john.doe+tag@example.co.uk now.", "john.doe+tag@example.co.uk"),
        ("<a.b@sub.example.org>.", "a.b@sub.example.org"),
        ("see...jane@example.com", "jane@example.com"),
        ("john..doe@example.com", "doe@example.com"),  # a run of dots ends the local part
        ("Bob_99@Example.COM, thanks", "Bob_99@Example.COM"),
        ("mailto:x%y@mail-server.example.net?subject=hi", "x%y@mail-server.example.net"),
    ],
    "ip": [
        ("resolver 8.8.8.8 answered", "8.8.8.8"),
        ("connect to 93.184.216.34:443.", "93.184.216.34"),
        ("ipv6 2001:4860:4860::8888 is Google", "2001:4860:4860::8888"),
        ("dns 2606:4700:4700::1111.", "2606:4700:4700::1111"),
        ("[2a00:1450:4001:82b::200e]:443", "2a00:1450:4001:82b::200e"),
    ],
    "phone": [
        ("Call +1-984-182-0190 today", "+1-984-182-0190"),
        ("Office: (555) 123-4567.", "(555) 123-4567"),
        ("call 555-123-4567 now", "555-123-4567"),
        ("London 020 7946 0958", "020 7946 0958"),
        ("from abroad +44 20 7946 0958", "+44 20 7946 0958"),
        ("Fax +46 (0)8 928 571 38 fax", "+46 (0)8 928 571 38"),
        ("+1 (555) 123-4567", "+1 (555) 123-4567"),
        ("mobile +447700677662", "+447700677662"),
        ("Desk: 345-899-3560x4587", "345-899-3560x4587"),
        ("555-123-4567 ext. 89 (reception)", "555-123-4567 ext. 89"),
        ("Mobile: 03.93.92.16.85", "03.93.92.16.85"),
        ("at 259.735.7502.", "259.735.7502"),
        ("Toll free 1-800-476-0446", "1-800-476-0446"),
        ("Tel: 467 3395", "467 3395"),  # weak two-group shape, with a keyword
        ("0961-7596216 is my number", "0961-7596216"),  # two groups with a trunk 0
        # International call prefix instead of '+': "00" (ITU-T) and "011" (NANP)
        ("Ring 0044 20 7946 0958 from abroad", "0044 20 7946 0958"),
        ("from the US dial 011 44 20 7946 0958.", "011 44 20 7946 0958"),
        ("Johannesburg office 011 234 5678", "011 234 5678"),  # 011 as an area code stays national
        ("(+44) 20 7946 0958 is the desk", "(+44) 20 7946 0958"),
        ("Paris: +33 1 23 45 67 89", "+33 1 23 45 67 89"),
        ("Mumbai +91 98765 43210", "+91 98765 43210"),
        ("Berlin +49 (0)30 1234567", "+49 (0)30 1234567"),
        # One-digit long-distance prefix before the area code
        ("toll free 1 (800) 555-0199 today", "1 (800) 555-0199"),
        ("Moscow office 8 (495) 123-45-67", "8 (495) 123-45-67"),
        # Slash after a trunk-prefixed area code (DIN 5008, Belgium, Austria)
        ("Büro 030/1234567, bitte", "030/1234567"),
        ("Brussels 02/123 45 67", "02/123 45 67"),
        # National layouts of other countries
        ("Sydney (02) 9876 5432", "(02) 9876 5432"),
        ("Tokyo 03-1234-5678", "03-1234-5678"),
        ("Zurich 044 123 45 67", "044 123 45 67"),
        # A number inside the sentence's own parentheses: the parentheses stay
        ("the desk (415-555-2671) is staffed", "415-555-2671"),
        ("our lab ((800) 505-7223) answers", "(800) 505-7223"),
        ("Julie (+852 3727 2691) replied", "+852 3727 2691"),
        # Extensions
        ("Call +1 (415) 555-2671 extension 204.", "+1 (415) 555-2671 extension 204"),
        ("1-800-555-0199 x12", "1-800-555-0199 x12"),
    ],
    "address": [
        # United States (USPS Pub 28): suffix, unit, directions, city/state/ZIP(+4)
        ("I live at 1234 Elm Street, Springfield, IL 62704 now.", "1234 Elm Street, Springfield, IL 62704"),
        ("Ship to 742 Evergreen Terrace", "742 Evergreen Terrace"),
        (
            "Office: 350 Fifth Avenue, Suite 3300, New York, NY 10118",
            "350 Fifth Avenue, Suite 3300, New York, NY 10118",
        ),
        (
            "Send it to 1600 Pennsylvania Ave NW, Washington, DC 20500-0003.",
            "1600 Pennsylvania Ave NW, Washington, DC 20500-0003",
        ),
        ("at 123 N. Lake Shore Drive Apt 4B today", "123 N. Lake Shore Drive Apt 4B"),
        ("mail: 55 W 42nd St #12, New York, NY 10036", "55 W 42nd St #12, New York, NY 10036"),
        (
            "John Smith\n1234 Maple Ave\nSpringfield, IL 62704\nUSA",
            "1234 Maple Ave\nSpringfield, IL 62704\nUSA",
        ),
        ("12 Willow Bend, Apt 5", "12 Willow Bend, Apt 5"),  # generic suffix, vouched by the unit
        ("addr: 88 oak lane apt 3", "88 oak lane apt 3"),  # lower case, vouched by the unit
        ("in 1990 Main Street, Apt 5", "1990 Main Street, Apt 5"),  # a year-like number with a unit
        ("PO Box 1024, Austin, TX 78701", "PO Box 1024, Austin, TX 78701"),
        # Number-last street lines (curation/pii/address_eu.py): compound street types ...
        ("Bitte an Lindenstraße 12, 10115 Berlin schicken.", "Lindenstraße 12, 10115 Berlin"),
        ("Kantoor: Keizersgracht 123, 1015 CJ Amsterdam", "Keizersgracht 123, 1015 CJ Amsterdam"),
        ("Nørregade 10, 2. tv., 1165 København K", "Nørregade 10, 2. tv., 1165 København K"),
        ("Drottninggatan 53, 111 21 Stockholm, Sweden", "Drottninggatan 53, 111 21 Stockholm, Sweden"),
        ("The shop on Mannerheimintie 10 was closed", "Mannerheimintie 10"),
        # ... the type after the name as a word (Hungarian numbers are ordinals: "22.") ...
        ("Berliner Straße 5a\n80331 München", "Berliner Straße 5a\n80331 München"),
        ("Andrássy út 22., 1061 Budapest", "Andrássy út 22., 1061 Budapest"),
        ("Pärnu mnt 10, 10148 Tallinn", "Pärnu mnt 10, 10148 Tallinn"),
        ("Karl Johans gate 22, 0159 Oslo", "Karl Johans gate 22, 0159 Oslo"),  # "gate": vouched
        # ... the type before the name; Spanish and Portuguese floors, Polish flats ...
        ("Scrivere a Via Garibaldi 12, 00184 Roma.", "Via Garibaldi 12, 00184 Roma"),
        ("Calle de Alcalá, 45, 3º B, 28014 Madrid", "Calle de Alcalá, 45, 3º B, 28014 Madrid"),
        ("Rua Augusta 100, 1100-053 Lisboa, Portugal", "Rua Augusta 100, 1100-053 Lisboa, Portugal"),
        ("ul. Marszałkowska 10/4, 00-590 Warszawa", "ul. Marszałkowska 10/4, 00-590 Warszawa"),
        ("Siège : Rue de la Loi 16, 1000 Bruxelles", "Rue de la Loi 16, 1000 Bruxelles"),
        ("I live at Via Roma 3.", "Via Roma 3"),  # the period ends the sentence
        ("12 bis rue de la Paix, 75002 Paris", "12 bis rue de la Paix, 75002 Paris"),
        # ... no street type: only before a postal code and town, a unit, or after "address:".
        ("Národní 12, 110 00 Brno", "Národní 12, 110 00 Brno"),
        ("Her address: Husova 2.", "Husova 2"),
        ("Label 0042 Lindenstraße 12", "0042 Lindenstraße 12"),  # a bare number before the line
        # Intersections: from the first street to the type that ends the second.
        ("Meet at the corner of Oak Street and 5th Avenue.", "Oak Street and 5th Avenue"),
        ("the corner of Market Street and Broadway", "Market Street and Broadway"),
        ("P.O. Box 77 is closed", "P.O. Box 77"),
        ("PSC 1234, Box 5678\nAPO AE 09012", "PSC 1234, Box 5678\nAPO AE 09012"),
        ("USS Nimitz\nFPO AP 96620", "USS Nimitz\nFPO AP 96620"),
        # United Kingdom (Royal Mail): flat before the number, postcode
        ("Flat 3, 12 High Street, London SW1A 2AA", "Flat 3, 12 High Street, London SW1A 2AA"),
        ("Write to 10 Downing Street, London SW1A 2AA.", "10 Downing Street, London SW1A 2AA"),
        ("She moved to 4 Privet Close, Little Whinging", "4 Privet Close"),
        ("27 Old Gloucester Street, London WC1N 3AX, UK", "27 Old Gloucester Street, London WC1N 3AX, UK"),
        ("221B Baker Street", "221B Baker Street"),
        # Canada (Canada Post): province, postal code, French order
        ("Head office: 100 Queen St W, Toronto, ON M5H 2N2", "100 Queen St W, Toronto, ON M5H 2N2"),
        ("Unit 5, 80 Bloor Street East", "Unit 5, 80 Bloor Street East"),
        ("Deliver to 24 Sussex Drive, Ottawa, Ontario K1M 1M4", "24 Sussex Drive, Ottawa, Ontario K1M 1M4"),
        (
            "1234, rue Sainte-Catherine Ouest, Montréal (Québec) H3G 1P1",
            "1234, rue Sainte-Catherine Ouest, Montréal (Québec) H3G 1P1",
        ),
        ("au 12 rue de la Gare.", "12 rue de la Gare"),
    ],
    "card": [
        ("visa 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"),
        ("4111-1111-1111-1111", "4111-1111-1111-1111"),
        ("card:4111111111111111.", "4111111111111111"),
        ("amex 3782 822463 10005", "3782 822463 10005"),
        ("amex 378282246310005", "378282246310005"),
        ("old visa 4222222222222", "4222222222222"),  # 13 digits
        (f"19 digits {with_luhn_digit('403550142814630002')}", with_luhn_digit("403550142814630002")),
        (f"grouped {with_luhn_digit('6011 0009 9013 9424 12')}", with_luhn_digit("6011 0009 9013 9424 12")),
    ],
    "ssn": [
        ("SSN 536-22-8726.", "536-22-8726"),
        ("ssn: 536 22 8726", "536 22 8726"),
        ("(078-05-1120)", "078-05-1120"),
    ],
    "iban": [
        ("IBAN GB82 WEST 1234 5698 7654 32.", "GB82 WEST 1234 5698 7654 32"),
        ("GB82WEST12345698765432", "GB82WEST12345698765432"),
        ("DE89 3704 0044 0532 0130 00", "DE89 3704 0044 0532 0130 00"),
        ("NL91ABNA0417164300 (NL)", "NL91ABNA0417164300"),
        ("BE68 5390 0754 7034 from Brussels", "BE68 5390 0754 7034"),  # full last group, then a word
        ("iban fr1420041010050500013m02606", "fr1420041010050500013m02606"),
        ("IBAN: FR14 2004 1010 0505 0001 3M02 606.", "FR14 2004 1010 0505 0001 3M02 606"),
    ],
    "secret": [
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n", "AKIAIOSFODNN7EXAMPLE"),
        ('"ASIAY34FZKBOKMUTVV7A"', "ASIAY34FZKBOKMUTVV7A"),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc123_-x",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc123_-x",
        ),
        ("curl -H 'authorization: bearer abcdef0123456789xyz.'", "abcdef0123456789xyz"),
        (
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234\nabcd==\n-----END RSA PRIVATE KEY-----\nok",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1234\nabcd==\n-----END RSA PRIVATE KEY-----",
        ),
        (
            "-----BEGIN PRIVATE KEY-----\r\nMIIB\r\n-----END PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----\r\nMIIB\r\n-----END PRIVATE KEY-----",
        ),
        (  # truncated page: no END marker; the base64 lines are replaced, the prose after is not
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA\n\nNext paragraph.",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA",
        ),
    ],
}

NEGATIVES: dict[str, list[str]] = {
    "address": [
        "in 1990 Main Street was widened",  # a year after "in"
        "Since 1985 Park Avenue has changed",
        "In 2004 Hollywood Boulevard reopened",
        "Chapter 12 Street Fighter",  # a suffix word with no street name before it
        "Top 10 Road Trips",
        "x = 3 Square + 4 Circle",  # math
        "version 2.1 Main Street",  # a version number, not a house number
        "won 3-1 at Elland Road",  # a score: "at" is no part of a street name
        "Final score 102-98 at Madison Square Garden",
        "the 8 Mile Road",  # a number after an article names the road
        " 1925 Along the Road\n 1926 Essays New and Old",  # a bibliography
        "Catalogue GL 522 and CL 522",
        "Highway 63 north of Fort McMurray, Alberta",  # "City, Province" alone vouches for nothing
        "all 9 Supreme Court justices",  # generic suffixes need a unit or postal code
        "Top 40 Hit Parade",
        "12 Hyde Park",
        "On 12 March Street parties were held",  # a date, then a street type
        "Apollo 11 Command Module",
        "Room 101 is at the end",
        "12345 Main",  # no suffix
        "Suite 5",  # a unit alone
        # Words and numbers that are not number-last street lines: no street type, and a postal
        # code after them that is a year, a score, a time, a measurement or none at all.
        "Section 12 of the Act",
        "See Chapter 3, Page 45 and Volume 7.",
        "Windows 10, 2020 Edition",
        "The final score was Ajax 2, Feyenoord 1.",
        "Flight LH 2041 lands at 10:30, gate B 14.",
        "On March 3, 2014 Agassi retired",
        "during 30-31 March, 2000 the",
        "Brigade 2506 landed",  # "-gade" is Danish, "Brigade" is not
        "Spring 2020, 1990 Summer",
        "Departure gate 14",
        "travelled via Frankfurt 2 times",
        "Yerevan IFF 2006, Rotterdam IFF 2007",
        "Schlesinger 1962, 1982 Murray Blessing Survey",
        "Volume 4. E.P. Dutton, 1909",
        "iPhone 12, 128 GB",
        "The room measures 4 by 5 metres, 12 m2 in all.",
        "PlayStation 5, Formula 1 Grand Prix",
        "Apt 1 Apt 2 Apt 3",
        "the corner of the mouth and the eye",  # no street type after "and"
    ],
    "email": [
        "user@localhost",
        "a@b.c",
        "name@domain..com",
        "@example.com",
        "foo@-bar.com",
        "x@y.123",
        "a" * 65 + "@example.com",  # local part over RFC 5321's 64
        "x@example.com1",
        "price 5@10.00",
    ],
    "ip": [
        # private, loopback, link-local, CGNAT, documentation, multicast, broadcast, unspecified
        "192.168.1.1 10.0.0.1 127.0.0.1 172.16.5.4 169.254.1.1 100.64.0.1",
        "192.0.2.1 198.51.100.7 203.0.113.9 224.0.0.251 255.255.255.255 0.0.0.0",
        "::1 fe80::1 fc00::1 fd12:3456::1 2001:db8::1 ff02::1 ::",
        # not addresses: out of range, versions, leading zeros, times, MACs, C++
        "999.1.1.1 1.2.3.4.5 v1.2.3.4 01.02.03.04 1.2.3",
        "10:30:45 00:1A:2B:3C:4D:5E std::vector deadbeef::cafe:g",
    ],
    "phone": [
        "Order 9498777106 shipped",  # bare digit run
        "on 2000-04-16 11:34:35",
        "born 12.05.1980",
        "from 1990-2000 and 1832-1885",
        "ISBN 0-12-185860-X",
        "ISBN 978-0745333427",
        "population 19 082 000 in 2010",
        "ZIP 12345-6789",
        "version 1.2.3.4.5",
        "Apartment 467 3395 Main Street",  # weak shape without a keyword
        "pages 123-145",
        "pi 3.14159265",
        "12  34  56  78",
        "192.168.100.200",
        "tel 12345",
        "+0 123 456 789",  # country codes never start with 0
        "000 12 3456",  # SSN shape (here an invalid SSN) is not a phone
        "on 05/12/2020 at noon",  # slashes: a date
        "ratio 030/1234/567",  # two slashes: not the DIN 5008 form
        "scores 3/1234567",  # a slash after a group without the trunk 0
        "(1990-2000)",  # years in the sentence's parentheses
        "(+0 123 456 789)",  # country codes never start with 0, in parentheses or not
        "0012 34",  # too few digits after the call prefix
    ],
    "card": [
        "4111 1111 1111 1112",  # Luhn-invalid
        "4111111111111112",
        "0000 0000 0000 0000",
        "4111 1111-1111 1111",  # mixed separators
        "978-0-306-40615-7 9780306406157",  # ISBN-13
        "4111111111111111.50",  # decimal amount
        "41111111111111111111111",  # 23 digits
        "630427373398",  # 12 digits (Luhn-valid Maestro; spec: 13-19)
        "41 11 11 11 11 11 11 11",
    ],
    "ssn": [
        "000-12-3456",
        "666-12-3456",
        "900-12-3456",
        "987-65-4320",
        "123-00-4567",
        "123-45-0000",
        "123-45-67890",  # not SSN-shaped, but a plausible phone number: see PHONE_SHAPED
        "1234-56-7890",
        "123-45 6789",
    ],
    "iban": [
        "GB82 WEST 1234 5698 7654 33",  # mod-97 fails
        "GB82WEST12345698765433",
        "GB82WEST1234569876543",  # one short of GB's 22
        "XX82WEST12345698765432",  # no such country
        "Gb82West12345698765432",  # mixed case: a word
        "GB82WEST12345698765432X",
        "DE89 3704 0044 0532 0130",
    ],
    "secret": [
        "AKIAIOSFODNN7EXAMPL",
        "AKIAIOSFODNN7EXAMPLEX",
        "akiaiosfodnn7example",
        "the bearer of this letter is a friend",
        "Bearer abcdefghijklmnopqrstuvwxyz",  # no digit
        "Bearer abc123",  # too short
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    ],
}


@pytest.mark.parametrize(
    ("pii_type", "text", "value"),
    [(t, text, value) for t, cases in POSITIVES.items() for text, value in cases],
)
def test_positive(pii_type: str, text: str, value: str) -> None:
    spans = find_pii(text)
    assert [(s.type, text[s.start : s.end]) for s in spans] == [(pii_type, value)]
    # Scrubbing replaces exactly that slice of the original text.
    start = text.index(value)
    assert (spans[0].start, spans[0].end) == (start, start + len(value))
    scrubbed, _ = scrub(text)
    assert scrubbed == text[:start] + f"<{pii_type.upper()}>" + text[start + len(value) :]


PHONE_SHAPED = {"123-45-67890", "1234-56-7890", "123-45 6789"}
# Not a phone number, but a street address: a unit ("Apartment 467") before "3395 Main Street".
ADDRESS_SHAPED = {"Apartment 467 3395 Main Street"}


@pytest.mark.parametrize(
    ("pii_type", "text"), [(t, text) for t, cases in NEGATIVES.items() for text in cases]
)
def test_negative(pii_type: str, text: str) -> None:
    assert find_pii(text, PiiConfig(enabled=(pii_type,))) == []
    # Every type enabled: another type must not catch what this one rightly refuses either (the
    # phone finder must not take an invalid SSN or a Luhn-invalid card), except for strings that
    # are not this type's shape at all but are a valid phone number or address.
    if text in PHONE_SHAPED:
        assert found(text) == [("phone", text)]
    elif text in ADDRESS_SHAPED:
        assert found(text) == [("address", text)]
    else:
        assert scrub(text) == (text, [])


def test_checksum_helpers_on_published_examples() -> None:
    # Card test numbers published by the networks, and the ECBS IBAN examples.
    for number in ("4111111111111111", "5555555555554444", "378282246310005", "6011111111111117"):
        assert luhn_valid(number)
        assert not luhn_valid(number[:-1] + str((int(number[-1]) + 1) % 10))
    for iban in (
        "GB82WEST12345698765432",
        "DE89370400440532013000",
        "NO9386011117947",
        "MT84MALT011000012345MTLCAST001S",
    ):
        assert iban_valid(iban)
        assert not iban_valid(iban[:2] + "00" + iban[4:])


def test_iban_lengths_cover_the_examples_and_agree_with_them() -> None:
    for iban in (
        "GB82WEST12345698765432",
        "DE89370400440532013000",
        "NO9386011117947",
        "MT84MALT011000012345MTLCAST001S",
    ):
        assert pii.IBAN_LENGTHS[iban[:2]] == len(iban)
        assert found(iban) == [("iban", iban)]


# ---------------------------------------------------------------------------------------------
# Offsets, overlaps, config
# ---------------------------------------------------------------------------------------------

MIXED = (
    "Hi, I'm at jane.roe@example.org or +1 (555) 123-4567; server 93.184.216.34 "
    "(LAN 192.168.0.7). Card 4111 1111 1111 1111, SSN 536-22-8726, "
    "IBAN GB82 WEST 1234 5698 7654 32, key AKIAIOSFODNN7EXAMPLE. Post: 42 Elm Street, "
    "Apt 7, Boston, MA 02118. Bye!"
)
MIXED_VALUES = {
    "email": "jane.roe@example.org",
    "phone": "+1 (555) 123-4567",
    "ip": "93.184.216.34",
    "card": "4111 1111 1111 1111",
    "ssn": "536-22-8726",
    "iban": "GB82 WEST 1234 5698 7654 32",
    "secret": "AKIAIOSFODNN7EXAMPLE",
    "address": "42 Elm Street, Apt 7, Boston, MA 02118",
}


def _apply_right_to_left(text: str, spans: list[PiiSpan]) -> str:
    """The spec's reference semantics: replace from the last span to the first."""
    for span in sorted(spans, key=lambda s: s.start, reverse=True):
        text = text[: span.start] + span.placeholder + text[span.end :]
    return text


def test_offsets_map_back_to_the_original_text() -> None:
    scrubbed, spans = scrub(MIXED)
    assert {s.type: MIXED[s.start : s.end] for s in spans} == MIXED_VALUES
    assert len(spans) == len(MIXED_VALUES)
    assert scrubbed == _apply_right_to_left(MIXED, spans)
    assert scrubbed == (
        "Hi, I'm at <EMAIL> or <PHONE>; server <IP> (LAN 192.168.0.7). Card <CARD>, SSN <SSN>, "
        "IBAN <IBAN>, key <SECRET>. Post: <ADDRESS>. Bye!"
    )


def test_placeholders_are_configurable() -> None:
    config = PiiConfig(placeholders={"email": "[email removed]", "phone": "", "secret": "***"})
    scrubbed, spans = scrub(MIXED, config)
    assert "[email removed]" in scrubbed and "***" in scrubbed and "<EMAIL>" not in scrubbed
    assert "or ; server" in scrubbed  # empty placeholder deletes
    assert "<CARD>" in scrubbed  # unnamed types keep their default
    assert {s.type: s.placeholder for s in spans}["email"] == "[email removed]"
    assert scrubbed == _apply_right_to_left(MIXED, spans)
    typed = PiiConfig(placeholders=PiiPlaceholders(ip="0.0.0.0"))
    assert "server 0.0.0.0 (LAN" in scrub(MIXED, typed)[0]


@pytest.mark.parametrize("pii_type", PII_TYPES)
def test_disabled_types_are_untouched(pii_type: str) -> None:
    only = PiiConfig(enabled=(pii_type,))
    scrubbed, spans = scrub(MIXED, only)
    assert [s.type for s in spans] == [pii_type]
    assert MIXED_VALUES[pii_type] not in scrubbed
    for other, value in MIXED_VALUES.items():
        if other != pii_type:
            assert value in scrubbed
    everything_but = PiiConfig(enabled=[t for t in PII_TYPES if t != pii_type])
    scrubbed, spans = scrub(MIXED, everything_but)
    assert MIXED_VALUES[pii_type] in scrubbed
    assert pii_type not in {s.type for s in spans}
    assert scrub(MIXED, PiiConfig(enabled=())) == (MIXED, [])


def test_secret_beats_a_phone_inside_it() -> None:
    text = "-----BEGIN RSA PRIVATE KEY-----\nCall 555-123-4567\n-----END RSA PRIVATE KEY-----"
    assert found(text, PiiConfig(enabled=("phone",))) == [("phone", "555-123-4567")]
    assert found(text) == [("secret", text)]
    assert scrub(text)[0] == "<SECRET>"


def test_same_extent_goes_to_the_more_specific_type() -> None:
    # 13 digits in groups: both a (Luhn-valid) card and a phone shape; the card ranks first.
    text = "pay with 4222 2222 22222 now"
    assert found(text, PiiConfig(enabled=("phone",))) == [("phone", "4222 2222 22222")]
    assert found(text) == [("card", "4222 2222 22222")]


def test_leftmost_longest_wins() -> None:
    # The phone finder also accepts the local part; the e-mail starts at the same place and is longer.
    text = "write to 555-123-4567@example.com"
    assert found(text, PiiConfig(enabled=("phone",))) == [("phone", "555-123-4567")]
    assert found(text) == [("email", "555-123-4567@example.com")]


def test_random_mixtures_keep_the_invariants() -> None:
    fragments = [
        *MIXED_VALUES.values(),
        "2001:4860::8888",
        "Tel: 467 3395",
        "10.0.0.1",
        "4111 1111 1111 1112",
        "666-12-3456",
        " ",
        "\n",
        ", ",
        ".",
        "-",
        "x",
        "@",
        ":",
        "1",
        "2020",
        "word",
        "(",
        ")",
    ]
    rng = random.Random(20240611)
    for _ in range(500):
        text = "".join(rng.choice(fragments) for _ in range(rng.randint(1, 30)))
        scrubbed, spans = scrub(text)
        last_end = 0
        for span in spans:
            assert last_end <= span.start < span.end <= len(text)
            last_end = span.end
        assert scrubbed == _apply_right_to_left(text, spans)
        assert find_pii(text) == spans  # deterministic


def test_config_validation_names_the_key_and_allowed_values() -> None:
    assert PiiConfig().enabled == PII_TYPES
    assert PiiConfig(enabled=["phone", "email", "email"]).enabled == ("email", "phone")
    with pytest.raises(
        ConfigError, match=r"pii\.enabled: unknown PII type 'mail'; allowed: secret, card, iban"
    ):
        PiiConfig(enabled=("mail",))
    with pytest.raises(ConfigError, match=r"pii\.enabled must be a list of PII types .*email.*got 'email'"):
        PiiConfig(enabled="email")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"pii\.placeholders: unknown PII type 'name'; allowed: .*phone"):
        PiiConfig(placeholders={"name": "<NAME>"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"pii\.placeholders\.email must be a string, got 3"):
        PiiConfig(placeholders={"email": 3})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"pii\.placeholders must be"):
        PiiConfig(placeholders=["<EMAIL>"])  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PiiConfig().enabled = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        PiiConfig(("email",))  # type: ignore[misc]  # keyword-only


def test_scrubber_stage_counts_and_pickles() -> None:
    scrubber = PiiScrubber(PiiConfig(enabled=("email", "phone", "ip")))
    text = "a@example.com, b@example.com, 8.8.8.8 and 10.0.0.1"
    scrubbed, counts = scrubber(text)
    assert scrubbed == "<EMAIL>, <EMAIL>, <IP> and 10.0.0.1"
    assert counts == {"email": 2, "ip": 1, "phone": 0}  # every enabled type, zeros included
    clone = pickle.loads(pickle.dumps(scrubber))  # Spark ships the stage to executors
    assert clone(text) == (scrubbed, counts)
    assert PiiScrubber()("nothing here") == ("nothing here", dict.fromkeys(PII_TYPES, 0))


# ---------------------------------------------------------------------------------------------
# Linear time
# ---------------------------------------------------------------------------------------------

_SINGLE_CHAR_OPS = {sre_constants.LITERAL, sre_constants.NOT_LITERAL, sre_constants.IN, sre_constants.ANY}
_REPEAT_OPS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT}


def _regex_problems(pattern: str, flags: int = 0) -> list[str]:
    """Violations of the module's rules 1-2 in a pattern's parse tree (see curation/pii/scrub.py)."""
    problems: list[str] = []

    def walk(items: sre_parser.SubPattern | list) -> None:
        for op, av in items:
            if op in _REPEAT_OPS:
                lo, hi, body = av
                if hi > 1 and not (len(body) == 1 and body[0][0] in _SINGLE_CHAR_OPS):
                    problems.append(f"repeat {{{lo},{hi}}} over a group: {list(body)!r}")
                if hi == sre_constants.MAXREPEAT and op is not sre_constants.POSSESSIVE_REPEAT:
                    problems.append("unbounded repeat that is not possessive")
                walk(body)
            elif op is sre_constants.SUBPATTERN:
                walk(av[3])
            elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
                walk(av[1])
            elif op is sre_constants.ATOMIC_GROUP:
                walk(av)
            elif op is sre_constants.BRANCH:
                for branch in av[1]:
                    walk(branch)
            elif op is sre_constants.GROUPREF_EXISTS:
                walk(av[1])
                if av[2] is not None:
                    walk(av[2])

    walk(sre_parser.parse(pattern, flags))
    return problems


def test_rule_checker_catches_backtracking_patterns() -> None:
    # The checker below is only worth something if it flags the classic ReDoS shapes.
    assert _regex_problems(r"(a+)+b")  # nested quantifier: exponential
    assert _regex_problems(r"(?:\d{1,3}\.){3}\d{1,3}")  # repeated group
    assert _regex_problems(r"[a-z]+@")  # unbounded, not possessive: quadratic on 'a' * n
    # datatrove's PIIFormatter e-mail pattern (what FineWeb ran), abridged: nested quantifiers.
    assert _regex_problems(r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@")
    assert not _regex_problems(r"[a-z]++@[a-z]{1,63}(?:\.com)?")


def test_every_pattern_obeys_the_linear_time_rules() -> None:
    listed = {id(p) for p in pii.PATTERNS.values()}
    for module in (pii, pii_address, pii_address_eu):
        compiled = {id(v) for v in vars(module).values() if isinstance(v, re.Pattern)}
        assert compiled <= listed, f"a module-level pattern of {module.__name__} is missing from pii.PATTERNS"
    for name, pattern in pii.PATTERNS.items():
        assert _regex_problems(pattern.pattern, pattern.flags) == [], name


# What scrubbing each adversarial input finds (every other input: nothing). Measured once; the
# PEM inputs really are private-key blocks, and "Bearer a1a1..." is a (1 MB) bearer token.
ADVERSARIAL_MATCHES: dict[str, dict[str, int]] = {
    "secret:pem-begins": {"secret": 32258},
    "secret:pem-no-end": {"secret": 1},
    "secret:pem-lines": {"secret": 27027},
    "secret:bearer-long": {"secret": 1},
    # Each repeat of a real address is one address (1,000,000 // len(unit) whole repeats; the cut
    # last one is no address); the runs of street types after one number are one address.
    "address:123 Street*": {"address": 1},
    "address:city-run": {"address": 1},
    "address:separators": {"address": 1},
    "address:dense": {"address": MB // len("123 Main Street ")},
    "address:dense-comma": {"address": MB // len("1 Main St, ")},
    "address:dense-unit": {"address": MB // len("123 Main St Apt 4 ")},
    "address:dense-us": {"address": MB // len("1234 Main Street, Springfield, IL 62704\n")},
    "address:dense-uk": {"address": MB // len("Flat 3, 12 High Street, London SW1A 2AA\n")},
    "address:po-box": {"address": MB // len("PO Box 1 ")},
    "address:apo": {"address": MB // len("APO AE 12345 ")},
    "address:military": {"address": MB // len("PSC 1234, Box 5678\nAPO AE 09012\n")},
    "address:eu-dense": {"address": MB // len("Lindenstraße 12\n")},
    # The cut last repeat, "Via Roma 12, 001", still holds a whole street line.
    "address:eu-dense-locality": {"address": MB // len("Via Roma 12, 00184 Roma\n") + 1},
    # A name and number before a postal code and town (each line), or after "address:".
    "address:eu-dense-weak": {"address": MB // len("Aa 1, 12345 Aa\n")},
    "address:eu-dense-cue": {"address": MB // len("address: Aa 1\n")},
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_megabyte_scrubs_correctly(name: str) -> None:
    # No wall-clock bound here: this test used to assert "under 1 s" per input, and three of its
    # inputs (the slowest, ~0.4-1.2 s on an idle machine before issue 17's fix) failed once when
    # `make test` shared the machine with other jobs. Speed is the bench's job:
    # `python -m bench.curation.pii_speed --suite` runs these same inputs and exits 1 above 1 s per MB. The linear-
    # time rules are checked structurally above, and the work per repeated IP candidate below.
    text = ADVERSARIAL[name]()
    assert len(text) >= MB
    scrubbed, spans = scrub(text)
    counts = {t: n for t in PII_TYPES if (n := sum(s.type == t for s in spans))}
    last_end = 0
    for span in spans:  # sorted, disjoint, inside the text
        assert last_end <= span.start < span.end <= len(text)
        last_end = span.end
    removed = sum(s.end - s.start for s in spans)
    assert len(scrubbed) == len(text) - removed + sum(len(s.placeholder) for s in spans)
    if name == "dense:mixed":  # the dense input was really scrubbed: every item of every line
        assert counts == {t: text.count(v) for t, v in DENSE_VALUES.items()}
        assert counts["email"] > 4000
        assert not any(v in scrubbed for v in DENSE_VALUES.values())
    else:
        assert counts == ADVERSARIAL_MATCHES.get(name, {})


def test_ipv4_public_check_agrees_with_ipaddress() -> None:
    # The IPv4 fast path decides "public" from the integer with an interval table built from
    # `ipaddress` at import; it must answer exactly as `ipaddress` does, wherever an answer can
    # change (every interval boundary +-3, all of 192.0.0.0/24 whose /32 exceptions differ between
    # Python patch releases) and on random addresses, and refuse what `ipaddress` refuses.
    def stdlib(value: int) -> bool:
        ip = ipaddress.IPv4Address(value)
        return ip.is_global and not ip.is_multicast

    rng = random.Random(17)
    values = {v for b in pii._IPV4_STARTS for v in range(b - 3, b + 4) if 0 <= v < 2**32}
    values |= set(range(int(ipaddress.IPv4Address("192.0.0.0")), int(ipaddress.IPv4Address("192.0.1.0"))))
    values |= {rng.getrandbits(32) for _ in range(50_000)}
    values |= {0, 2**32 - 1}
    wrong = [
        str(ipaddress.IPv4Address(v))
        for v in sorted(values)
        if pii._is_public_ipv4(str(ipaddress.IPv4Address(v)).split(".")) != stdlib(v)
    ]
    assert wrong == []
    assert sum(map(stdlib, values)) > 10_000  # both answers are exercised
    for text in ("01.2.3.4", "8.8.8.08", "256.1.1.1", "8.8.8.300", "999.999.999.999"):
        with pytest.raises(ValueError):
            ipaddress.ip_address(text)
        assert not pii._is_public_ipv4(text.split("."))
    assert pii._is_public_ipv4(["8", "8", "8", "8"])


def test_repeated_ip_candidates_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The cause of issue 17's 4.6 s per MB: every candidate of "::1 " * 250000 was parsed by
    # `ipaddress` (3-8 us) and tested (is_global). Repeats must cost a dict lookup, and IPv4 must
    # not reach `ipaddress` at all. Counted, not timed, so the test holds on any machine.
    calls: list[str] = []
    real = ipaddress.ip_address

    def counting(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        calls.append(address)
        return real(address)

    monkeypatch.setattr(pii.ipaddress, "ip_address", counting)
    pii._ip_cache.clear()
    text = "".join(u * 2000 for u in ("::1 ", "::ffff:10.0.0.1 ", "fe80::1 ", "10.0.0.1 ", "8.8.8.8 "))
    text += "2001:4860::8888 " * 2000
    spans = find_pii(text, PiiConfig(enabled=("ip",)))
    assert len(spans) == 4000  # 8.8.8.8 and 2001:4860::8888, 2000 each; the others are private
    assert sorted(set(calls)) == sorted(calls) == ["2001:4860::8888", "::1", "::ffff:10.0.0.1", "fe80::1"]


def test_phone_digit_precheck_is_exact() -> None:
    # `_find_phones` skips candidates with fewer than `_PHONE_MIN_DIGITS` digits before calling
    # `_phone_shape`; that is only an optimisation if `_phone_shape` rejects all of them anyway.
    rng = random.Random(17)
    chars = "0123456789" * 2 + " .-()"
    below = tight = 0
    for _ in range(20_000):
        body = rng.choice("+(0123456789") + "".join(rng.choice(chars) for _ in range(rng.randint(5, 30)))
        digits = sum(c.isdigit() for c in body)
        if digits < pii._PHONE_MIN_DIGITS:
            below += 1
            assert pii._phone_shape(body)[0] == 0, body
        elif digits == pii._PHONE_MIN_DIGITS and pii._phone_shape(body)[0]:
            tight += 1  # the bound is tight: a 7-digit body can be a phone number
    assert below > 1000 and tight > 0
    assert pii._phone_shape("555-123 ")[0] == 0 and pii._phone_shape("555-1234")[0] == 8


# ---------------------------------------------------------------------------------------------
# Per-document time budget (core.stage.run_stages)
# ---------------------------------------------------------------------------------------------


class _FakeClock:
    """`core.stage._clock` replacement: time moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run_pii_stage(stage: PiiStage, text: str) -> tuple[Document | None, Stats, list[Drop]]:
    stats, drops = Stats(), []
    doc = Document(id="d1", text=text, metadata={})
    out = run_stages(doc, [stage], stats, lambda _name, _doc, drop: drops.append(drop))
    return out, stats, drops


def test_pii_stage_over_its_time_budget_drops_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _FakeClock()
    monkeypatch.setattr(core_stage, "_clock", clock)
    text = "mail jane.roe@example.org now"

    class SlowScrubber(PiiScrubber):
        __slots__ = ()

        def __call__(self, text: str) -> tuple[str, dict[str, int]]:
            clock.now += 31.0  # an injected slow scrub: over the default 30 s budget
            return super().__call__(text)

    stage = PiiStage()
    assert stage.time_budget_s == pii.PII_TIME_BUDGET_S
    fast, stats, drops = _run_pii_stage(stage, text)
    assert fast is not None and fast.text == "mail <EMAIL> now"
    assert stats.counters["pii_email"] == 1

    stage.scrubber = SlowScrubber()
    out, stats, drops = _run_pii_stage(stage, text)
    assert out is None  # dropped: never written, scrubbed or not
    st = stats.stages["pii"]
    assert (st.docs_in, st.docs_out, dict(st.drops)) == (1, 0, {"pii_time_budget": 1})
    assert st.drop_bytes["pii_time_budget"] == len(text)
    assert [(d.reason, d.snippet) for d in drops] == [("pii_time_budget", "")]  # text not shown
    assert "31.0 s > time budget 30.0 s" in drops[0].detail
    assert "pii_email" not in stats.counters  # counts of a discarded result are discarded too

    # A budget of 0 drops even a fast scrub once any time passes; None disables the check.
    clock_step = PiiStage(time_budget_s=0.0)
    clock_step.scrubber = SlowScrubber()
    assert _run_pii_stage(clock_step, text)[0] is None
    unlimited = PiiStage(time_budget_s=None)
    unlimited.scrubber = SlowScrubber()
    kept = _run_pii_stage(unlimited, text)[0]
    assert kept is not None and kept.text == "mail <EMAIL> now"


def test_time_budget_is_generic_for_document_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _FakeClock()
    monkeypatch.setattr(core_stage, "_clock", clock)

    class Sleepy(DocumentStage):
        name = "sleepy"
        time_budget_s = 2.0

        def process(self, doc: Document) -> Document | Drop:
            clock.now += float(doc.metadata["cost"])
            return doc

    stats, drops = Stats(), []
    kept = [
        run_stages(
            Document(id=str(c), text="x", metadata={"cost": c}), [Sleepy()], stats, lambda *a: drops.append(a)
        )
        for c in (1, 2, 3)
    ]
    assert [d is not None for d in kept] == [True, True, False]  # 2 s is within a 2 s budget
    assert dict(stats.stages["sleepy"].drops) == {"sleepy_time_budget": 1}
    assert drops[0][2].snippet is None  # an ordinary stage's sample shows the document


# ---------------------------------------------------------------------------------------------
# Recall and precision on real labelled data
# ---------------------------------------------------------------------------------------------


def _load_bench() -> ModuleType:
    return load_bench("curation/pii_recall")


@pytest.fixture(scope="module")
def presidio_stats() -> dict:
    bench = _load_bench()
    return bench.evaluate(bench.load_records(bench.default_data_path()))


def test_presidio_gold_and_eligible_counts(presidio_stats: dict) -> None:
    # Facts about the data file, measured once: how many gold spans of each type, and how many the
    # spec asks us to find. 10 of the 136 cards are 12-digit Maestro numbers (spec: 13-19 digits);
    # 3 of the 92 phone numbers are bare 10-digit runs (spec: plain long numbers are not matched).
    # Every IP is public, every IBAN passes mod-97, every SSN is in an issued range. 112 of the 598
    # street-address spans hold a US/UK/Canadian street line, PO box or military address; the rest
    # are number-last European streets, intersections and fragments ("28030", "Apt. 297").
    counts = {t: (s.gold, s.eligible) for t, s in presidio_stats.items()}
    assert counts == {
        "secret": (0, 0),
        "card": (136, 126),
        "iban": (21, 21),
        "ssn": (16, 16),
        "email": (49, 49),
        "ip": (14, 14),
        "phone": (92, 89),
        "address": (598, 112),
    }


# Measured on presidio_synth_dev.json (bench/curation/pii_recall.py): recall on eligible spans is 1.000 for
# email, ip, card, ssn, iban, 0.978 (87/89) for phone and 0.982 (110/112) for address; precision
# is 1.000 except phone 0.989 (one false positive: a driver licence number 2270-66-1551; the
# street numbers "03262 2437" are now one address). Floors sit one or two misses below those
# (set when address recall was 0.955), per type's count: e.g.
# ip 13/14 = 0.93, address 105/112 = 0.94 and 134/136 predicted = 0.985.
RECALL_FLOORS = {
    "email": 0.97, "ip": 0.92, "card": 0.98, "ssn": 0.93, "iban": 0.95, "phone": 0.95, "address": 0.93,
}  # fmt: skip
PRECISION_FLOORS = {
    "email": 0.97, "ip": 0.92, "card": 0.98, "ssn": 0.93, "iban": 0.95, "phone": 0.93, "address": 0.98,
}  # fmt: skip


@pytest.mark.parametrize("pii_type", list(RECALL_FLOORS))
def test_presidio_recall_and_precision(presidio_stats: dict, pii_type: str) -> None:
    st = presidio_stats[pii_type]
    assert st.recall_eligible >= RECALL_FLOORS[pii_type], (st.recall_eligible, st.misses)
    assert st.precision >= PRECISION_FLOORS[pii_type], (st.precision, st.false_positives)


def test_presidio_address_recall_over_all_spans(presidio_stats: dict) -> None:
    # All 598 spans, the measure: 0.866 (518) measured, 0.241 before number-last street
    # lines, intersections and European localities (docs/benchmarks.md has the removed pii_address_classes bench's table by
    # form). The floor is the aim, 0.85 (509 spans).
    assert presidio_stats["address"].recall >= 0.85


def test_presidio_ineligible_spans_are_left_alone(presidio_stats: dict) -> None:
    # The spec's exclusions hold on real data too: no 12-digit card, no bare digit-run phone.
    # (Not for addresses: a found address covers the unit and ZIP fragments the file labels apart.)
    for t, st in presidio_stats.items():
        if t != "address":
            assert st.found == st.found_eligible, t
    assert presidio_stats["secret"].predicted == 0  # the data has no secrets: any match is wrong


def test_real_prose_has_almost_no_matches() -> None:
    # 3 MB of Wikipedia articles: years, dates, ISBNs, populations, coordinates, but no contact
    # details. Measured: 0 matches of any type but address, and 2 addresses, both real places'
    # (the Walk of Fame's "6263 Hollywood Boulevard" and the film "15 Maiden Lane"); allow a few
    # before calling it a regression. The bound for addresses is 10 per MB (30 here).
    path = shared_data_dir() / "quality" / "enwiki_sample_articles.jsonl"
    hits = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            hits += [(s.type, text[s.start : s.end]) for s in find_pii(text)]
    others = [h for h in hits if h[0] != "address"]
    assert len(others) <= 3, others
    assert len(hits) - len(others) <= 5, hits


def test_address_recall_on_a_second_generator() -> None:
    # bench/curation/pii_address_forms.py writes street lines and localities of 18 European countries and
    # intersections into new sentences (committed before the detector's European forms, and
    # independent of the Presidio file). Measured on the 1,000 records of seed 23: recall 0.988,
    # precision 1.000 (0.042 before number-last lines); its misses are the forms left doubtful on
    # purpose (Norwegian "-gate", "Largo", "al."/"pl." and typeless names with no postal code).
    # The floor allows 10 more misses.
    bench = _load_bench()
    st = bench.evaluate(bench.generate_address_records(1000, 23))["address"]
    assert st.gold == 1000
    assert st.recall >= 0.975, st.misses_all
    assert st.precision >= 0.99, st.false_positives


def test_phone_recall_on_a_second_generator() -> None:
    # bench/curation/pii_phone_forms.py writes national and international layouts of 30 countries into new
    # sentences (independent of the Presidio file). Measured: recall 1.000, precision 1.000 on the
    # 1,000 records of seed 19 (0.906 before issue 19); the floor allows 20 misses, the aim
    # is 0.95.
    bench = _load_bench()
    st = bench.evaluate(bench.generate_phone_records(1000, 19))["phone"]
    assert st.gold == 1000
    assert st.recall >= 0.98, st.misses
    assert st.precision >= 0.98, st.false_positives
