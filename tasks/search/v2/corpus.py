"""The Search-v2 knowledge base: v1's sources, with borders in their own documents.

In v1 a country's profile names its neighbours and its capital, so the one country that
borders A and B has a profile naming A, B and the answer's capital at once: one query
finds it and "three hops" need one document. Here the border list is a separate
document ("X (borders)"), and the profile states capital, currency, languages,
population and demonym only.

Golds agree with the corpus: where GeoNames and the corpus's Wikipedia text disagree on a
capital, the profile says what the Wikipedia article says (Astana, Naypyidaw); capitals
that are contested or split (``CONTESTED_CAPITALS``) are stated as GeoNames has them but
never asked or used as a clue; defunct states and districts that are not cities are left out.
"""

from __future__ import annotations

import dataclasses
import re

from tasks.search.corpus import Corpus, Document, _join_names, city_document, country_document
from tasks.search.knowledge import KnowledgeBase, build_knowledge_base
from tasks.search.sources import Country

__all__ = ["CAPITALS_AS_THE_CORPUS_SAYS", "CONTESTED_CAPITALS", "DEFUNCT", "borders_doc_id", "build_knowledge_base_v2"]

CAPITALS_AS_THE_CORPUS_SAYS = {"KZ": "Astana", "MM": "Naypyidaw"}
"""GeoNames' capital replaced by the one the corpus's Wikipedia articles name."""
CONTESTED_CAPITALS = frozenset({"PS", "IL", "BO", "ZA", "CH", "NL", "BJ", "TZ", "CI"})
"""Countries whose capital is contested, split between cities or differs by function
(East Jerusalem, Jerusalem, Sucre/La Paz, Pretoria, Bern, Amsterdam, Porto-Novo, Dodoma,
Yamoussoukro): no question asks for it or names it."""
DEFUNCT = frozenset({"CS", "AN"})
"""Serbia and Montenegro, the Netherlands Antilles: states that no longer exist."""
_NOT_A_CITY = re.compile(r"\b(Territories|District|Region|Province|County|Prefecture)\b")


def borders_doc_id(iso2: str) -> str:
    return f"borders-{iso2}"


def borders_document(country: Country, countries: dict[str, Country]) -> Document | None:
    neighbours = [countries[n].name for n in country.neighbours if n in countries]
    if not neighbours:
        return None
    return Document(id=borders_doc_id(country.iso2), title=f"{country.name} (borders)",
                    text=f"{country.name} shares land borders with {_join_names(neighbours)}.")


def build_knowledge_base_v2() -> KnowledgeBase:
    """v1's knowledge base with v2's country documents, capitals and exclusions."""
    v1 = build_knowledge_base()
    countries = {i: dataclasses.replace(c, capital=CAPITALS_AS_THE_CORPUS_SAYS.get(i, c.capital),
                                        neighbours=tuple(n for n in c.neighbours if n not in DEFUNCT))
                 for i, c in v1.countries.items() if i not in DEFUNCT}
    cities = tuple(c for c in v1.cities if c.country_iso2 in countries and not _NOT_A_CITY.search(c.name))
    persons = tuple(p for p in v1.persons if not p.country_iso2 or p.country_iso2 in countries)
    documents = [d for d in v1.corpus if d.id.startswith("wiki-")]
    for country in countries.values():
        documents.append(country_document(country, countries, borders=False))
        borders = borders_document(country, countries)
        if borders is not None:
            documents.append(borders)
    documents += [city_document(city, countries[city.country_iso2]) for city in cities]
    return KnowledgeBase(corpus=Corpus(documents), countries=countries, cities=cities, persons=persons,
                         all_city_names=v1.all_city_names)
