"""The scripted regex agent: one regex per question template, BM25 searches, text parsing.

Nothing is learned. Each of Search-v1's 21 templates gets one regular expression (from its
wording) and a recipe that chains lookups through the search engine: a country's profile,
a city's profile, a person's article, the country whose demonym or capital is given, the
one country that borders two others. The facts are read from the documents' own
sentences (``tasks.search.reader.parse_facts``). It scores 99-100% on every hop count of
Search-v1, which shows that set teaches recipes; a set that needs search scores it low.
A question no regex matches is answered "unknown".
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tasks.search.reader import DocFacts, parse_facts
from tasks.search.templates import TEMPLATES

__all__ = ["RegexAgent", "Search", "template_regex"]

Search = Callable[[str, int], Awaitable[list[str]]]
"""``(query, k) -> contents`` of the top ``k`` documents."""

_K = 10
_HOME = re.compile(r"^the home country of (?P<p>.+)$|^the present-day country of (?P<q>.+)'s nationality$")
_CITY_COUNTRY = re.compile(r"^the country where the city of (?P<c>.+) lies$")


def template_regex(text: str) -> re.Pattern[str]:
    """A template's wording with every ``{slot}`` a named group.

    >>> template_regex("What is the capital of {country}?").fullmatch("What is the capital of Peru?")["country"]
    'Peru'
    """
    parts = re.split(r"\{(\w+)\}", text)
    return re.compile("".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.+?)" for i, p in enumerate(parts)))


@dataclass
class RegexAgent:
    """Answers a question through ``search`` alone; ``queries`` lists what it searched."""

    search: Search
    queries: list[str] = field(default_factory=list)

    async def _docs(self, query: str) -> list[DocFacts]:
        self.queries.append(query)
        return parse_facts(await self.search(query, _K)).docs

    async def _titled(self, query: str, title: str) -> DocFacts | None:
        return next((d for d in await self._docs(query) if d.title == title), None)

    async def profile(self, country: str) -> DocFacts | None:
        return await self._titled(f"{country} country profile", f"{country} (country profile)")

    async def neighbours(self, country: str) -> set[str]:
        found: set[str] = set()
        for title in (f"{country} (country profile)", f"{country} (borders)"):
            doc = await self._titled(f"{country} borders", title)
            if doc is not None:
                found.update(doc.borders.get(country, ()))
        return found

    async def city_country(self, city: str) -> str | None:
        doc = await self._titled(f"{city} city profile", f"{city} (city profile)")
        return None if doc is None else doc.city_country.get(city)

    async def person(self, name: str) -> tuple[str, str, int, int | None] | None:
        for doc in await self._docs(name):
            if doc.person is not None and doc.person[0] == name:
                return doc.person
        return None

    async def country_of_demonym(self, lead: str) -> str | None:
        for doc in await self._docs(f"demonym for people from is {lead.split(' ')[0]}"):
            for country, demonym in doc.demonym.items():
                if lead.startswith(demonym + " "):
                    return country
        return None

    async def country_of_capital(self, capital: str) -> str | None:
        for doc in await self._docs(f"The capital of is {capital}"):
            for country, value in doc.capital.items():
                if value == capital:
                    return country
        return None

    async def country(self, phrase: str) -> str | None:
        """A country phrase of the templates: a name, a person's home, a city's country."""
        home, city = _HOME.match(phrase), _CITY_COUNTRY.match(phrase)
        if home:
            person = await self.person(home["p"] or home["q"])
            return None if person is None else await self.country_of_demonym(person[1])
        if city:
            return await self.city_country(city["c"])
        return phrase

    async def shared(self, a: str | None, b: str | None) -> str | None:
        if a is None or b is None:
            return None
        common = (await self.neighbours(a)) & (await self.neighbours(b)) - {a, b}
        return next(iter(common)) if len(common) == 1 else None

    async def attribute(self, country: str | None, kind: str) -> str | None:
        doc = None if country is None else await self.profile(country)
        if doc is None:
            return None
        value = getattr(doc, kind).get(country)
        return value[0] if isinstance(value, list) else value

    async def answer(self, question: str) -> str:
        matches = [(len(t.text), name, m) for name, t in TEMPLATES.items()
                   if (m := template_regex(t.text).fullmatch(question))]
        if not matches:
            return "unknown"
        _, name, match = max(matches, key=lambda x: x[0])  # the most specific wording
        return await _RECIPES[name](self, match.groupdict()) or "unknown"


async def _year(agent: RegexAgent, person: str, died: bool) -> str | None:
    found = await agent.person(person)
    year = None if found is None else found[3 if died else 2]
    return None if year is None else str(year)


async def _earlier(agent: RegexAgent, s: dict[str, str]) -> str | None:
    a, b = await agent.person(s["person"]), await agent.person(s["person_2"])
    return None if a is None or b is None else (s["person"] if a[2] < b[2] else s["person_2"])


async def _more_people(agent: RegexAgent, s: dict[str, str]) -> str | None:
    countries = [await agent.country(s["home"]), await agent.country(s["home_2"])]
    sizes = []
    for c in countries:
        doc = None if c is None else await agent.profile(c)
        if doc is None or c not in doc.population:
            return None
        sizes.append((doc.population[c], c))
    return max(sizes)[1]


def _reach(slot: str) -> Callable[[RegexAgent, dict[str, str]], Awaitable[str | None]]:
    """The country a slot's phrase leads to ("home" through a person, "city" through its profile)."""
    async def reach(agent: RegexAgent, s: dict[str, str]) -> str | None:
        if slot.startswith("city"):
            return await agent.city_country(s[slot])
        return await agent.country(s[slot])
    return reach


