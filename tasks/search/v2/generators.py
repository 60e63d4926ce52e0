"""Search-v2's question generators over the v2 knowledge base.

Every question is a chain of documents: a city's profile (its country), a country's
border list (the one country bordering two others), a country's profile (capital,
currency, language, population, demonym), a person's Wikipedia article (nationality,
occupation, life years). Persons are reached the way a reader of Wikipedia would find
them: by the occupation and decade of birth their description states and a nationality
that another hop supplies, so the final document is not the one a query with the
question's words finds. Each candidate passes v1's quality gate (unique names across the
corpus, slot grammar, answer not in the question, every hop's answer in its document)
plus a check that its hops are exactly the template's number of documents.
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tasks.search.generators import Gate, Mention, _aliases, _country, _currency, _home, _neighbours, _partners, \
    _persons_with_country, _shared_neighbour, _text_key, populous_pairs
from tasks.search.generators import _city_hop as _city
from tasks.search.generators import _city_mention as _citym
from tasks.search.generators import _country_mention as _cm
from tasks.search.generators import _person_mention as _pm
from tasks.search.generators import _sole_language as _language
from tasks.search.knowledge import KnowledgeBase, Person
from tasks.search.quality import QualityAudit, Rejected, grammar_rejection
from tasks.search.questions import Hop, Question, contains_answer
from tasks.search.reader import GEOGRAPHIC, PLACED
from tasks.search.sources import City, Country
from tasks.search.templates import SLOT_PATTERNS
from tasks.search.v2.corpus import CONTESTED_CAPITALS, borders_doc_id
from tasks.search.v2.templates import TEMPLATES_V2, TemplateV2

__all__ = ["TEMPLATES_V2", "Place", "TemplateV2", "Who", "describable_persons", "generate_audited_v2", "wiki_places"]

MIN_OCCUPATION_PEERS = 5  # persons across the corpus sharing the occupation: the word alone finds no one
PAIR_SAMPLES = {"home_countries_more_populous": 60}  # two-way choices stay a small share
WIDE_BORDERS = 6


@dataclass(frozen=True)
class Who:
    """A person described by occupation and decade of birth, unique within their nationality."""

    person: Person
    occupation: str

    @property
    def decade(self) -> int:
        return self.person.birth // 10 * 10

    @property
    def phrase(self) -> str:
        return f"the {self.occupation} born in the {self.decade}s"


def _occupation(p: Person) -> str:
    first = re.split(r" and |, ", p.role)[0].split(" ")
    return first[-1].lower()


def _has_occupation(p: Person, occupation: str) -> bool:
    return bool(re.search(rf"\b{re.escape(occupation)}\b", p.role.lower()))


def _describable(gate: Gate) -> list[Who]:
    if "describable" not in gate.memo:
        gate.memo["describable"] = describable_persons(gate.kb)
    return gate.memo["describable"]  # type: ignore[return-value]


def describable_persons(kb: KnowledgeBase) -> list[Who]:
    """Persons whose (nationality, occupation, decade of birth) names them alone.

    The occupation is shared by at least ``MIN_OCCUPATION_PEERS`` persons of the corpus, and
    the decade is not a century's first ("the 1900s" would also read as a century).
    """
    persons = [p for p in kb.persons if p.country_iso2 and p.birth >= 1000 and p.birth % 100 >= 10]
    peers = Counter(_occupation(p) for p in kb.persons)
    by_decade: dict[tuple[str, int], list[Person]] = {}
    for q in kb.persons:
        by_decade.setdefault((q.country_iso2, q.birth // 10), []).append(q)
    out = []
    for p in persons:
        occupation = _occupation(p)
        if peers[occupation] < MIN_OCCUPATION_PEERS or not re.fullmatch(r"[a-z][a-z\-]+", occupation):
            continue
        same = [q for q in by_decade[(p.country_iso2, p.birth // 10)] if _has_occupation(q, occupation)]
        if len(same) == 1:
            out.append(Who(p, occupation))
    return out


_GRAMMAR_OF = {"place": "city"}  # a place's name follows the grammar of a city's

@dataclass(frozen=True)
class Place:
    """A Wikipedia article whose description places it in a country ("River in Russia")."""

    doc_id: str
    name: str
    country_iso2: str
    stated: str  # the country as the description names it


def wiki_places(kb: KnowledgeBase) -> list[Place]:
    """Articles that are not about a person whose description says where they are."""
    countries = {alias: iso2 for iso2, c in kb.countries.items() for alias in (c.name, *c.aliases)}
    persons = {p.doc_id for p in kb.persons}
    out = []
    for doc in kb.corpus:
        if not doc.id.startswith("wiki-") or doc.id in persons:
            continue
        match = PLACED.match(doc.text.split(". ", 1)[0])
        if match and match["c"] in countries and GEOGRAPHIC.search(match["what"]):
            out.append(Place(doc.id, re.sub(r"\s*\([^)]*\)$", "", doc.title), countries[match["c"]], match["c"]))
    return out


def _places_of(gate: Gate) -> dict[str, list[Place]]:
    if "places_of" not in gate.memo:
        out: dict[str, list[Place]] = {}
        for place in wiki_places(gate.kb):
            out.setdefault(place.country_iso2, []).append(place)
        gate.memo["places_of"] = out
    return gate.memo["places_of"]  # type: ignore[return-value]


def _place_mention(place: Place) -> Mention:
    return Mention("city", place.doc_id, place.name)  # a place competes with cities, countries and capitals


class GateV2(Gate):
    """v1's gate with v2's wordings: the text is chosen by the generator, not rendered from one wording."""

    def emit_v2(self, template: str, key: str, text: str, slots: dict[str, str], answers: Sequence[str],
                hops: Sequence[Hop], mentions: Sequence[Mention]) -> Question | None:
        def checked() -> str:
            names = {_GRAMMAR_OF.get(s, s): v for s, v in slots.items()
                     if _GRAMMAR_OF.get(s, s).removesuffix("_2") in SLOT_PATTERNS}
            if any(not re.fullmatch(SLOT_PATTERNS[s.removesuffix("_2")], v) for s, v in names.items()):
                raise Rejected(grammar_rejection(names), text)
            return text

        return self.emit_text(template, key, checked, slots, answers, hops, mentions, TEMPLATES_V2[template].hops)


Generator = Callable[[GateV2, random.Random], Iterator["Question | None"]]


def _say(rng: random.Random, template: str, **slots: str) -> str:
    wording = rng.choice(TEMPLATES_V2[template].wordings)
    return wording.format(**slots)


def _profile(gate: Gate, c: Country, fact: str) -> Hop:
    return Hop(gate.kb.country_doc(c.iso2), fact)


def _borders(gate: Gate, c: Country, named: Country) -> Hop:
    return Hop(borders_doc_id(c.iso2), named.name)


def _capital(c: Country) -> tuple[str, tuple[str, ...]] | None:
    return None if c.iso2 in CONTESTED_CAPITALS else (c.capital, _aliases(c.capital))


_FACTS = {"capital": _capital, "currency": _currency, "language": _language}


def _countries(gate: Gate) -> list[Country]:
    return sorted(gate.kb.countries.values(), key=lambda c: c.iso2)


def _pairs_around(gate: Gate) -> dict[str, list[tuple[str, str]]]:
    """For each country C, the pairs (A, B) whose one common neighbour is C."""
    if "pairs_around" not in gate.memo:
        out: dict[str, list[tuple[str, str]]] = {}
        partners = _partners(gate)
        for a in sorted(partners):
            for b in partners[a]:
                if a < b:
                    out.setdefault(_shared_neighbour(gate, a, b), []).append((a, b))
        gate.memo["pairs_around"] = out
    return gate.memo["pairs_around"]  # type: ignore[return-value]


def _cities_of(gate: Gate) -> dict[str, list[City]]:
    if "cities_of" not in gate.memo:
        out: dict[str, list[City]] = {}
        for city in gate.kb.cities:
            out.setdefault(city.country_iso2, []).append(city)
        gate.memo["cities_of"] = out
    return gate.memo["cities_of"]  # type: ignore[return-value]


# --- routes to a country: (phrase slots, hops, mentions, key) ------------------------------

@dataclass(frozen=True)
class Route:
    """How a question leads to a country: its slots, the documents on the way, the names it uses."""

    slots: dict[str, str]
    hops: tuple[Hop, ...]
    mentions: tuple[Mention, ...]
    key: str


def _by_capital(gate: Gate, c: Country, rng: random.Random) -> Route | None:
    if _capital(c) is None:
        return None
    return Route({"capital": c.capital}, (_profile(gate, c, c.capital),), (Mention("capital", c.iso2, c.capital),),
                 c.iso2)


def _by_city(gate: Gate, c: Country, rng: random.Random) -> Route | None:
    cities = _cities_of(gate).get(c.iso2)
    if not cities:
        return None
    city = rng.choice(cities)
    return Route({"city": city.name}, (_city(gate, city),), (_citym(city),), str(city.geonameid))


def _by_neighbours(gate: Gate, c: Country, rng: random.Random) -> Route | None:
    pairs = _pairs_around(gate).get(c.iso2)
    if not pairs:
        return None
    a, b = (_country(gate, i) for i in rng.choice(pairs))
    a, b = (a, b) if rng.random() < 0.5 else (b, a)
    return Route({"country": a.name, "country_2": b.name}, (_borders(gate, c, a), _borders(gate, c, b)),
                 (_cm(a), _cm(b)), f"{a.iso2}:{b.iso2}")


def _by_place(gate: Gate, c: Country, rng: random.Random) -> Route | None:
    places = _places_of(gate).get(c.iso2)
    if not places:
        return None
    place = rng.choice(places)
    return Route({"place": place.name}, (Hop(place.doc_id, place.stated),), (_place_mention(place),), place.doc_id)


def _by_capital_neighbours(gate: Gate, c: Country, rng: random.Random) -> Route | None:
    pairs = _pairs_around(gate).get(c.iso2)
    options = _wide(gate, [(a, b) for x, y in pairs or () for a, b in ((x, y), (y, x)) if _capital(_country(gate, b))],
                    lambda o: o[0])
    if not options:
        return None
    a, b = (_country(gate, i) for i in rng.choice(options))
    return Route({"country": a.name, "capital": b.capital},
                 (_profile(gate, b, b.capital), _borders(gate, c, a), _borders(gate, c, b)),
                 (_cm(a), Mention("capital", b.iso2, b.capital)), f"{a.iso2}:{b.iso2}")


def _by_city_neighbours(gate: Gate, c: Country, rng: random.Random, minimum: int = WIDE_BORDERS,
                        strict: bool = False) -> Route | None:
    pairs = _pairs_around(gate).get(c.iso2)
    if not pairs:
        return None
    options = _wide(gate, [(a, b) for x, y in pairs for a, b in ((x, y), (y, x)) if _cities_of(gate).get(b)],
                    lambda o: o[0], minimum, strict)
    if not options:
        return None
    a, b = (_country(gate, i) for i in rng.choice(options))
    city = rng.choice(_cities_of(gate)[b.iso2])
    return Route({"country": a.name, "city": city.name},
                 (_city(gate, city), _borders(gate, c, a), _borders(gate, c, b)),
                 (_cm(a), _citym(city)), f"{a.iso2}:{city.geonameid}")


def _by_cities(gate: Gate, c: Country, rng: random.Random) -> Route | None:
    pairs = [(a, b) for a, b in _pairs_around(gate).get(c.iso2, ()) if _cities_of(gate).get(a)
             and _cities_of(gate).get(b)]
    if not pairs:
        return None
    a, b = (_country(gate, i) for i in rng.choice(pairs))
    x, y = rng.choice(_cities_of(gate)[a.iso2]), rng.choice(_cities_of(gate)[b.iso2])
    return Route({"city": x.name, "city_2": y.name},
                 (_city(gate, x), _city(gate, y), _borders(gate, c, a), _borders(gate, c, b)),
                 (_citym(x), _citym(y)), f"{x.geonameid}:{y.geonameid}")


def _wide(gate: Gate, options: list, named: Callable[[object], str], minimum: int = WIDE_BORDERS,
          strict: bool = False) -> list:
    """The options whose named country has ``minimum`` neighbours or more (if any, or always
    when ``strict``): a reader that knows one of the two countries then guesses among many."""
    wide = [o for o in options if len(_neighbours(gate, named(o))) >= minimum]
    return wide if wide or strict else options


RouteFn = Callable[[Gate, Country, random.Random], "Route | None"]


# --- generators ------------------------------------------------------------------------------

def _lookups(gate: GateV2, rng: random.Random) -> Iterator[Question | None]:
    for c in _countries(gate):
        cap = _capital(c)
        if cap:
            yield gate.emit_v2("capital_of_country", c.iso2, _say(rng, "capital_of_country", country=c.name),
                               {"country": c.name}, cap[1], [_profile(gate, c, c.capital)], [_cm(c)])
            yield gate.emit_v2("country_of_capital", c.iso2, _say(rng, "country_of_capital", capital=c.capital),
                               {"capital": c.capital}, c.aliases, [_profile(gate, c, c.name)],
                               [Mention("capital", c.iso2, c.capital)])
        cur = _currency(c)
        if cur:
            yield gate.emit_v2("currency_of_country", c.iso2, _say(rng, "currency_of_country", country=c.name),
                               {"country": c.name}, cur[1], [_profile(gate, c, cur[0])], [_cm(c)])
    for city in gate.kb.cities:
        c = _country(gate, city.country_iso2)
        yield gate.emit_v2("country_of_city", str(city.geonameid), _say(rng, "country_of_city", city=city.name),
                           {"city": city.name}, c.aliases, [_city(gate, city)], [_citym(city)])
    for places in _places_of(gate).values():
        for place in places:
            c = _country(gate, place.country_iso2)
            yield gate.emit_v2("place_country", place.doc_id, _say(rng, "place_country", place=place.name),
                               {"place": place.name}, c.aliases, [Hop(place.doc_id, place.stated)],
                               [_place_mention(place)])
    for p in gate.kb.persons:
        yield gate.emit_v2("birth_year", p.doc_id, _say(rng, "birth_year", person=p.name), {"person": p.name},
                           (str(p.birth),), [Hop(p.doc_id, str(p.birth))], [_pm(p)])
        if p.death is not None:
            yield gate.emit_v2("death_year", p.doc_id, _say(rng, "death_year", person=p.name), {"person": p.name},
                               (str(p.death),), [Hop(p.doc_id, str(p.death))], [_pm(p)])


def _country_facts(template: str, route: RouteFn, fact: str | None) -> Generator:
    """A country reached by ``route``; the answer is the country or one fact of its profile."""
    def generate(gate: GateV2, rng: random.Random) -> Iterator[Question | None]:
        for c in _countries(gate):
            r = route(gate, c, rng)
            found = (c.name, c.aliases) if fact is None else _FACTS[fact](c)
            if r is None or found is None:
                continue
            if fact == "currency" and _shares_currency(gate, c, r):
                gate.reject(template, "a named country has the same currency", f"{c.name}: {c.currency_name}")
                continue
            hops = [*r.hops] if fact is None else [*r.hops, _profile(gate, c, found[0])]
            yield gate.emit_v2(template, r.key, _say(rng, template, **r.slots), r.slots, found[1], hops,
                               r.mentions)
    return generate


def _shares_currency(gate: Gate, c: Country, r: Route) -> bool:
    """Whether a country the question names pays with the answer's currency (the euro, the CFA
    franc): its own profile, which one query finds, would then answer the question."""
    named = [gate.kb.countries[m.entity_id] for m in r.mentions if m.kind == "country"]
    return any(n.currency_code == c.currency_code for n in named)


def _persons_of(template: str, route: RouteFn, died: bool) -> Generator:
    """A person described by occupation and decade whose nationality is the routed country's."""
    def generate(gate: GateV2, rng: random.Random) -> Iterator[Question | None]:
        for who in _describable(gate):
            p = who.person
            if died and p.death is None:
                continue
            c = _country(gate, p.country_iso2)
            r = route(gate, c, rng)
            if r is None:
                continue
            article = gate.corpus.get(p.doc_id).contents  # type: ignore[union-attr]
            clue = next((v for v in r.slots.values() if contains_answer(article, v)), None)
            if clue is not None:  # a query with the clue's name would find the article itself
                gate.reject(template, "the person's article names the question's clue", f"{p.name}: {clue}")
                continue
            answer = (str(p.death),) if died else _aliases(p.name, p.title)
            hops = [*r.hops, _profile(gate, c, p.demonym), Hop(p.doc_id, answer[0])]
            slots = {**r.slots, "who": who.phrase}
            yield gate.emit_v2(template, f"{p.doc_id}:{r.key}", _say(rng, template, **slots), slots, answer, hops,
                               r.mentions)
    return generate


