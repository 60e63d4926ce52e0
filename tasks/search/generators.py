"""Question generators: lookups, bridges, comparisons and intersections over the knowledge base.

Each generator is a pure function of ``(gate, rng)`` and yields candidate questions
through :meth:`Gate.emit`, which applies the quality gate (unique names, grammar, true
phrasing, answer not in the question, every hop's answer in its own document) and
records what it drops. The compositions follow HotpotQA / 2WikiMultiHopQA / MuSiQue:

* bridge: city -> country -> capital, currency or language; person -> country -> ...;
* comparison: who was born earlier; which of two persons' countries has more people;
* intersection: the one country that borders both A and B, where A or B may itself be
  reached through a city or a person, optionally followed by that country's capital.

Every hop is a different document (a city profile, a person's article, a country
profile), so a question's hop count is the number of documents it needs.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tasks.search.corpus import Corpus
from tasks.search.grading import normalize_answer
from tasks.search.knowledge import KnowledgeBase, Person
from tasks.search.quality import (
    NameIndex,
    QualityAudit,
    Rejected,
    grammar_rejection,
    home_phrase,
)
from tasks.search.questions import Hop, Question, contains_answer, verify_question
from tasks.search.sources import City, Country, ascii_fold, name_key
from tasks.search.templates import TEMPLATES, TemplateGrammarError, render

__all__ = ["GENERATORS", "Gate", "Mention", "build_name_index", "generate_audited", "generate_questions"]

POPULATION_MARGIN = 1.2  # a comparison's winner has at least 20% more people: a clear fact, not noise
PAIR_SAMPLES = 1500  # candidate pairs drawn per pairwise template


@dataclass(frozen=True)
class Mention:
    """An entity a question names: it must name nothing else of the corpus."""

    kind: str  # "city", "country" or "person"
    entity_id: str
    name: str


def _aliases(*names: str) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        if name:
            out.extend([name, ascii_fold(name)])
    return tuple(dict.fromkeys(out))


# Which kinds of entity a name of each kind must not be confused with.
# The question's wording says which kind it means ("the city of X", "In what year was X
# born?"), so only same-kind names (and, for places, capitals, which are cities) compete.
_CONFUSABLE = {"city": ("city", "country", "capital"), "country": ("country",),
               "capital": ("capital", "city"), "person": ("person",)}


def build_name_index(kb: KnowledgeBase) -> NameIndex:
    index = NameIndex()
    capitals = {(name_key(c.capital), c.iso2) for c in kb.countries.values()}
    for geonameid, name, iso2 in kb.all_city_names:
        if (name_key(name), iso2) in capitals:  # the capital's own entry in the city list
            index.add("capital", iso2, [name])
        else:
            index.add("city", str(geonameid), [name])
    for c in kb.countries.values():
        index.add("country", c.iso2, [c.name, *c.aliases])
        index.add("capital", c.iso2, [c.capital])
    for doc in kb.corpus:
        if doc.id.startswith("wiki-"):
            index.add("person", doc.id, [Person(doc.id, doc.title, "", "", "", "", 0, None).name])
    return index


class Gate:
    """The quality gate every candidate passes; it keeps the audit of what it dropped."""

    def __init__(self, kb: KnowledgeBase, names: NameIndex | None = None, audit: QualityAudit | None = None):
        self.kb = kb
        self.names = names or build_name_index(kb)
        self.audit = audit or QualityAudit()
        self._unique: dict[Mention, str | None] = {}
        self.memo: dict[str, object] = {}  # facts derived once per build (neighbour tables)

    @property
    def corpus(self) -> Corpus:
        return self.kb.corpus

    def _ambiguity(self, m: Mention) -> str | None:
        if m not in self._unique:
            clash = self.names.others(m.kind, m.entity_id, m.name, among=_CONFUSABLE[m.kind])
            self._unique[m] = None if not clash else \
                f"{m.name!r} also names " + ", ".join(f"{k}:{i}" for k, i in sorted(clash)[:3])
        return self._unique[m]

    def emit(self, template: str, key: str, slots: dict[str, str], answers: Sequence[str],
             hops: Sequence[Hop], mentions: Sequence[Mention]) -> Question | None:
        """The question if it passes every check, else ``None`` (and the audit says why)."""
        def text() -> str:
            try:
                return render(template, **slots)
            except TemplateGrammarError as e:
                raise Rejected(grammar_rejection(slots), str(e)) from None

        return self.emit_text(template, key, text, slots, answers, hops, mentions, TEMPLATES[template].hops)

    def emit_text(self, template: str, key: str, text: Callable[[], str], slots: dict[str, str],
                  answers: Sequence[str], hops: Sequence[Hop], mentions: Sequence[Mention],
                  expected_hops: int) -> Question | None:
        """``emit`` with the wording given by ``text`` (which raises ``Rejected`` for a broken one)."""
        try:
            for m in mentions:
                reason = self._ambiguity(m)
                if reason:
                    raise Rejected(f"ambiguous {m.kind} name", reason)
            question = Question(f"{template}:{key}", text(), tuple(answers), tuple(hops), template)
            if question.num_hops != expected_hops:
                raise Rejected("hops do not need distinct documents", question.id)
            named = set(slots.values())
            if any(contains_answer(question.question, a) for a in answers if a not in named):
                raise Rejected("answer given away in the question", question.question)
            if not verify_question(question, self.corpus):
                raise Rejected("a hop's answer is not in its document", question.id)
        except Rejected as r:
            self.audit.reject(template, r.reason, r.detail)
            return None
        self.audit.kept[template] += 1
        return question

    def reject(self, template: str, reason: str, detail: str) -> None:
        self.audit.reject(template, reason, detail)


# --- shared pieces ----------------------------------------------------------------------

def _country(gate: Gate, iso2: str) -> Country:
    return gate.kb.countries[iso2]


def _capital(c: Country) -> tuple[str, tuple[str, ...]] | None:
    return c.capital, _aliases(c.capital)


def _currency(c: Country) -> tuple[str, tuple[str, ...]] | None:
    return (c.currency_name, _aliases(c.currency_name, c.currency_code)) if c.currency_name else None


def _sole_language(c: Country) -> tuple[str, tuple[str, ...]] | None:
    return (c.languages[0], _aliases(c.languages[0])) if len(c.languages) == 1 else None


def _country_mention(c: Country) -> Mention:
    return Mention("country", c.iso2, c.name)


def _city_mention(city: City) -> Mention:
    return Mention("city", str(city.geonameid), city.name)


def _person_mention(p: Person) -> Mention:
    return Mention("person", p.doc_id, p.name)


def _city_hop(gate: Gate, city: City) -> Hop:
    return Hop(gate.kb.city_doc(city), _country(gate, city.country_iso2).name)


def _person_hops(gate: Gate, p: Person) -> tuple[Hop, Hop]:
    """The person's article names the nationality; the country profile names the demonym."""
    return Hop(p.doc_id, p.demonym), Hop(gate.kb.country_doc(p.country_iso2), p.demonym)


