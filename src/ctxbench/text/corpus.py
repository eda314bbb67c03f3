"""A generator of varied, natural-looking prose, seeded per call.

Never one filler sentence repeated: repeated text is trivially compressible and easy to serve
from a cache, which is exactly what a long-context benchmark must not measure. Sentences are
drawn from many shapes filled with names, places, trades, objects, numbers and dates.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

FIRST_NAMES = (
    "Amara Bruno Chiara Dmitri Elena Farid Greta Hiroshi Ingrid Jonas Kemal Lucia Mateo Nadia Oskar "
    "Priya Quentin Rosa Samir Tamsin Ulrich Valeria Wen Ximena Yusuf Zofia Anselm Beatriz Cosmin Dalia "
    "Emeka Fiona Gustavo Helga Idris Juno Katarina Leif Marisol Niall Odette Pavel Rania Stellan Tove"
).split()
LAST_NAMES = (
    "Okafor Lindqvist Moreau Tanaka Castellano Novak Haddad Brennan Kowalski Ferreira Albescu Nakamura "
    "Delacroix Ivanova Mbeki Sorensen Quispe Halloran Varga Ortiz Petrakis Yilmaz Ashworth Romero Falk"
).split()
PLACES = (
    "Lisbon Tromso Valparaiso Kraków Nairobi Hobart Tbilisi Quebec Oaxaca Bergen Cusco Split Tallinn "
    "Marrakesh Hakodate Galway Ljubljana Zanzibar Antwerp Salta Porto Dunedin Riga Trieste Matera Izmir"
).split()
TRADES = (
    "archivist|cartographer|beekeeper|glassblower|ferry pilot|surveyor|clockmaker|botanist|translator|"
    "harbour master|printer|luthier|stonemason|radio operator|librarian|weaver|chemist|brewer|"
    "lighthouse keeper|bookbinder"
).split("|")
OBJECTS = (
    "ledger|lantern|compass|telescope|barometer|music box|atlas|kettle|sextant|typewriter|loom|"
    "gramophone|chessboard|field journal|pocket watch|seed catalogue|harpoon|tin of buttons|violin|"
    "weather vane"
).split("|")
ADJECTIVES = (
    "weathered quiet crowded narrow amber salt-stained forgotten restless copper-roofed windswept "
    "patient lopsided lamplit fragrant brittle stubborn generous drowsy gleaming unremarkable"
).split()
VERBS_PAST = (
    "repaired catalogued misplaced sketched traded inherited rebuilt measured polished abandoned "
    "restored photographed borrowed auctioned weighed described"
).split()
SEASONS = "spring summer autumn winter".split()
MONTHS = "January February March April May June July August September October November December".split()
WEATHER = (
    "fog rolled in from the water|a dry wind rattled the shutters|rain fell without a pause|"
    "the snow came early|the heat lingered past midnight|a pale sun broke through|"
    "hail drummed on the roofs|the tide ran unusually high"
).split("|")

SHAPES = (
    "{name} worked as a {trade} in {place} for {n2} years before moving to {place2}.",
    "In the {season} of {year}, {name} {verb} a {adj} {obj} that had belonged to a {trade}.",
    "The {adj} {obj} in the {trade}'s workshop in {place} was said to be {n} years old.",
    "Nobody in {place} remembered why the {obj} had been {verb} on the {day} of {month}.",
    "According to the records, {n} visitors came to {place} that {season}, most of them by ferry.",
    "{name} kept a {obj} on the windowsill and wrote down the weather every morning at {hour} o'clock.",
    "When {weather}, the market in {place} closed early and the {trade}s gathered at the inn.",
    "It took {name} {n} days to walk from {place} to {place2}, sleeping in barns along the way.",
    "The letter from {name2} arrived on {month} {day}, {year}, and mentioned a {adj} {obj}.",
    "Some said the {trade} of {place} owned {n} copies of the same {obj}, each slightly different.",
    "By {year} the old road to {place} had become {adj}, and carts took twice as long.",
    "{name} and {name2} argued for {n} minutes about whether the {obj} should be {verb} or sold.",
    "A {adj} building near the harbour of {place} housed {n} crates of maps and a single {obj}.",
    "Each {season}, the {trade}s of {place} held a contest to see who had {verb} the oddest {obj}.",
    "The census of {year} counted {n} households in {place}, {n2} of them with a {trade}.",
    "Before dawn, {name} checked the {obj} twice, because {weather} the night before.",
    "Travellers from {place2} often asked the way to the {adj} square where the {obj} stood.",
    "The price of a {obj} in {place} rose to {n} coins in {year}, then fell by half.",
    "{name} once claimed that {weather} on every {month} {day} for {n2} years in a row.",
    "Children in {place} learned to count by the {n} bells of the {adj} tower.",
    "Nothing about the {obj} was {adj}, yet {name} treated it as the most valuable thing in {place}.",
    "The ferry between {place} and {place2} ran {n} times a week, except when {weather}.",
    "Why would a {trade} from {place} travel {n} kilometres for a {obj}? {name} never explained.",
    "In the archive there is a note, dated {month} {year}, listing {n} {obj}s and one {adj} {obj2}.",
    "{name2} painted the {adj} harbour of {place} {n2} times, never from the same spot.",
)


class ProseGenerator:
    """Endless varied prose from one seed. Same seed, same text; different seeds, different text."""

    def __init__(self, seed: int | str) -> None:
        self._rng = random.Random(seed)

    def sentence(self) -> str:
        rng = self._rng
        shape = rng.choice(SHAPES)
        return shape.format(
            name=f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
            name2=rng.choice(FIRST_NAMES),
            trade=rng.choice(TRADES),
            place=rng.choice(PLACES),
            place2=rng.choice(PLACES),
            obj=rng.choice(OBJECTS),
            obj2=rng.choice(OBJECTS),
            adj=rng.choice(ADJECTIVES),
            verb=rng.choice(VERBS_PAST),
            season=rng.choice(SEASONS),
            month=rng.choice(MONTHS),
            weather=rng.choice(WEATHER),
            day=rng.randint(1, 28),
            hour=rng.randint(5, 11),
            year=rng.randint(1820, 2019),
            n=rng.randint(2, 990),
            n2=rng.randint(2, 60),
        )

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self._rng.randint(3, 8)))

    def paragraphs(self) -> Iterator[str]:
        while True:
            yield self.paragraph()

    def text(self, n_chars: int) -> str:
        """At least `n_chars` characters of whole paragraphs separated by blank lines."""
        parts: list[str] = []
        size = 0
        for paragraph in self.paragraphs():
            parts.append(paragraph)
            size += len(paragraph) + 2
            if size >= n_chars:
                return "\n\n".join(parts)
        raise AssertionError("unreachable")