def _compatriots(template: str, died: bool) -> Generator:
    """A described person who shares a named person's nationality (two articles)."""
    def generate(gate: GateV2, rng: random.Random) -> Iterator[Question | None]:
        persons = _persons_with_country(gate, template)
        for who in _describable(gate):
            p = who.person
            mates = [q for q in persons if q.country_iso2 == p.country_iso2 and q.doc_id != p.doc_id]
            if not mates or (died and p.death is None):
                continue
            mate = rng.choice(mates)
            answer = (str(p.death),) if died else _aliases(p.name, p.title)
            slots = {"who": who.phrase, "person": mate.name}
            hops = [Hop(mate.doc_id, mate.demonym), Hop(p.doc_id, p.demonym), Hop(p.doc_id, answer[0])]
            yield gate.emit_v2(template, f"{p.doc_id}:{mate.doc_id}", _say(rng, template, **slots), slots, answer,
                               hops, [_pm(mate)])
    return generate


def _home_facts(template: str, fact: str) -> Generator:
    """The capital or currency of a person's country (article, then profile)."""
    def generate(gate: GateV2, rng: random.Random) -> Iterator[Question | None]:
        for p in _persons_with_country(gate, template):
            c = _country(gate, p.country_iso2)
            found = _FACTS[fact](c)
            if found is None:
                continue
            hops = [Hop(p.doc_id, p.demonym), _profile(gate, c, p.demonym), _profile(gate, c, found[0])]
            yield gate.emit_v2(template, p.doc_id, _say(rng, template, home=_home(p)), {"home": _home(p)},
                               found[1], hops, [_pm(p)])
    return generate


