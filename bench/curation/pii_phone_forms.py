"""A second, independent generator of Presidio-style phone-number text, for measuring recall.

What: `generate(n, seed)` returns `n` records in the layout of the shared Presidio file
(`full_text`, `spans[]` with `entity_type` "PHONE_NUMBER", `entity_value`, `start_position`,
`end_position`), each a sentence from `TEMPLATES` holding one phone number written in one of the
national or international layouts of `FORMATS`, optionally with an extension.

Why: the shared Presidio set (`pii/presidio_synth_dev.json`) comes from one generator (Faker's
phone formats, mostly US and a few European ones), so a detector can score well on it and still
miss the ways people really write numbers (issue 19: 0.978 there, 0.90 on text from another
generator). This file is written independently of that data and of `curation.pii.scrub`: the layouts
follow the numbering plans and the customary written forms of each country (ITU-T E.164 and
E.123; national plans: NANP, Ofcom, BNetzA, ARCEP, ACMA, TRAI, MIC Japan, Anatel, ...), digits
are random within each plan's leading-digit rules, and the sentences are new. Vanity numbers
(letters) and bare national digit runs (no separator, no "+"; indistinguishable from order ids)
are not generated: the PII spec leaves them out.

    python -m bench.curation.pii_phone_forms [--n 1000] [--seed 19] [--show 20]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Sequence

Digits = Callable[[random.Random], str]


def _d(n: int) -> Digits:
    """`n` random digits."""
    return lambda r: "".join(r.choice("0123456789") for _ in range(n))


def _nz(n: int) -> Digits:
    """`n` random digits, the first not 0 or 1 (most plans reserve those as prefixes)."""
    return lambda r: r.choice("23456789") + _d(n - 1)(r)


def _lit(s: str) -> Digits:
    return lambda _r: s


def _pick(*choices: str) -> Digits:
    return lambda r: r.choice(choices)


def _cat(*parts: Digits | str) -> Digits:
    """Concatenate digit makers and literal separators."""
    return lambda r: "".join(p if isinstance(p, str) else p(r) for p in parts)


# North American Numbering Plan: NPA (area) and NXX (exchange) start with 2-9; 555-01XX is the
# fictional range, but any NXX is a valid shape.
_NPA, _NXX, _LINE = _nz(3), _nz(3), _d(4)
_TOLL = _pick("800", "833", "844", "855", "866", "877", "888")

# (country, layout) -> maker. Each layout is a customary written form in that country; several
# countries share E.164's "+CC" form with their own grouping.
FORMATS: dict[str, Digits] = {
    # United States / Canada
    "us (NPA) NXX-XXXX": _cat("(", _NPA, ") ", _NXX, "-", _LINE),
    "us NPA-NXX-XXXX": _cat(_NPA, "-", _NXX, "-", _LINE),
    "us NPA.NXX.XXXX": _cat(_NPA, ".", _NXX, ".", _LINE),
    "us NPA NXX XXXX": _cat(_NPA, " ", _NXX, " ", _LINE),
    "us 1-NPA-NXX-XXXX": _cat("1-", _NPA, "-", _NXX, "-", _LINE),
    "us 1 (NPA) NXX-XXXX": _cat("1 (", _NPA, ") ", _NXX, "-", _LINE),
    "us +1 NPA NXX XXXX": _cat("+1 ", _NPA, " ", _NXX, " ", _LINE),
    "us +1-NPA-NXX-XXXX": _cat("+1-", _NPA, "-", _NXX, "-", _LINE),
    "us +1 (NPA) NXX-XXXX": _cat("+1 (", _NPA, ") ", _NXX, "-", _LINE),
    "us +1.NPA.NXX.XXXX": _cat("+1.", _NPA, ".", _NXX, ".", _LINE),
    "us toll-free 1-8XX": _cat("1-", _TOLL, "-", _NXX, "-", _LINE),
    "us toll-free (8XX)": _cat("(", _TOLL, ") ", _NXX, "-", _LINE),
    "us 011 exit code": _cat("011 44 20 ", _d(4), " ", _d(4)),
    # United Kingdom (Ofcom): 0 trunk prefix, written "(0)" after +44
    "uk 020 XXXX XXXX": _cat("020 ", _nz(4), " ", _d(4)),
    "uk 0161 XXX XXXX": _cat("01", _nz(2), " ", _d(3), " ", _d(4)),
    "uk mobile 07XXX XXXXXX": _cat("07", _nz(3), " ", _d(6)),
    "uk +44 20 XXXX XXXX": _cat("+44 20 ", _nz(4), " ", _d(4)),
    "uk +44 (0)20": _cat("+44 (0)20 ", _nz(4), " ", _d(4)),
    "uk +44 7XXX XXXXXX": _cat("+44 7", _nz(3), " ", _d(6)),
    "uk 0044": _cat("0044 20 ", _nz(4), " ", _d(4)),
    # Germany (BNetzA): area codes of 2-5 digits after the trunk 0, subscriber 3-8 digits
    "de 030 XXXXXXX": _cat("030 ", _nz(7)),
    "de 030-XXXXXXX": _cat("030-", _nz(7)),
    "de 030/XXXXXXX": _cat("030/", _nz(7)),
    "de 089 XXXXXX-XX": _cat("089 ", _nz(6), "-", _d(2)),
    "de +49 30 XXXXXXX": _cat("+49 30 ", _nz(7)),
    "de +49 (0)30": _cat("+49 (0)30 ", _nz(7)),
    "de 0049 30": _cat("0049 30 ", _nz(7)),
    "de mobile 0171 XXXXXXX": _cat("01", _pick("51", "52", "60", "71", "76"), " ", _nz(7)),
    "de +49 171 XXXXXXX": _cat("+49 1", _pick("51", "52", "60", "71", "76"), " ", _nz(7)),
    # France (ARCEP): ten digits in pairs
    "fr 01 23 45 67 89": _cat("0", _pick("1", "2", "3", "4", "5", "6", "7", "9"), " ", _d(2), " ", _d(2), " ", _d(2), " ", _d(2)),
    "fr 01.23.45.67.89": _cat("0", _pick("1", "4", "6"), ".", _d(2), ".", _d(2), ".", _d(2), ".", _d(2)),
    "fr +33 1 23 45 67 89": _cat("+33 ", _pick("1", "6", "7"), " ", _d(2), " ", _d(2), " ", _d(2), " ", _d(2)),
    "fr +33 (0)1": _cat("+33 (0)", _pick("1", "6"), " ", _d(2), " ", _d(2), " ", _d(2), " ", _d(2)),
    "fr 0033": _cat("0033 1 ", _d(2), " ", _d(2), " ", _d(2), " ", _d(2)),
    # Australia (ACMA)
    "au (02) XXXX XXXX": _cat("(0", _pick("2", "3", "7", "8"), ") ", _nz(4), " ", _d(4)),
    "au 02 XXXX XXXX": _cat("0", _pick("2", "3", "7", "8"), " ", _nz(4), " ", _d(4)),
    "au +61 2 XXXX XXXX": _cat("+61 ", _pick("2", "3", "7", "8"), " ", _nz(4), " ", _d(4)),
    "au mobile 04XX XXX XXX": _cat("04", _d(2), " ", _d(3), " ", _d(3)),
    "au +61 4XX XXX XXX": _cat("+61 4", _d(2), " ", _d(3), " ", _d(3)),
    "au 1300 XXX XXX": _cat(_pick("1300", "1800"), " ", _d(3), " ", _d(3)),
    # India (TRAI): mobiles 5+5, landlines STD code + number
    "in +91 XXXXX XXXXX": _cat("+91 ", _pick("6", "7", "8", "9"), _d(4), " ", _d(5)),
    "in +91-XXXXX-XXXXX": _cat("+91-", _pick("7", "8", "9"), _d(4), "-", _d(5)),
    "in 0XXXXX XXXXX": _cat("0", _pick("7", "8", "9"), _d(4), " ", _d(5)),
    "in 022 XXXX XXXX": _cat("0", _pick("22", "11", "80", "44"), " ", _nz(4), " ", _d(4)),
    "in +91 22 XXXX XXXX": _cat("+91 ", _pick("22", "11", "80", "44"), " ", _nz(4), " ", _d(4)),
    # Japan (MIC)
    "jp 03-XXXX-XXXX": _cat("0", _pick("3", "6"), "-", _nz(4), "-", _d(4)),
    "jp +81 3-XXXX-XXXX": _cat("+81 ", _pick("3", "6"), "-", _nz(4), "-", _d(4)),
    "jp mobile 090-XXXX-XXXX": _cat("0", _pick("70", "80", "90"), "-", _d(4), "-", _d(4)),
    "jp +81 90-XXXX-XXXX": _cat("+81 ", _pick("70", "80", "90"), "-", _d(4), "-", _d(4)),
    # Brazil (Anatel)
    "br (11) 9XXXX-XXXX": _cat("(", _pick("11", "21", "31", "61"), ") 9", _d(4), "-", _d(4)),
    "br +55 11 9XXXX-XXXX": _cat("+55 ", _pick("11", "21", "31"), " 9", _d(4), "-", _d(4)),
    "br +55 (11) XXXX-XXXX": _cat("+55 (", _pick("11", "21", "31"), ") ", _nz(4), "-", _d(4)),
    # Spain, Italy, Netherlands
    "es +34 9XX XXX XXX": _cat("+34 9", _d(2), " ", _d(3), " ", _d(3)),
    "es 9XX XX XX XX": _cat("9", _d(2), " ", _d(2), " ", _d(2), " ", _d(2)),
    "es +34 6XX XX XX XX": _cat("+34 6", _d(2), " ", _d(2), " ", _d(2), " ", _d(2)),
    "it +39 06 XXXX XXXX": _cat("+39 06 ", _nz(4), " ", _d(4)),
    "it 06 XXXX XXXX": _cat("06 ", _nz(4), " ", _d(4)),
    "it +39 3XX XXX XXXX": _cat("+39 3", _d(2), " ", _d(3), " ", _d(4)),
    "it 3XX XXX XXXX": _cat("3", _pick("20", "33", "47", "49"), " ", _d(3), " ", _d(4)),
    "nl +31 20 XXX XXXX": _cat("+31 20 ", _nz(3), " ", _d(4)),
    "nl 020-XXX XXXX": _cat("020-", _nz(3), " ", _d(4)),
    "nl 06-XXXXXXXX": _cat("06-", _nz(8)),
    "nl +31 6 XXXXXXXX": _cat("+31 6 ", _nz(8)),
    # Mexico, China, South Africa, Switzerland, Sweden
    "mx +52 55 XXXX XXXX": _cat("+52 ", _pick("55", "33", "81"), " ", _d(4), " ", _d(4)),
    "cn +86 10 XXXX XXXX": _cat("+86 10 ", _nz(4), " ", _d(4)),
    "cn +86 1XX XXXX XXXX": _cat("+86 1", _pick("38", "39", "50", "86"), " ", _d(4), " ", _d(4)),
    "cn 010-XXXXXXXX": _cat("010-", _nz(8)),
    "za +27 21 XXX XXXX": _cat("+27 ", _pick("21", "11", "31"), " ", _nz(3), " ", _d(4)),
    "za 021 XXX XXXX": _cat("0", _pick("21", "11", "82", "83"), " ", _nz(3), " ", _d(4)),
    "ch +41 44 XXX XX XX": _cat("+41 ", _pick("44", "22", "31", "79"), " ", _nz(3), " ", _d(2), " ", _d(2)),
    "ch 044 XXX XX XX": _cat("0", _pick("44", "22", "79"), " ", _nz(3), " ", _d(2), " ", _d(2)),
    "se +46 8 XXX XXX XX": _cat("+46 8 ", _nz(3), " ", _d(3), " ", _d(2)),
    "se 08-XXX XXX XX": _cat("08-", _nz(3), " ", _d(3), " ", _d(2)),
    "se 070-XXX XX XX": _cat("07", _pick("0", "2", "3", "6"), "-", _nz(3), " ", _d(2), " ", _d(2)),
    # Ireland, New Zealand, Singapore, South Korea, Russia
    "ie +353 1 XXX XXXX": _cat("+353 1 ", _nz(3), " ", _d(4)),
    "ie 087 XXX XXXX": _cat("08", _pick("3", "5", "6", "7"), " ", _nz(3), " ", _d(4)),
    "nz +64 9 XXX XXXX": _cat("+64 ", _pick("3", "4", "9"), " ", _nz(3), " ", _d(4)),
    "nz 09 XXX XXXX": _cat("0", _pick("3", "4", "9"), " ", _nz(3), " ", _d(4)),
    "sg +65 XXXX XXXX": _cat("+65 ", _pick("6", "8", "9"), _d(3), " ", _d(4)),
    "kr +82 2-XXX-XXXX": _cat("+82 2-", _nz(3), "-", _d(4)),
    "kr 010-XXXX-XXXX": _cat("010-", _nz(4), "-", _d(4)),
    "ru +7 495 XXX-XX-XX": _cat("+7 ", _pick("495", "499", "812"), " ", _nz(3), "-", _d(2), "-", _d(2)),
    "ru +7 (495) XXX-XX-XX": _cat("+7 (", _pick("495", "812"), ") ", _nz(3), "-", _d(2), "-", _d(2)),
    "ru 8 (495) XXX-XX-XX": _cat("8 (", _pick("495", "812"), ") ", _nz(3), "-", _d(2), "-", _d(2)),
    # Belgium, Austria, Hong Kong, Portugal, Poland, Norway, Denmark
    "be +32 2 XXX XX XX": _cat("+32 ", _pick("2", "3", "9"), " ", _nz(3), " ", _d(2), " ", _d(2)),
    "be 02/XXX XX XX": _cat("0", _pick("2", "3", "9"), "/", _nz(3), " ", _d(2), " ", _d(2)),
    "at +43 1 XXX XXXX": _cat("+43 1 ", _nz(3), " ", _d(4)),
    "hk +852 XXXX XXXX": _cat("+852 ", _pick("2", "3", "9"), _d(3), " ", _d(4)),
    "pt +351 21 XXX XXXX": _cat("+351 21 ", _nz(3), " ", _d(4)),
    "pl +48 22 XXX XX XX": _cat("+48 22 ", _nz(3), " ", _d(2), " ", _d(2)),
    "pl +48 XXX XXX XXX": _cat("+48 ", _pick("5", "6", "7", "8"), _d(2), " ", _d(3), " ", _d(3)),
    "no +47 XX XX XX XX": _cat("+47 ", _pick("2", "4", "9"), _d(1), " ", _d(2), " ", _d(2), " ", _d(2)),
    "dk +45 XX XX XX XX": _cat("+45 ", _nz(2), " ", _d(2), " ", _d(2), " ", _d(2)),
    # Variants of the international form seen in signatures and forms
    "intl (+44) 20 XXXX XXXX": _cat("(+44) 20 ", _nz(4), " ", _d(4)),
    "intl +44 (0) 20 XXXX XXXX": _cat("+44 (0) 20 ", _nz(4), " ", _d(4)),
    "intl +49-30-XXXXXXX": _cat("+49-", _pick("30", "40", "89"), "-", _nz(7)),
    "intl +1 NPA-NXX-XXXX": _cat("+1 ", _NPA, "-", _NXX, "-", _LINE),
    "intl 00 44 20 XXXX XXXX": _cat("00 44 20 ", _nz(4), " ", _d(4)),
    "us NPA NXX-XXXX": _cat(_NPA, " ", _NXX, "-", _LINE),
}  # fmt: skip

# Extensions (ITU-T E.123 recommends "ext."); only after layouts whose country uses them in text.
EXTENSIONS: tuple[Digits, ...] = (
    _cat(" ext. ", _nz(3)),
    _cat(" ext ", _nz(2)),
    _cat(" x", _nz(2)),
    _cat(" x", _nz(4)),
    _cat(" Ext. ", _nz(1)),
)
_EXTENSION_PREFIXES = ("us ", "uk ", "au ", "ie ", "nz ")
_EXTENSION_RATE = 0.15

# Sentences in the register of support chats, e-mails, forms and CVs. About half name the number
# ("call", "phone", "fax", ...), half do not, so context words cannot carry the measurement.
TEMPLATES: tuple[str, ...] = (
    "Call me at {p} if the delivery is late.",
    "My new mobile is {p}, please update the file.",
    "Reach Dr. Okafor on {p} before noon.",
    "{p} is the front desk; ask for Marta.",
    "You can text me: {p}",
    "Our Paris office ({p}) opens at nine.",
    "For bookings ring {p}, for complaints write to us.",
    "Tel.: {p}\nFax: none",
    "Please ring the landlord at {p} about the boiler.",
    "The number on the invoice was {p}.",
    "If nobody answers {p}, leave a message.",
    "Emergency contact - Jonas Berg - {p}",
    "Contact details\nName: Priya Raman\nPhone: {p}\nRole: treasurer",
    "I tried {p} three times yesterday.",
    "Whatsapp {p} for the gate code.",
    "Her old number, {p}, no longer works.",
    "Send the signed form by fax to {p} or by post.",
    "Customer service: {p} (Mon-Fri 9am-5pm)",
    "he gave me {p} but it went straight to voicemail",
    "Bookings are taken on {p} from March 3.",
    "Cell {p} | Office 4th floor",
    "Is {p} still the best way to reach you?",
    "The hotline {p} is free from landlines.",
    "Rückruf bitte unter {p}.",
    "Appelez le {p} pour un rendez-vous.",
    "Ring {p} and press 2 for accounts.",
    "Mobile: {p}",
    "- {p} (home)",
    "Dial {p} from abroad.",
    "Questions about order 4471? Our team is on {p}.",
)


def generate(n: int = 1000, seed: int = 19) -> list[dict]:
    """`n` Presidio-layout records, one phone number each; deterministic for a given seed."""
    rng = random.Random(seed)
    names = sorted(FORMATS)
    records = []
    for _ in range(n):
        layout = rng.choice(names)
        phone = FORMATS[layout](rng)
        if layout.startswith(_EXTENSION_PREFIXES) and rng.random() < _EXTENSION_RATE:
            phone += rng.choice(EXTENSIONS)(rng)
        template = rng.choice(TEMPLATES)
        start = template.index("{p}")
        text = template.replace("{p}", phone)
        records.append(
            {
                "full_text": text,
                "layout": layout,
                "spans": [
                    {
                        "entity_type": "PHONE_NUMBER",
                        "entity_value": phone,
                        "start_position": start,
                        "end_position": start + len(phone),
                    }
                ],
            }
        )
    return records


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--show", type=int, default=20, help="print this many records")
    args = parser.parse_args(argv)
    for record in generate(args.n, args.seed)[: args.show]:
        print(f"{record['layout']:<28} {record['full_text']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
