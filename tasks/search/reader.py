"""A one-query reader: answer a question from the few documents one search returned.

The shortcut audit (``tasks.search.shortcut``) asks how many questions one BM25 query
with the whole question already solves. A weak span picker would understate that, so
this reader is as good as a reader of a fixed set of documents can be without knowing
the question's template: it parses every fact the corpus's documents state (profiles,
border lists, city profiles, a person's nationality, role and life years), finds the
entities the question names, and chains the facts it holds (a city's country, the
country whose capital or demonym or borders fit, that country's capital, currency,
language, a person of that country with the role asked for) before it falls back on
the best-ranked span of the answer's type. It never searches again: what is not in
the documents it was given stays unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["GEOGRAPHIC", "PLACED", "DocFacts", "Facts", "asked_for", "parse_facts", "read_answer"]

_TITLE = re.compile(r'^"?(?P<title>[^\n"]*)"?\n(?P<text>.*)$', re.S)
_PROFILE_TITLE = re.compile(r"^(?P<name>.+?) \((?:country profile|borders)\)$")
_CITY_TITLE = re.compile(r"^(?P<name>.+?) \(city profile\)$")
_CAPITAL = re.compile(r"The capital of (?P<c>.+?) is (?P<v>[^.]+(?:\.[A-Z][^.]*)?)\.")
_CURRENCY = re.compile(r"The currency of (?P<c>.+?) is the (?P<v>.+?) \((?P<code>[A-Z]{3})\)")
_LANGUAGE = re.compile(r"The official languages? of (?P<c>.+?) (?:is|are) (?P<v>[^.]+)\.")
_POPULATION = re.compile(r"(?P<c>[^.]+?) has a population of (?P<v>[\d,]+)\.")
_DEMONYM = re.compile(r"The demonym for people from (?P<c>.+?) is (?P<v>[^.]+)\.")
_BORDERS = re.compile(r"(?:^|\. )(?P<c>[^.]+?) (?:borders|shares land borders with) (?P<v>[^.]+)\.")
_CITY = re.compile(r"^(?P<city>.+?) is a city in (?P<c>[^.]+)\.")
PLACED = re.compile(r"^(?P<what>[A-Z][\w\- ]*?) (?:in|of|on) (?:the )?(?P<c>[A-Z][\w' .\-]+?)$")
"""A Wikipedia description that places its subject in a country: "River in Russia"."""
GEOGRAPHIC = re.compile(r"\b(city|town|municipality|province|islands?|mountains?|river|region|park|lake|"
                        r"peninsula|volcano|desert|port|district|territory|community|archipelago|sea|bay|valley|"
                        r"plateau|capital)\b", re.IGNORECASE)
"""What such a description must call its subject for it to be a place (not a war or a cuisine)."""
_LIFE = re.compile(r"^(?P<lead>[^()\n]+?)\s*\((?:born\s+(?P<born>\d{3,4})|(?P<b>\d{3,4})\s*[–-]\s*(?P<d>\d{3,4}))\)")


def _names(listed: str) -> list[str]:
    return [n.strip() for n in re.split(r", | and (?=[A-Z])", listed) if n.strip()]


@dataclass
class DocFacts:
    """What one document states, in the corpus's own words."""

    title: str
    text: str
    capital: dict[str, str] = field(default_factory=dict)
    currency: dict[str, list[str]] = field(default_factory=dict)
    language: dict[str, list[str]] = field(default_factory=dict)
    population: dict[str, int] = field(default_factory=dict)
    demonym: dict[str, str] = field(default_factory=dict)
    borders: dict[str, list[str]] = field(default_factory=dict)  # in the document's order
    city_country: dict[str, str] = field(default_factory=dict)
    person: tuple[str, str, int, int | None] | None = None  # (name, lead, birth, death)


