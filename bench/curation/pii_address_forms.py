"""A second, independent generator of address-bearing text, for measuring street-address recall.

What: `generate(n, seed)` returns `n` records in the layout of the shared Presidio file
(`full_text`, `spans[]` with `entity_type` "STREET_ADDRESS", `entity_value`, `start_position`,
`end_position`): a sentence from `TEMPLATES` holding one postal address of one of `COUNTRIES`
(street line in that country's order, optionally its postal code and town, optionally the
country), or an intersection ("the corner of Oak Street and 5th Avenue"). About a third of the
sentences also carry a number that is not an address (`DISTRACTORS`: dates, chapters, scores,
times, measurements), so the records measure precision too.

Why: the Presidio file comes from one generator (Faker), with its own quirks (a random number
before many street lines, a postal code after the country), so a detector can fit it and still
miss how addresses are really written. This file was written before the detector's European
forms and independently of that data: street names, towns and layouts follow each country's
postal conventions (Deutsche Post, PostNL, bpost, PostNord, Posten, Posti, La Poste, Correos,
Poste Italiane, CTT, Correios, Poczta Polska, Magyar Posta, Omniva), house numbers are random,
postal codes random within each country's format, and the sentences are new.

    python -m bench.curation.pii_address_forms [--n 1000] [--seed 23] [--show 20]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Maker = Callable[[random.Random], str]


def _digits(n: int, first: str = "123456789") -> Maker:
    return lambda r: r.choice(first) + "".join(r.choice("0123456789") for _ in range(n - 1))


def _house(r: random.Random) -> str:
    """A house number: mostly 1-3 digits, sometimes a letter ("12a") or a range ("3-5")."""
    n = str(r.choice((r.randint(1, 30), r.randint(1, 199), r.randint(1, 1999))))
    roll = r.random()
    if roll < 0.12:
        return n + r.choice("abcAB")
    if roll < 0.16:
        return f"{n}-{int(n) + 2}"
    return n


@dataclass(frozen=True)
class Country:
    """Street-line layouts ({name} a street name, {n} a house number), names, a postal-code maker,
    towns, the locality order ("pc town" or "town pc") and the country's names."""

    streets: tuple[str, ...]
    names: tuple[str, ...]
    postcode: Maker
    towns: tuple[str, ...]
    country: tuple[str, ...]
    town_first: bool = False