def _home(p: Person) -> str:
    return home_phrase(p.name, p.country_iso2, p.birth, p.death)


def _persons_with_country(gate: Gate, template: str) -> list[Person]:
    out = []
    for p in gate.kb.persons:
        if p.compound_nationality:
            gate.reject(template, "compound nationality (no single home country)", f"{p.title}: {p.description}")
        elif p.country_iso2:
            out.append(p)
    return out


def _neighbours(gate: Gate, iso2: str) -> set[str]:
    """Neighbours named in the country's profile (both profiles must name each other)."""
    table = gate.memo.get("neighbours")
    if table is None:
        countries = gate.kb.countries
        table = gate.memo["neighbours"] = {
            i: {n for n in c.neighbours if n in countries and i in countries[n].neighbours}
            for i, c in countries.items()}
    return table[iso2]  # type: ignore[index]


def _shared_neighbour(gate: Gate, a: str, b: str) -> str | None:
    """The one country bordering both ``a`` and ``b`` (neither of them), else ``None``."""
    common = (_neighbours(gate, a) & _neighbours(gate, b)) - {a, b}
    return next(iter(common)) if len(common) == 1 and a != b else None


def _partners(gate: Gate) -> dict[str, list[str]]:
    """For each country, the countries it shares exactly one neighbour with."""
    if "partners" not in gate.memo:
        isos = sorted(gate.kb.countries)
        out: dict[str, list[str]] = {i: [] for i in isos}
        for a, b in itertools.combinations(isos, 2):
            if _shared_neighbour(gate, a, b):
                out[a].append(b)
                out[b].append(a)
        gate.memo["partners"] = out
    return gate.memo["partners"]  # type: ignore[return-value]


