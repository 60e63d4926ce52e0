"""The default corpus plus the structured facts the question generators chain over.

``build_knowledge_base()`` reads the data packages once and returns both the
documents and, for every entity a question can mention, the id of the document
that states its facts. Generators never look at raw package data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tasks.search.corpus import (
    Corpus,
    city_doc_id,
    city_document,
    country_doc_id,
    country_document,
    wiki_doc_id,
    wiki_document,
)
from tasks.search.sources import (
    City,
    Country,
    WikiArticle,
    load_cities,
    load_city_names,
    load_countries,
    load_wiki_articles,
)

__all__ = ["KnowledgeBase", "Person", "build_knowledge_base", "is_about_a_person", "parse_person"]

DEFAULT_CITY_LIMIT = 1500

# "French philosopher and writer (1913–1960)", "American actor (born 1946)".
_LIFE_YEARS = re.compile(
    r"^(?P<lead>[^()]+?)\s*\((?:born\s+(?P<born>\d{3,4})|(?P<birth>\d{3,4})\s*[–-]\s*(?P<death>\d{3,4}))\)$"
)


@dataclass(frozen=True)
class Person:
    """A Wikipedia person whose description states life years (and maybe nationality).

    ``role`` is the description without years and without the leading demonym, so a
    question can describe the person without giving the nationality away.
    """

    doc_id: str
    title: str
    description: str
    role: str
    demonym: str
    country_iso2: str
    birth: int
    death: int | None
    compound_nationality: bool = False

    @property
    def name(self) -> str:
        """The title without a disambiguating bracket: "Mercury (planet)" -> "Mercury"."""
        return re.sub(r"\s*\([^)]*\)$", "", self.title)


@dataclass(frozen=True)
class KnowledgeBase:
    """The corpus and the structured facts behind it.

    ``all_city_names`` holds every city name of the source list (15k cities), not only
    the cities that have a document: a question's city name must not name another one.
    """

    corpus: Corpus
    countries: dict[str, Country]
    cities: tuple[City, ...]
    persons: tuple[Person, ...]
    all_city_names: tuple[tuple[int, str, str], ...] = ()

    def country_doc(self, iso2: str) -> str:
        return country_doc_id(self.countries[iso2])

    def city_doc(self, city: City) -> str:
        return city_doc_id(city)


# Words of "Uncategorized" descriptions with life years that are not about a person
# ("Continuation of the Roman Empire (330–1453)", "Worldwide economic depression (1929–1939)").
_NOT_A_PERSON = re.compile(r"\b(empire|war|wars|depression|dynasty|kingdom|period|revolution|continuation|caliphate|"
                           r"sultanate|company|state|republic|union|era|crisis|conquests?|pandemic|series)\b", re.IGNORECASE)


def is_about_a_person(article: WikiArticle) -> bool:
    """The summaries' topic says "People"; some people are "Uncategorized", next to empires and wars."""
    if article.topic == "People":
        return True
    return article.topic == "Uncategorized" and not _NOT_A_PERSON.search(article.description)


def parse_person(
    doc_id: str, article: WikiArticle, demonym_to_country: dict[str, str]
) -> Person | None:
    """A ``Person`` from a description with life years, else ``None``.

    Descriptions with BC dates, "c." dates or compound nationalities ("German-born",
    "French-American", "Austrian and American") yield a person without a country: their
    nationality is not a single country of the corpus (the last kind is flagged
    ``compound_nationality`` so the quality audit can count it).
    """
    match = _LIFE_YEARS.match(article.description)
    if match is None:
        return None
    lead = match["lead"].strip()
    birth = int(match["born"] or match["birth"])
    death = int(match["death"]) if match["death"] else None
    if death is not None and death < birth:
        return None
    demonym, iso2, role = "", "", lead
    for candidate in sorted(demonym_to_country, key=len, reverse=True):
        rest = lead[len(candidate):]
        if lead.startswith(candidate) and rest.startswith(" ") and rest[1:2].islower():
            if re.match(r"\s+(and|or)\s", rest):
                return Person(doc_id, article.title, article.description, lead, "", "", birth, death, True)
            demonym, iso2, role = candidate, demonym_to_country[candidate], rest.strip()
            break
    return Person(doc_id, article.title, article.description, role, demonym, iso2, birth, death)


def build_knowledge_base(city_limit: int = DEFAULT_CITY_LIMIT) -> KnowledgeBase:
    """Read the data packages and write the default corpus (about 12k documents)."""
    countries = load_countries()
    cities = load_cities(countries, limit=city_limit)
    articles = load_wiki_articles()
    demonym_to_country = {c.demonym: iso2 for iso2, c in countries.items() if c.demonym}
    documents = [wiki_document(i, a) for i, a in enumerate(articles)]
    persons = []
    for i, article in enumerate(articles):
        person = parse_person(wiki_doc_id(i), article, demonym_to_country) if is_about_a_person(article) else None
        if person is not None:
            persons.append(person)
    documents += [country_document(c, countries) for c in countries.values()]
    documents += [city_document(city, countries[city.country_iso2]) for city in cities]
    return KnowledgeBase(
        corpus=Corpus(documents),
        countries=countries,
        cities=tuple(cities),
        persons=tuple(persons),
        all_city_names=load_city_names(),
    )