COUNTRIES: dict[str, Country] = {
    "de": Country(
        ("{name}straße {n}", "{name}strasse {n}", "{name}str. {n}", "{name}weg {n}", "{name}platz {n}",
         "{name}allee {n}", "{name}gasse {n}", "{name}ring {n}", "{name}damm {n}", "Berliner Straße {n}"),
        ("Linden", "Schiller", "Goethe", "Bahnhof", "Kirch", "Garten", "Mühlen", "Eichen", "Rosen", "Hafen"),
        _digits(5, "0123456789"), ("Berlin", "Hamburg", "Köln", "Leipzig", "Dresden", "Kassel", "Ulm"),
        ("Germany", "Deutschland"),
    ),
    "at": Country(
        ("{name}gasse {n}", "{name}straße {n}", "{name}platz {n}", "{name}weg {n}", "Mariahilfer Straße {n}"),
        ("Schön", "Kloster", "Wiesen", "Berg", "Anger", "Kreuz"),
        _digits(4), ("Wien", "Graz", "Linz", "Salzburg", "Innsbruck"), ("Austria", "Österreich"),
    ),
    "ch": Country(
        ("{name}strasse {n}", "{name}weg {n}", "{name}gasse {n}", "{name}platz {n}", "Rue du {name} {n}"),
        ("Seefeld", "Dorf", "Sonnen", "Rhein", "Matten", "Stein"),
        _digits(4), ("Zürich", "Bern", "Basel", "Luzern", "Winterthur"), ("Switzerland", "Schweiz"),
    ),
    "nl": Country(
        ("{name}straat {n}", "{name}laan {n}", "{name}weg {n}", "{name}plein {n}", "{name}gracht {n}",
         "{name}kade {n}", "{name}singel {n}", "Oude {name}straat {n}"),
        ("Kerk", "Molen", "Dorps", "Heren", "Prinsen", "Wilhelmina", "Beuken", "Vondel"),
        lambda r: _digits(4)(r) + " " + r.choice("ABCDEFGHJKLMNPRSTVWXZ") + r.choice("ABCDEHJKLMNPRTVWXZ"),
        ("Amsterdam", "Utrecht", "Leiden", "Groningen", "Zwolle"), ("Netherlands", "Nederland"),
    ),
    "be": Country(
        ("{name}straat {n}", "{name}laan {n}", "Rue de la {name} {n}", "Avenue {name} {n}", "Chaussée de {name} {n}"),
        ("Station", "Kerk", "Loi", "Brugge", "Louise", "Namur"),
        _digits(4), ("Brussel", "Antwerpen", "Gent", "Liège", "Namur"), ("Belgium", "België", "Belgique"),
    ),
    "dk": Country(
        ("{name}gade {n}", "{name}vej {n}", "{name}vænget {n}", "{name}stræde {n}", "{name}allé {n}",
         "{name}gade {n}, 2. tv.", "{name}vej {n}, st. th."),
        ("Nørre", "Vester", "Strand", "Skole", "Kirke", "Bøge", "Mølle"),
        _digits(4), ("København K", "Aarhus C", "Odense", "Aalborg", "Vejle"), ("Denmark", "Danmark"),
    ),
    "se": Country(
        ("{name}gatan {n}", "{name}vägen {n}", "{name}gränd {n}", "{name}torget {n}", "{name}stigen {n}"),
        ("Drottning", "Kungs", "Stor", "Skol", "Björk", "Sjö", "Ängs"),
        lambda r: _digits(3)(r) + " " + _digits(2, "0123456789")(r),
        ("Stockholm", "Göteborg", "Malmö", "Uppsala", "Umeå"), ("Sweden", "Sverige"),
    ),
    "no": Country(
        ("{name}gata {n}", "{name}gate {n}", "{name}veien {n}", "{name}vegen {n}", "{name} gate {n}",
         "{name}bakken {n}"),
        ("Stor", "Kirke", "Skole", "Strand", "Dronning", "Fjell", "Bjørke"),
        _digits(4, "0123456789"), ("Oslo", "Bergen", "Trondheim", "Tromsø", "Bodø"), ("Norway", "Norge"),
    ),
    "fi": Country(
        ("{name}katu {n}", "{name}tie {n}", "{name}kuja {n}", "{name}polku {n}", "{name}ntie {n} A 4",
         "{name}katu {n} B 12"),
        ("Koulu", "Kirkko", "Rauhan", "Asema", "Koivu", "Tehtaan", "Mannerheimin"),
        lambda r: "0" + _digits(4, "0123456789")(r), ("Helsinki", "Tampere", "Turku", "Oulu", "Espoo"),
        ("Finland", "Suomi"),
    ),
    "fr": Country(
        ("{n} rue de la {name}", "{n}, rue {name}", "{n} avenue {name}", "{n} boulevard de la {name}",
         "{n} bis rue du {name}", "{n} place de la {name}", "{n} chemin des {name}", "{n} allée des {name}",
         "{n} impasse du {name}", "{n} quai de la {name}"),
        ("Paix", "Liberté", "République", "Moulin", "Gare", "Fontaine", "Victor Hugo", "Tilleuls"),
        _digits(5), ("Paris", "Lyon", "Lille", "Nantes", "Bordeaux", "Rennes"), ("France",),
    ),
    "es": Country(
        ("Calle {name} {n}", "Calle de {name}, {n}", "C/ {name} {n}", "Avenida de {name} {n}",
         "Avda. {name}, {n}", "Paseo de {name} {n}", "Plaza de {name} {n}", "Camino de {name} {n}",
         "Calle {name} {n}, 3º B"),
        ("Alcalá", "Mayor", "Gracia", "Toledo", "Cervantes", "la Constitución", "los Olivos"),
        _digits(5, "0123456789"), ("Madrid", "Sevilla", "Valencia", "Bilbao", "Zaragoza"), ("Spain", "España"),
    ),
    "it": Country(
        ("Via {name} {n}", "Via {name}, {n}", "Viale {name} {n}", "Piazza {name} {n}", "Corso {name} {n}",
         "Vicolo {name} {n}", "Largo {name} {n}", "Via dei {name} {n}"),
        ("Garibaldi", "Roma", "Mazzini", "Dante", "Cavour", "Verdi", "Mille"),
        _digits(5, "0123456789"), ("Roma", "Milano", "Torino", "Bologna", "Napoli", "Genova"), ("Italy", "Italia"),
    ),
    "pt": Country(
        ("Rua {name} {n}", "Rua {name}, {n}", "Avenida {name} {n}", "Av. {name}, {n}", "Travessa do {name} {n}",
         "Praça {name} {n}", "Rua do {name}, {n} 2º Esq"),
        ("Augusta", "da Liberdade", "Carmo", "das Flores", "São Bento", "Almirante Reis"),
        lambda r: _digits(4)(r) + "-" + _digits(3, "0123456789")(r), ("Lisboa", "Porto", "Braga", "Coimbra"),
        ("Portugal",),
    ),
    "br": Country(
        ("Rua {name}, {n}", "Avenida {name}, {n}", "Av. {name} {n}", "Rua {name} {n}, apto 12"),
        ("Paulista", "das Palmeiras", "Sete de Setembro", "Oscar Freire", "XV de Novembro"),
        lambda r: _digits(5, "0123456789")(r) + "-" + _digits(3, "0123456789")(r),
        ("São Paulo", "Curitiba", "Recife", "Belém"), ("Brazil", "Brasil"),
    ),
    "pl": Country(
        ("ul. {name} {n}", "ul. {name} {n}/4", "al. {name} {n}", "pl. {name} {n}", "ulica {name} {n}"),
        ("Marszałkowska", "Długa", "Polna", "Kwiatowa", "Lipowa", "Jerozolimskie", "Szkolna"),
        lambda r: _digits(2, "0123456789")(r) + "-" + _digits(3, "0123456789")(r),
        ("Warszawa", "Kraków", "Gdańsk", "Łódź", "Poznań"), ("Poland", "Polska"),
    ),
    "hu": Country(
        ("{name} utca {n}.", "{name} út {n}.", "{name} tér {n}.", "{name} u. {n}.", "{name} körút {n}."),
        ("Kossuth Lajos", "Petőfi", "Andrássy", "Fő", "Rákóczi", "Béke"),
        _digits(4), ("Budapest", "Debrecen", "Szeged", "Pécs", "Győr"), ("Hungary", "Magyarország"),
        town_first=True,
    ),
    "ee": Country(
        ("{name} tänav {n}", "{name} mnt {n}", "{name} pst {n}", "{name} tee {n}"),
        ("Pärnu", "Narva", "Tartu", "Kase", "Männi"),
        _digits(5), ("Tallinn", "Tartu", "Pärnu", "Narva"), ("Estonia", "Eesti"),
    ),
    "cz": Country(
        ("{name} {n}", "{name} {n}/12", "náměstí {name} {n}", "třída {name} {n}"),
        ("Národní", "Vodičkova", "Husova", "Palackého", "Míru"),
        lambda r: _digits(3)(r) + " " + _digits(2, "0123456789")(r),
        ("Praha 1", "Brno", "Ostrava", "Olomouc"), ("Czech Republic", "Česko"),
    ),
}  # fmt: skip