def _intersection_hops(gate: Gate, a: str, b: str, answer: str) -> list[Hop]:
    name = _country(gate, answer).name
    return [Hop(gate.kb.country_doc(a), name), Hop(gate.kb.country_doc(b), name)]


# --- one document ------------------------------------------------------------------------

def _unique_countries(gate: Gate) -> list[Country]:
    return sorted(gate.kb.countries.values(), key=lambda c: c.iso2)


def capital_of_country(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    for c in _unique_countries(gate):
        yield gate.emit("capital_of_country", c.iso2, {"country": c.name}, _aliases(c.capital),
                        [Hop(gate.kb.country_doc(c.iso2), c.capital)], [_country_mention(c)])


def country_of_capital(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    for c in _unique_countries(gate):
        yield gate.emit("country_of_capital", c.iso2, {"capital": c.capital}, c.aliases,
                        [Hop(gate.kb.country_doc(c.iso2), c.name)], [Mention("capital", c.iso2, c.capital)])


def currency_of_country(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    for c in _unique_countries(gate):
        if c.currency_name:
            yield gate.emit("currency_of_country", c.iso2, {"country": c.name}, _currency(c)[1],
                            [Hop(gate.kb.country_doc(c.iso2), c.currency_name)], [_country_mention(c)])


def country_of_city(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    for city in gate.kb.cities:
        country = _country(gate, city.country_iso2)
        yield gate.emit("country_of_city", str(city.geonameid), {"city": city.name}, country.aliases,
                        [_city_hop(gate, city)], [_city_mention(city)])


def birth_year(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    for p in gate.kb.persons:
        yield gate.emit("birth_year", p.doc_id, {"person": p.name}, (str(p.birth),),
                        [Hop(p.doc_id, str(p.birth))], [_person_mention(p)])


def death_year(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    for p in gate.kb.persons:
        if p.death is not None:
            yield gate.emit("death_year", p.doc_id, {"person": p.name}, (str(p.death),),
                            [Hop(p.doc_id, str(p.death))], [_person_mention(p)])


# --- bridges (two documents) ----------------------------------------------------------

Fact = Callable[[Country], "tuple[str, tuple[str, ...]] | None"]


def _city_bridge(template: str, fact: Fact) -> Callable[[Gate, random.Random], Iterator[Question | None]]:
    def generate(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
        for city in gate.kb.cities:
            country = _country(gate, city.country_iso2)
            found = fact(country)
            if found is None:
                continue
            yield gate.emit(template, str(city.geonameid), {"city": city.name}, found[1],
                            [_city_hop(gate, city), Hop(gate.kb.country_doc(country.iso2), found[0])],
                            [_city_mention(city)])
    return generate


def _person_bridge(template: str, fact: Fact) -> Callable[[Gate, random.Random], Iterator[Question | None]]:
    def generate(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
        for p in _persons_with_country(gate, template):
            country = _country(gate, p.country_iso2)
            found = fact(country)
            if found is None:
                continue
            yield gate.emit(template, p.doc_id, {"home": _home(p)}, found[1],
                            [*_person_hops(gate, p), Hop(gate.kb.country_doc(country.iso2), found[0])],
                            [_person_mention(p)])
    return generate


def born_earlier(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    persons = sorted(gate.kb.persons, key=lambda p: p.doc_id)
    seen: set[tuple[str, str]] = set()
    for _ in range(PAIR_SAMPLES):
        a, b = rng.sample(persons, 2)
        pair = tuple(sorted((a.doc_id, b.doc_id)))
        if a.birth == b.birth or pair in seen:
            continue
        seen.add(pair)
        earlier = a if a.birth < b.birth else b
        yield gate.emit("born_earlier", f"{pair[0]}:{pair[1]}", {"person": a.name, "person_2": b.name},
                        _aliases(earlier.name, earlier.title),
                        [Hop(a.doc_id, str(a.birth)), Hop(b.doc_id, str(b.birth))],
                        [_person_mention(a), _person_mention(b)])


def populous_pairs(gate: Gate, template: str, rng: random.Random, samples: int = PAIR_SAMPLES
                   ) -> Iterator[tuple[Person, Person, Country, Country, Country]]:
    """Pairs of persons of different countries whose populations are clearly apart:
    ``(a, b, country of a, country of b, the more populous one)``."""
    persons = _persons_with_country(gate, template)
    seen: set[tuple[str, str]] = set()
    for _ in range(samples):
        a, b = rng.sample(persons, 2)
        ca, cb = _country(gate, a.country_iso2), _country(gate, b.country_iso2)
        pair = tuple(sorted((a.doc_id, b.doc_id)))
        if ca.iso2 == cb.iso2 or pair in seen or not ca.population or not cb.population:
            continue
        seen.add(pair)
        big, small = (ca, cb) if ca.population > cb.population else (cb, ca)
        if big.population < POPULATION_MARGIN * small.population:
            gate.reject(template, "populations too close to compare", f"{ca.name} / {cb.name}")
            continue
        yield a, b, ca, cb, big


def home_countries_more_populous(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    """Which of two persons' countries has more people (four documents)."""
    template = "home_countries_more_populous"
    for a, b, ca, cb, big in populous_pairs(gate, template, rng):
        pair = tuple(sorted((a.doc_id, b.doc_id)))
        hops = [*_person_hops(gate, a), *_person_hops(gate, b)]
        hops = [hops[0], Hop(hops[1].doc_id, f"{ca.population:,}"), hops[2], Hop(hops[3].doc_id, f"{cb.population:,}")]
        yield gate.emit(template, f"{pair[0]}:{pair[1]}", {"home": _home(a), "home_2": _home(b)}, big.aliases,
                        hops, [_person_mention(a), _person_mention(b)])


# --- intersections ----------------------------------------------------------------------

def _pair_intersection(template: str, fact: Fact | None) -> Callable[[Gate, random.Random], Iterator[Question | None]]:
    """The one country bordering both A and B (two documents), or a fact of it (three)."""
    def generate(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
        partners = _partners(gate)
        for a in sorted(partners):
            for b in partners[a]:
                if b < a:
                    continue
                answer = _country(gate, _shared_neighbour(gate, a, b))
                first, second = (a, b) if rng.random() < 0.5 else (b, a)
                hops = _intersection_hops(gate, first, second, answer.iso2)
                found = (answer.name, answer.aliases) if fact is None else fact(answer)
                if found is None:
                    continue
                if fact is not None:
                    hops.append(Hop(gate.kb.country_doc(answer.iso2), found[0]))
                ca, cb = _country(gate, first), _country(gate, second)
                yield gate.emit(template, f"{first}:{second}", {"country": ca.name, "country_2": cb.name},
                                found[1], hops, [_country_mention(ca), _country_mention(cb)])
    return generate


def _reached_intersection(template: str, via: str, fact: Fact | None
                          ) -> Callable[[Gate, random.Random], Iterator[Question | None]]:
    """The country bordering both C and the country of a city or person (+ its capital)."""
    def generate(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
        partners = _partners(gate)
        sources = gate.kb.cities if via == "city" else _persons_with_country(gate, template)
        for source in sources:
            home = source.country_iso2
            if not partners.get(home):
                continue
            other = rng.choice(partners[home])
            answer = _country(gate, _shared_neighbour(gate, home, other))
            hops = _intersection_hops(gate, home, other, answer.iso2)
            if via == "city":
                key, lead, mention = str(source.geonameid), [_city_hop(gate, source)], _city_mention(source)
                slots = {"city": source.name}
            else:
                key, lead, mention = source.doc_id, [_person_hops(gate, source)[0]], _person_mention(source)
                hops[0] = Hop(hops[0].doc_id, source.demonym)
                hops.insert(1, Hop(gate.kb.country_doc(home), answer.name))
                slots = {"home": _home(source)}
            found = (answer.name, answer.aliases) if fact is None else fact(answer)
            if found is None:
                continue
            if fact is not None:
                hops.append(Hop(gate.kb.country_doc(answer.iso2), found[0]))
            c = _country(gate, other)
            yield gate.emit(template, key, {**slots, "country": c.name}, found[1], [*lead, *hops],
                            [mention, _country_mention(c)])
    return generate


def cities_shared_neighbour(gate: Gate, rng: random.Random) -> Iterator[Question | None]:
    """The country bordering the countries of two cities (four documents)."""
    partners = _partners(gate)
    cities = [c for c in gate.kb.cities if partners.get(c.country_iso2)]
    by_country: dict[str, list[City]] = {}
    for c in cities:
        by_country.setdefault(c.country_iso2, []).append(c)
    seen: set[tuple[int, int]] = set()
    for _ in range(PAIR_SAMPLES):
        x = rng.choice(cities)
        other = rng.choice(partners[x.country_iso2])
        if other not in by_country:
            continue
        y = rng.choice(by_country[other])
        pair = (x.geonameid, y.geonameid)
        if pair in seen:
            continue
        seen.add(pair)
        answer = _country(gate, _shared_neighbour(gate, x.country_iso2, other))
        hops = [_city_hop(gate, x), _city_hop(gate, y),
                *_intersection_hops(gate, x.country_iso2, other, answer.iso2)]
        yield gate.emit("cities_shared_neighbour", f"{x.geonameid}:{y.geonameid}",
                        {"city": x.name, "city_2": y.name}, answer.aliases, hops,
                        [_city_mention(x), _city_mention(y)])


GENERATORS: dict[str, Callable[[Gate, random.Random], Iterator[Question | None]]] = {
    "capital_of_country": capital_of_country,
    "country_of_capital": country_of_capital,
    "currency_of_country": currency_of_country,
    "country_of_city": country_of_city,
    "birth_year": birth_year,
    "death_year": death_year,
    "city_country_capital": _city_bridge("city_country_capital", _capital),
    "city_country_currency": _city_bridge("city_country_currency", _currency),
    "city_country_language": _city_bridge("city_country_language", _sole_language),
    "person_country_capital": _person_bridge("person_country_capital", _capital),
    "person_country_currency": _person_bridge("person_country_currency", _currency),
    "born_earlier": born_earlier,
    "shared_neighbour": _pair_intersection("shared_neighbour", None),
    "shared_neighbour_capital": _pair_intersection("shared_neighbour_capital", _capital),
    "shared_neighbour_currency": _pair_intersection("shared_neighbour_currency", _currency),
    "city_shared_neighbour": _reached_intersection("city_shared_neighbour", "city", None),
    "person_shared_neighbour": _reached_intersection("person_shared_neighbour", "person", None),
    "city_shared_neighbour_capital": _reached_intersection("city_shared_neighbour_capital", "city", _capital),
    "person_shared_neighbour_capital": _reached_intersection("person_shared_neighbour_capital", "person", _capital),
    "cities_shared_neighbour": cities_shared_neighbour,
    "home_countries_more_populous": home_countries_more_populous,
}


def generate_audited(kb: KnowledgeBase, seed: int = 0) -> tuple[list[Question], QualityAudit]:
    """Every question that passes the gate, deterministic in ``seed``, and the audit of the rest.

    Two questions with the same text (after normalisation) would be one question with
    two answers, so a repeated text is dropped altogether.
    """
    gate = Gate(kb)
    questions: list[Question] = []
    for name, generator in GENERATORS.items():
        rng = random.Random(f"{seed}:{name}")
        questions.extend(q for q in generator(gate, rng) if q is not None)
    keys = [_text_key(q.question) for q in questions]
    counts = Counter(keys)
    kept = []
    for q, key in zip(questions, keys):
        if counts[key] == 1:
            kept.append(q)
        else:
            gate.audit.kept[q.template] -= 1
            gate.reject(q.template, "same text as another question", q.question)
    return kept, gate.audit


def generate_questions(kb: KnowledgeBase, seed: int = 0) -> list[Question]:
    """Every question that passes the quality gate (see ``generate_audited``)."""
    return generate_audited(kb, seed)[0]


def _text_key(text: str) -> str:
    return normalize_answer(ascii_fold(text))