@dataclass
class Facts:
    """The facts of several documents together, in rank order."""

    docs: list[DocFacts]

    def merged(self, attr: str) -> dict:
        out: dict = {}
        for doc in self.docs:
            for key, value in getattr(doc, attr).items():
                out.setdefault(key, value)
        return out

    def neighbours(self) -> dict[str, dict[str, None]]:
        """Borders, both ways: a list in either country's document counts. Ordered sets (dict
        keys) in rank and document order, so ties break the same in every process; a ``set``'s
        order follows the string-hash seed."""
        out: dict[str, dict[str, None]] = {}
        for doc in self.docs:
            for country, listed in doc.borders.items():
                for other in listed:
                    out.setdefault(country, {})[other] = None
                    out.setdefault(other, {})[country] = None
        return out

    def persons(self) -> list[tuple[str, str, int, int | None]]:
        return [d.person for d in self.docs if d.person is not None]


def _doc_facts(contents: str) -> DocFacts:
    match = _TITLE.match(contents)
    title, text = (match["title"].strip(), match["text"]) if match else ("", contents)
    doc = DocFacts(title, text)
    profile, city = _PROFILE_TITLE.match(title), _CITY_TITLE.match(title)
    if profile or city:
        for m in _CAPITAL.finditer(text):
            doc.capital[m["c"]] = m["v"].strip()
        for m in _CURRENCY.finditer(text):
            doc.currency[m["c"]] = [m["v"].strip(), m["code"]]
        for m in _LANGUAGE.finditer(text):
            doc.language[m["c"]] = _names(m["v"])
        for m in _POPULATION.finditer(text):
            if profile:
                doc.population[m["c"].strip()] = int(m["v"].replace(",", ""))
        for m in _DEMONYM.finditer(text):
            doc.demonym[m["c"]] = m["v"].strip()
        for m in _BORDERS.finditer(text):
            doc.borders[m["c"].strip()] = list(dict.fromkeys(_names(m["v"])))
        m = _CITY.match(text)
        if city and m:
            doc.city_country[m["city"]] = m["c"].strip()
    else:
        life, placed = _LIFE.match(text), PLACED.match(text.split(". ", 1)[0])
        if placed and not life and GEOGRAPHIC.search(placed["what"]):  # "River in Russia": the subject lies there
            doc.city_country[re.sub(r"\s*\([^)]*\)$", "", title)] = placed["c"]
        if life:
            name = re.sub(r"\s*\([^)]*\)$", "", title)
            birth = int(life["born"] or life["b"])
            doc.person = (name, life["lead"].strip(), birth, int(life["d"]) if life["d"] else None)
    return doc


def parse_facts(contents: Iterable[str]) -> Facts:
    """Every fact the documents (Search-R1 ``contents``: quoted title, newline, text) state."""
    return Facts([_doc_facts(c) for c in contents])


def _named(question: str, names: Iterable[str]) -> list[str]:
    """The names that occur in the question as whole words, longest first, not inside a longer one."""
    lowered = f" {question.casefold()} "
    found: list[str] = []
    for name in sorted(dict.fromkeys(names), key=len, reverse=True):
        key = name.casefold()
        if key and re.search(rf"(?<![\w]){re.escape(key)}(?![\w])", lowered) \
                and not any(key in f.casefold() for f in found):
            found.append(name)
    return found


def asked_for(question: str) -> str:
    """What the question asks for: year_born, year_died, capital, currency, language, country,
    person, earlier (of two persons) or populous (of two countries).

    >>> asked_for("What is the capital of the country in which the city of Yazd lies?")
    'capital'
    """
    q = question.casefold()
    if re.search(r"born (earlier|first)|\b(older|younger)\b", q):
        return "earlier"
    if re.search(r"more people|more populous|larger population", q):
        return "populous"
    if re.search(r"\b(what year|which year|when|birth year|year of birth)\b", q):
        return "year_died" if re.search(r"\b(die|died|death)\b", q) else "year_born"
    if re.search(r"\b(which|what) country\b|^name the (one )?country\b", q):
        return "country"
    head = re.split(r"\b(?:of|in|used|for)\b", q, maxsplit=1)[0]
    for kind in ("capital", "currency", "language"):
        if kind in head or (kind == "currency" and "money" in head):
            return kind
    if re.match(r"\s*(who|name the|which person)\b", q):
        return "person"
    return "country"