def _person_neighbour(template: str, fact: str | None) -> Generator:
    """The country bordering a named country and a person's country (and its capital)."""
    def generate(gate: GateV2, rng: random.Random) -> Iterator[Question | None]:
        partners = _partners(gate)
        for p in _persons_with_country(gate, template):
            home = _country(gate, p.country_iso2)
            if not partners.get(home.iso2):
                continue
            other = _country(gate, rng.choice(_wide(gate, partners[home.iso2], lambda o: o)))
            c = _country(gate, _shared_neighbour(gate, home.iso2, other.iso2))
            found = (c.name, c.aliases) if fact is None else _FACTS[fact](c)
            if found is None:
                continue
            hops = [Hop(p.doc_id, p.demonym), _profile(gate, home, p.demonym), _borders(gate, c, home),
                    _borders(gate, c, other)]
            if fact is not None:
                hops.append(_profile(gate, c, found[0]))
            slots = {"country": other.name, "home": _home(p)}
            yield gate.emit_v2(template, f"{p.doc_id}:{other.iso2}", _say(rng, template, **slots), slots, found[1],
                               hops, [_pm(p), _cm(other)])
    return generate


def _more_populous(gate: GateV2, rng: random.Random) -> Iterator[Question | None]:
    template = "home_countries_more_populous"
    for a, b, ca, cb, big in populous_pairs(gate, template, rng, PAIR_SAMPLES[template]):
        hops = [Hop(a.doc_id, a.demonym), _profile(gate, ca, f"{ca.population:,}"),
                Hop(b.doc_id, b.demonym), _profile(gate, cb, f"{cb.population:,}")]
        slots = {"home": _home(a), "home_2": _home(b)}
        key = ":".join(sorted((a.doc_id, b.doc_id)))
        yield gate.emit_v2(template, key, _say(rng, template, **slots), slots, big.aliases, hops, [_pm(a), _pm(b)])