_ENGLISH_STREETS = ("Oak Street", "Main St", "5th Avenue", "Elm Road", "King Street", "Bay Street",
                    "Queen St W", "Maple Avenue", "Market Street", "High Street", "Broadway")  # fmt: skip
# Hard negatives placed in about a third of the sentences: numbers after words, as prose has them.
DISTRACTORS: tuple[str, ...] = (
    "The parcel left on 12 March 2021.",
    "See Chapter 3 and Section 12 of the contract.",
    "Page 45 has the floor plan.",
    "The final score was Ajax 2, Feyenoord 1.",
    "Pick-up is at 10:30, gate B 14.",
    "The room measures 4 by 5 metres.",
    "It was model XR 200 that broke.",
    "Flight LH 2041 lands in the morning.",
    "Order 88213 was refunded in May 2020.",
    "Volume 7 of the series is out of print.",
)
TEMPLATES: tuple[str, ...] = (
    "Please send the documents to {a}.",
    "Our new office is {a}, second floor.",
    "Lieferadresse: {a}",
    "She moved to {a} last spring.",
    "Address:\n{a}\nPhone on request.",
    "You can find us at {a}. We open at nine.",
    "Invoice to Maria Keller, {a}",
    "The flat at {a} is for rent.",
    "Meet me at {a} tomorrow.",
    "Return address: {a}",
    "{a}",
    "Ship to\n{a}",
)


def _address(country: Country, r: random.Random) -> str:
    street = r.choice(country.streets).format(name=r.choice(country.names), n=_house(r))
    roll = r.random()
    if roll < 0.25:
        return street  # the street line alone, as prose often has it
    pc, town = country.postcode(r), r.choice(country.towns)
    locality = f"{town}, {pc}" if country.town_first and r.random() < 0.5 else f"{pc} {town}"
    sep = r.choice((", ", "\n"))
    address = f"{street}{sep}{locality}"
    if roll > 0.8:
        address += r.choice((", ", "\n")) + r.choice(country.country)
    return address


def _intersection(r: random.Random) -> str:
    a, b = r.sample(_ENGLISH_STREETS, 2)
    return f"the corner of {a} and {b}"


def generate(n: int = 1000, seed: int = 23) -> list[dict]:
    r = random.Random(seed)
    codes = sorted(COUNTRIES)
    records = []
    for _ in range(n):
        code = r.choice([*codes, "corner"])
        address = _intersection(r) if code == "corner" else _address(COUNTRIES[code], r)
        template = r.choice(TEMPLATES)
        text = template.replace("{a}", address)
        start = template.index("{a}")
        if r.random() < 0.35:
            # After a sentence-final address, a new line: "Kassel Order 88213" would be no sentence.
            text += ("\n" if template.endswith("{a}") else " ") + r.choice(DISTRACTORS)
        records.append(
            {
                "full_text": text,
                "layout": code,
                "spans": [
                    {
                        "entity_type": "STREET_ADDRESS",
                        "entity_value": address,
                        "start_position": start,
                        "end_position": start + len(address),
                    }
                ],
            }
        )
    return records


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--show", type=int, default=20, help="print this many records")
    args = parser.parse_args(argv)
    for record in generate(args.n, args.seed)[: args.show]:
        print(f"{record['layout']:<7} {record['full_text']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