@dataclass
class _Scene:
    question: str
    facts: Facts
    countries: dict[str, None]  # an ordered set: the same order in every process
    demonym_of: dict[str, str]  # demonym -> country

    @classmethod
    def of(cls, question: str, facts: Facts) -> _Scene:
        nb = facts.neighbours()
        countries = dict.fromkeys([*nb, *(c for a in nb.values() for c in a), *facts.merged("capital"),
                                   *facts.merged("demonym"), *facts.merged("city_country").values()])
        demonym_of = {d: c for c, d in facts.merged("demonym").items()}
        return cls(question, facts, countries, demonym_of)

    def anchors(self) -> list[str]:
        """Countries the question reaches in one step: named, a named city's, a named capital's
        (after "capital is"), a named currency's, or a named person's (through a demonym)."""
        q = self.question
        cities = self.facts.merged("city_country")
        asks_capital = asked_for(q) == "capital"
        capitals = {v: c for c, v in self.facts.merged("capital").items() if "capital" in q.casefold()
                    and not (asks_capital and not re.search(rf"capital is {re.escape(v)}", q))}
        currencies = {v[0]: c for c, v in self.facts.merged("currency").items()}
        persons = {p[0]: self._country_of_lead(p[1]) for p in self.facts.persons()}
        out: list[tuple[int, str]] = []
        for name in _named(q, [*cities, *capitals, *currencies, *persons, *self.countries]):
            table = next((t for t in (cities, capitals, currencies, persons) if name in t), None)
            out.append((q.casefold().find(name.casefold()), name if table is None else table[name]))
        return [c for c in dict.fromkeys(c for _, c in sorted(out)) if c]

    def _country_of_lead(self, lead: str) -> str | None:
        for demonym in sorted(self.demonym_of, key=len, reverse=True):
            if lead.startswith(demonym + " "):
                return self.demonym_of[demonym]
        return None

    def target_country(self) -> str | None:
        anchors = self.anchors()
        if re.search(r"\bborders?\b|\bbordering\b|\bneighbou?r", self.question, re.I) and anchors:
            nb = self.facts.neighbours()
            scored = [(sum(a in nb.get(c, ()) for a in anchors), c) for c in nb if c not in anchors]
            scored = [s for s in scored if s[0] > 0]
            if scored:
                return max(scored, key=lambda s: s[0])[1]
            return None
        return anchors[-1] if anchors else None


def _attribute(facts: Facts, kind: str, country: str) -> str | None:
    if kind == "capital":
        return facts.merged("capital").get(country)
    if kind == "currency":
        found = facts.merged("currency").get(country)
        return found[0] if found else None
    if kind == "language":
        found = facts.merged("language").get(country)
        return found[0] if found else None
    return country


_DESCRIBED = re.compile(r"\bthe ([a-z][a-z\-]+) born in the (\d{3,4})0s\b")


def _demonym_of_lead(scene: _Scene, lead: str) -> str:
    known = [d for d in scene.demonym_of if lead.startswith(d + " ")]
    return max(known, key=len) if known else lead.split(" ")[0]


def _described(scene: _Scene, persons: list, named: list) -> list:
    """Persons of the documents that fit "the <occupation> born in the <decade>s" and, where the
    documents tell it, the nationality the question leads to (a country's or a named person's)."""
    match = _DESCRIBED.search(scene.question)
    if match is None:
        return []
    occupation, decade = match[1], int(match[2])
    fits = [p for p in persons if p not in named and p[2] // 10 == decade
            and re.search(rf"\b{re.escape(occupation)}\b", p[1].casefold())]
    if named:
        demonym = _demonym_of_lead(scene, named[0][1])
    else:
        demonym = {c: d for d, c in scene.demonym_of.items()}.get(scene.target_country() or "", "")
    if not demonym:
        return fits  # the documents do not tell the nationality: any person who fits
    return [p for p in fits if p[1].startswith(demonym + " ")]