GENERATORS_V2: dict[str, Generator] = {
    "lookups": _lookups,
    "shared_neighbour": _country_facts("shared_neighbour", _by_neighbours, None),
    "city_country_capital": _country_facts("city_country_capital", _by_city, "capital"),
    "city_country_currency": _country_facts("city_country_currency", _by_city, "currency"),
    "city_country_language": _country_facts("city_country_language", _by_city, "language"),
    "person_country_capital": _home_facts("person_country_capital", "capital"),
    "person_country_currency": _home_facts("person_country_currency", "currency"),
    "shared_neighbour_capital": _country_facts("shared_neighbour_capital", _by_neighbours, "capital"),
    "shared_neighbour_currency": _country_facts("shared_neighbour_currency", _by_neighbours, "currency"),
    # The answer is one of the named country's neighbours: only countries with 6+ neighbours are named.
    "city_shared_neighbour": _country_facts("city_shared_neighbour",
                                            functools.partial(_by_city_neighbours, strict=True), None),
    "person_of_capital_country": _persons_of("person_of_capital_country", _by_capital, died=False),
    "death_of_capital_country": _persons_of("death_of_capital_country", _by_capital, died=True),
    "compatriot": _compatriots("compatriot", died=False),
    "compatriot_death": _compatriots("compatriot_death", died=True),
    "person_shared_neighbour": _person_neighbour("person_shared_neighbour", None),
    "city_shared_neighbour_capital": _country_facts("city_shared_neighbour_capital", _by_city_neighbours, "capital"),
    "cities_shared_neighbour": _country_facts("cities_shared_neighbour", _by_cities, None),
    "person_of_place_country": _persons_of("person_of_place_country", _by_place, died=False),
    "person_of_city_country": _persons_of("person_of_city_country", _by_city, died=False),
    "death_of_city_country": _persons_of("death_of_city_country", _by_city, died=True),
    "person_of_neighbour": _persons_of("person_of_neighbour", _by_neighbours, died=False),
    "death_of_neighbour": _persons_of("death_of_neighbour", _by_neighbours, died=True),
    "person_shared_neighbour_capital": _person_neighbour("person_shared_neighbour_capital", "capital"),
    "cities_shared_neighbour_capital": _country_facts("cities_shared_neighbour_capital", _by_cities, "capital"),
    "person_of_city_neighbour": _persons_of("person_of_city_neighbour", _by_city_neighbours, died=False),
    "death_of_city_neighbour": _persons_of("death_of_city_neighbour", _by_city_neighbours, died=True),
    "person_of_capital_neighbour": _persons_of("person_of_capital_neighbour", _by_capital_neighbours, died=False),
    "death_of_capital_neighbour": _persons_of("death_of_capital_neighbour", _by_capital_neighbours, died=True),
    "home_countries_more_populous": _more_populous,
}


def generate_audited_v2(kb: KnowledgeBase, seed: int = 0) -> tuple[list[Question], QualityAudit]:
    """Every v2 question that passes the gate, deterministic in ``seed``; a repeated text is dropped."""
    gate = GateV2(kb)
    questions: list[Question] = []
    for name, generator in GENERATORS_V2.items():
        rng = random.Random(f"{seed}:v2:{name}")
        questions.extend(q for q in generator(gate, rng) if q is not None)
    counts = Counter(_text_key(q.question) for q in questions)
    kept = []
    for q in questions:
        if counts[_text_key(q.question)] == 1:
            kept.append(q)
        else:
            gate.audit.kept[q.template] -= 1
            gate.reject(q.template, "same text as another question", q.question)
    return kept, gate.audit