def _shared(a: str, b: str, kind: str | None = None) -> Callable[[RegexAgent, dict[str, str]], Awaitable[str | None]]:
    async def recipe(agent: RegexAgent, s: dict[str, str]) -> str | None:
        country = await agent.shared(await _reach(a)(agent, s), await _reach(b)(agent, s))
        return country if kind is None else await agent.attribute(country, kind)
    return recipe


def _of(slot: str, kind: str) -> Callable[[RegexAgent, dict[str, str]], Awaitable[str | None]]:
    async def recipe(agent: RegexAgent, s: dict[str, str]) -> str | None:
        return await agent.attribute(await _reach(slot)(agent, s), kind)
    return recipe


async def _capital_country(agent: RegexAgent, s: dict[str, str]) -> str | None:
    return await agent.country_of_capital(s["capital"])


_RECIPES: dict[str, Callable[[RegexAgent, dict[str, str]], Awaitable[str | None]]] = {
    "capital_of_country": _of("country", "capital"),
    "country_of_capital": _capital_country,
    "currency_of_country": _of("country", "currency"),
    "country_of_city": _reach("city"),
    "birth_year": lambda agent, s: _year(agent, s["person"], died=False),
    "death_year": lambda agent, s: _year(agent, s["person"], died=True),
    "city_country_capital": _of("city", "capital"),
    "city_country_currency": _of("city", "currency"),
    "city_country_language": _of("city", "language"),
    "person_country_capital": _of("home", "capital"),
    "person_country_currency": _of("home", "currency"),
    "born_earlier": _earlier,
    "shared_neighbour": _shared("country", "country_2"),
    "shared_neighbour_capital": _shared("country", "country_2", "capital"),
    "shared_neighbour_currency": _shared("country", "country_2", "currency"),
    "city_shared_neighbour": _shared("country", "city"),
    "person_shared_neighbour": _shared("country", "home"),
    "city_shared_neighbour_capital": _shared("country", "city", "capital"),
    "person_shared_neighbour_capital": _shared("country", "home", "capital"),
    "cities_shared_neighbour": _shared("city", "city_2"),
    "home_countries_more_populous": _more_people,
}