def _person_answer(scene: _Scene, kind: str) -> str | None:
    """A person the question describes (occupation, decade, nationality), else one it names."""
    persons = scene.facts.persons()
    named = [p for p in persons if _named(scene.question, [p[0]])]
    fits = _described(scene, persons, named)
    if fits:
        p = fits[0]
    elif named and kind.startswith("year"):
        p = named[0]
    else:
        country = scene.target_country()
        demonym = {c: d for d, c in scene.demonym_of.items()}.get(country or "")
        fits = [p for p in persons if demonym and p[1].startswith(demonym + " ")
                and p[1][len(demonym) + 1:].casefold() in scene.question.casefold()]
        if not fits:
            return None
        p = fits[0]
    if kind == "person":
        return p[0]
    year = p[2] if kind == "year_born" else p[3]
    return None if year is None else str(year)


def _options(question: str) -> list[str]:
    match = re.search(r",\s*(.+?),? or (.+?)\?$", question)
    return [match[1].strip(), match[2].strip()] if match else []


def _compare(scene: _Scene, kind: str) -> str | None:
    options = _options(scene.question)
    if kind == "earlier":
        births = {p[0]: p[2] for p in scene.facts.persons()}
        known = [(births[o], o) for o in options if o in births]
        if len(known) == 2:
            return min(known)[1]
        return options[0] if options else None  # one or none known: a coin flip's worth
    populations = scene.facts.merged("population")
    sizes = []
    for option in options:
        country = _Scene(option, scene.facts, scene.countries, scene.demonym_of).anchors()
        if country and country[-1] in populations:
            sizes.append((populations[country[-1]], country[-1]))
    return max(sizes)[1] if len(sizes) == 2 else None


def _fallback(scene: _Scene, kind: str) -> str | None:
    """The best-ranked value of the asked type that the question does not name."""
    for doc in scene.facts.docs:
        if kind in ("capital", "currency", "language"):
            values = [v if isinstance(v, str) else v[0] for v in getattr(doc, kind).values()]
        elif kind == "country":
            values = [*doc.city_country.values(), *(c for s in doc.borders.values() for c in s)]
        elif doc.person is not None:
            p = doc.person
            values = [p[0] if kind == "person" else str(p[2] if kind == "year_born" else p[3])]
        else:
            values = []
        fresh = [v for v in values if v and v != "None" and not _named(scene.question, [v])]
        if fresh:
            return fresh[0]
    return None


def read_answer(question: str, documents: Sequence[str]) -> str:
    """The reader's answer to ``question`` from ``documents`` (Search-R1 ``contents``), or "".

    >>> docs = ['"Yazd (city profile)"\\nYazd is a city in Iran.',
    ...         '"Iran (country profile)"\\nThe capital of Iran is Tehran.']
    >>> read_answer("What is the capital of the country in which the city of Yazd lies?", docs)
    'Tehran'
    """
    facts = parse_facts(documents)
    scene = _Scene.of(question, facts)
    kind = asked_for(question)
    if kind in ("earlier", "populous"):
        return _compare(scene, kind) or ""
    if kind in ("person", "year_born", "year_died") or _DESCRIBED.search(question):
        found = _person_answer(scene, kind if kind != "country" else "person")
        if found:
            return found
    country = scene.target_country()
    if country is not None and kind in ("capital", "currency", "language", "country"):
        found = _attribute(facts, kind, country)
        if found and not (kind == "country" and _named(question, [found])):
            return found
    return _fallback(scene, kind) or ""
