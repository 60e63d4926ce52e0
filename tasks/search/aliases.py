"""Alias tables: every name a careful grader accepts for a gold answer (Search-v2's scorer).

Search-v1 compared answers to a short gold list after SQuAD normalisation, so "USA",
"Kiev", "Lomé" or "Nigerian naira" scored 0. These tables gather, per entity, the forms a
person would write, from the same sources the corpus is built from:

* countries: the corpus name, countryinfo's alternative spellings, and hand-written short
  forms ("USA", "DRC", "Burma");
* cities (every capital and every city with a document): GeoNames alternate names that
  are Latin-script spellings of the same name ("Kiev", "Naypyidaw", "Berne"; not IATA
  codes, other names or historic names such as "Tselinograd");
* currencies: the ISO list name, the ISO code, the unit ("naira", "won", "ruble") and the
  issuing country's demonym with the unit ("Nigerian naira");
* people with a corpus article: the surname alone ("Beethoven") when no other entity of
  the tables has it (none for an epithet or a place: "William the Silent", "Joan of Arc");
* languages: a few common other names ("Farsi");
* contested capitals: every city the corpus names as a seat of government.

A generated form that two entities share is dropped (it would accept a wrong answer);
hand-written forms and currency units are kept, but a currency form that two currencies
share ("dollar", "won", "CFA franc") counts only with ``kind="currency_named"``: when the
question names the country, "ruble" is one currency; when the country is a hidden hop
("the currency of the country where X was born"), it is a guess that skips that hop. Tables ship as ``alias_tables/aliases.json`` (rebuilt by
``python -m tasks.search.aliases`` from the installed sources and ``curated.json``).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "ALIAS_TABLES_VERSION",
    "AliasGroup",
    "AliasTables",
    "AnswerKind",
    "GroupKind",
    "alias_key",
    "build_alias_tables",
    "fold",
    "load_alias_tables",
]

TABLE_DIR = Path(__file__).with_name("alias_tables")
ALIAS_TABLES_VERSION = 2  # bump when the build rules (not the data) change

GroupKind = Literal["country", "city", "currency", "person", "language"]
AnswerKind = Literal["entity", "country", "capital", "city", "currency", "currency_named", "person", "language",
                     "year", "number"]
"""What a question asks for; it chooses which tables may widen its golds ("entity": any).
"currency_named" is a currency of a country the question names: only then does a unit that
several currencies share ("dollar") say which one."""

_GROUP_KINDS: dict[str, frozenset[str]] = {
    "entity": frozenset({"country", "city", "currency", "person", "language"}),
    "capital": frozenset({"city"}),
    "country": frozenset({"country"}),
    "city": frozenset({"city"}),
    "currency": frozenset({"currency"}),
    "currency_named": frozenset({"currency"}),
    "person": frozenset({"person"}),
    "language": frozenset({"language"}),
    "year": frozenset(),
    "number": frozenset(),
}

# Letters NFKD does not decompose into a base letter and a mark.
_LETTERS = str.maketrans({"ø": "o", "Ø": "O", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ß": "ss",
                          "ł": "l", "Ł": "L", "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th",
                          "Þ": "Th", "ı": "i", "ħ": "h", "Ħ": "H"})
# Apostrophes and the modifier letters used as them: dropped, so "Sana'a" is "Sanaa".
_APOSTROPHES = frozenset("'’‘`´ʻʼʿʾ′")
_ABBREVIATIONS = {"st": "saint", "ste": "sainte", "mt": "mount", "ft": "fort"}
_ARTICLES = frozenset({"a", "an", "the"})


@functools.lru_cache(maxsize=1 << 16)  # the tables' forms are folded at every grade
def fold(text: str) -> str:
    """Accent-free, case-free words: what two spellings of one name have in common.

    NFKD with marks dropped (plus ø, ł, ß ... by table), casefolded, "&" read as "and",
    apostrophes dropped, other punctuation a space, articles dropped, "St." read as
    "Saint".

    >>> fold("  The Saint-Étienne & St. John's ")
    'saint etienne and saint johns'
    """
    text = unicodedata.normalize("NFKD", text.translate(_LETTERS))
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold().replace("&", " and ")
    chars = (ch if ch.isalnum() else " " for ch in text if ch not in _APOSTROPHES)
    words = (_ABBREVIATIONS.get(w, w) for w in _join_initials("".join(chars).split()) if w not in _ARTICLES)
    return " ".join(words)


def _join_initials(words: list[str]) -> list[str]:
    """Runs of single letters are one abbreviation: "u s a" (from "U.S.A.") is "usa"."""
    out: list[str] = []
    run: list[str] = []
    for word in [*words, ""]:
        if len(word) == 1 and word.isalpha():
            run.append(word)
            continue
        out.extend(["".join(run)] if len(run) > 1 else run)
        run = []
        if word:
            out.append(word)
    return out


def alias_key(text: str) -> str:
    """The key two forms of one name share: ``fold``'s words ("Porto-Novo" is "porto novo").

    Spaces stay: "Georgetown" (Guyana) and "George Town" (Cayman Islands) are two capitals.

    >>> alias_key("Washington, D.C.") == alias_key("washington dc")
    True
    """
    return fold(text)


@dataclass(frozen=True)
class AliasGroup:
    """One entity and every accepted form of its name (``name`` is the corpus's form).

    ``country`` is the ISO code of the country a city or currency belongs to (empty when
    none), so "Paris, France" can be read as the city.
    """

    kind: GroupKind
    name: str
    forms: tuple[str, ...]
    country: str = ""

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"kind": self.kind, "name": self.name, "forms": list(self.forms)}
        if self.country:
            row["country"] = self.country
        return row


@dataclass(frozen=True)
class AliasTables:
    """The alias groups and the contested capitals, indexed by ``alias_key``."""

    groups: tuple[AliasGroup, ...]
    contested_capitals: dict[str, tuple[str, ...]]

    @functools.cached_property
    def _index(self) -> dict[str, tuple[int, ...]]:
        index: dict[str, list[int]] = defaultdict(list)
        for i, group in enumerate(self.groups):
            for key in dict.fromkeys(alias_key(f) for f in (group.name, *group.forms)):
                index[key].append(i)
        return {k: tuple(v) for k, v in index.items()}

    @functools.cached_property
    def _capital_sets(self) -> dict[str, tuple[str, ...]]:
        """City key -> the capitals of its country: the country whose first-listed capital
        it is, else the one country that lists it ("Jerusalem" is Israel's, not Palestine's)."""
        first = {alias_key(capitals[0]): capitals for capitals in self.contested_capitals.values()}
        listed: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for capitals in self.contested_capitals.values():
            for city in capitals[1:]:
                listed[alias_key(city)].append(capitals)
        unique = {key: sets[0] for key, sets in listed.items() if len(sets) == 1}
        return {**unique, **first}

    @functools.cached_property
    def _shared_currency_keys(self) -> frozenset[str]:
        """Forms that two currencies share ("dollar", "won"): one currency only once the country is named."""
        owners: dict[str, set[int]] = defaultdict(set)
        for i, group in enumerate(self.groups):
            if group.kind == "currency":
                for form in (group.name, *group.forms):
                    owners[alias_key(form)].add(i)
        return frozenset(key for key, groups in owners.items() if len(groups) > 1)

    def kinds_of(self, form: str) -> frozenset[str]:
        """The kinds of the groups that have ``form`` ("currency" for "US dollar")."""
        return frozenset(self.groups[i].kind for i in self._index.get(alias_key(form), ()))

    def groups_of(self, gold: str, kind: AnswerKind = "entity") -> tuple[AliasGroup, ...]:
        """The groups a gold names, among those ``kind`` allows.

        A gold that is the corpus name of one group names that group; otherwise the one
        group that has it as a form. A gold that stays ambiguous ("Luxembourg" with
        ``kind="entity"``: the country or its capital) names none, so it widens nothing.
        """
        allowed = _GROUP_KINDS[kind]
        key = alias_key(gold)
        found = [self.groups[i] for i in self._index.get(key, ()) if self.groups[i].kind in allowed]
        named = [g for g in found if alias_key(g.name) == key]
        chosen = named or found
        return tuple(chosen) if len(chosen) == 1 else ()

    def country_forms(self, iso2: str) -> tuple[str, ...]:
        group = self._countries.get(iso2)
        return () if group is None else (group.name, *group.forms)

    @functools.cached_property
    def _countries(self) -> dict[str, AliasGroup]:
        return {g.country: g for g in self.groups if g.kind == "country"}

    def expand(self, golds: Sequence[str], kind: AnswerKind = "entity") -> tuple[str, ...]:
        """Every accepted form of the golds: theirs, their groups', and for ``kind="capital"``
        every capital of a country with a contested capital. A currency form that two
        currencies share ("dollar") is only accepted with ``kind="currency_named"`` (or as a
        gold as written)."""
        names = list(golds)
        if kind == "capital":
            for gold in golds:
                names.extend(self._capital_sets.get(alias_key(gold), ()))
        out = list(names)
        for name in names:
            for group in self.groups_of(name, kind):
                forms = [group.name, *group.forms]
                if group.kind == "currency" and kind != "currency_named":
                    forms = [f for f in forms if alias_key(f) not in self._shared_currency_keys]
                out.extend(forms)
        return tuple(dict.fromkeys(out))

    def cities_named(self, golds: Sequence[str], kind: AnswerKind) -> tuple[AliasGroup, ...]:
        """The city groups the golds name (for "City, Country" answers)."""
        if "city" not in _GROUP_KINDS[kind]:
            return ()
        return tuple(g for gold in golds for g in self.groups_of(gold, kind) if g.kind == "city")


def _read_json(name: str) -> Any:
    return json.loads((TABLE_DIR / name).read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def load_alias_tables() -> AliasTables:
    """The shipped tables (``alias_tables/aliases.json``), read once."""
    data = _read_json("aliases.json")
    groups = tuple(AliasGroup(g["kind"], g["name"], tuple(g["forms"]), g.get("country", "")) for g in data["groups"])
    contested = {iso2: tuple(v) for iso2, v in data["contested_capitals"].items()}
    return AliasTables(groups, contested)


# --------------------------------------------------------------------------- build
# Only the build below reads the data packages; grading reads the shipped json.

_GENERIC_WORDS = re.compile(r"\b(city|capital|federal|district|municipality|province|region|shi|osh|town)\b", re.I)
# Where the family name comes first, the last word is no surname ("Sun Yat-sen").
_FAMILY_NAME_FIRST = re.compile(r"\b(Chin|Japan|Kore|Vietnam|Hungar|Taiwan|Mongolia|Cambodia|Burm|Myanmar)", re.I)
_LIFE_YEARS = re.compile(r"\((born\s+)?\d{3,4}\s*[)–-]")  # "(1770–1827)", "(born 1946)": a person
_NAME_SUFFIX = re.compile(r"\b(jr|sr|i|ii|iii|iv|v|vi|vii|viii)\.?$", re.I)


@dataclass
class _Draft:
    """A group while it is built: ``pinned`` forms survive the ambiguity filter."""

    kind: GroupKind
    name: str
    country: str = ""
    pinned: list[str] | None = None
    generated: list[str] | None = None

    def add(self, forms: Iterable[str], *, pinned: bool) -> None:
        target = self.pinned if pinned else self.generated
        if target is None:
            target = []
            setattr(self, "pinned" if pinned else "generated", target)
        target.extend(f.strip() for f in forms if f and f.strip())


def _is_spelling_of(candidate: str, name: str) -> bool:
    """A GeoNames alternate name that is another spelling of ``name`` ("Kiev" of "Kyiv")
    rather than an other name, a code or a translation into a non-Latin script."""
    if len(candidate) < 4 or not candidate[0].isupper() or candidate.isupper() or _GENERIC_WORDS.search(candidate):
        return False
    if not all(ch.isascii() or unicodedata.category(ch)[0] in "LMZP" and ord(ch) < 0x250 for ch in candidate):
        return False
    a, b = alias_key(candidate), alias_key(name)
    return a[:1] == b[:1] and difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def _country_drafts(countries: dict, curated: dict) -> list[_Draft]:
    drafts = []
    for iso2, country in countries.items():
        draft = _Draft("country", country.name, iso2, [country.name])
        draft.add(country.aliases, pinned=False)
        draft.add(curated.get(iso2, ()), pinned=True)
        drafts.append(draft)
    return drafts


def _city_drafts(countries: dict, cities: Sequence, raw_cities: dict, curated: dict[str, list[str]]) -> list[_Draft]:
    by_name: dict[tuple[str, str], dict] = {}
    for row in sorted(raw_cities.values(), key=lambda r: -int(r.get("population") or 0)):
        by_name.setdefault((alias_key(row["name"]), row["countrycode"]), row)
    wanted = {(c.capital, iso2) for iso2, c in countries.items()} | {(c.name, c.country_iso2) for c in cities}
    drafts = []
    for name, iso2 in sorted(wanted):
        draft = _Draft("city", name, iso2, [name])
        row = by_name.get((alias_key(name), iso2))
        if row is not None:
            draft.add([row["name"], *(a for a in row.get("alternatenames") or () if _is_spelling_of(a, name))],
                      pinned=False)
        draft.add(curated.get(name, ()), pinned=True)
        drafts.append(draft)
    known = {alias_key(d.name) for d in drafts}
    for name, forms in curated.items():  # contested capitals that are no geonames capital
        if alias_key(name) not in known:
            drafts.append(_Draft("city", name, "", [name, *forms]))
    return drafts


def _currency_drafts(countries: dict, currency_names: dict[str, str], curated: dict) -> list[_Draft]:
    drafts = []
    for code, name in sorted(currency_names.items()):
        issuer = countries.get(code[:2])  # ISO 4217 codes start with the issuer's ISO 3166 code
        draft = _Draft("currency", name, issuer.iso2 if issuer else "", [name, code])
        units = curated.get(code) or [name.split()[-1]]
        draft.add(units, pinned=True)
        if issuer is not None:
            unit = units[0]
            draft.add([f"{issuer.demonym} {unit}" if issuer.demonym else "", f"{issuer.name} {unit}"], pinned=False)
        drafts.append(draft)
    return drafts


def _surname_forms(person_name: str) -> list[str]:
    """"Ludwig van Beethoven" -> ["Beethoven", "van Beethoven"]; [] for one-word names and for
    names with an epithet or a place ("William the Silent", "Joan of Arc", "Philip V of Spain")."""
    words = person_name.split()
    if len(words) < 2 or "," in person_name or _NAME_SUFFIX.search(person_name) or \
            any(w.casefold() in ("of", "the") for w in words[1:-1]):
        return []
    forms = [words[-1]]
    i = len(words) - 1
    while i > 1 and words[i - 1][:1].islower():  # particles: van, de, da, von, al-
        i -= 1
        forms.append(" ".join(words[i:]))
    return forms


def _person_drafts(articles: Sequence) -> list[_Draft]:
    from tasks.search.knowledge import is_about_a_person  # the build only

    drafts = []
    for article in articles:
        if not is_about_a_person(article) or not _LIFE_YEARS.search(article.description):
            continue
        name = re.sub(r"\s*\([^)]*\)$", "", article.title)
        draft = _Draft("person", name, "", [name])
        if not _FAMILY_NAME_FIRST.search(article.description):
            draft.add(_surname_forms(name), pinned=False)
        drafts.append(draft)
    return drafts


def _finish(drafts: list[_Draft]) -> tuple[AliasGroup, ...]:
    """Drop generated forms that two entities share; keep each group's forms once."""
    owners: dict[str, set[int]] = defaultdict(set)
    for i, draft in enumerate(drafts):
        for form in [*(draft.pinned or ()), *(draft.generated or ())]:
            owners[alias_key(form)].add(i)
    groups = []
    for i, draft in enumerate(drafts):
        kept = [*(draft.pinned or ()), *(f for f in draft.generated or () if owners[alias_key(f)] == {i})]
        forms = tuple(dict.fromkeys(f for f in kept if alias_key(f) and f != draft.name))
        groups.append(AliasGroup(draft.kind, draft.name, forms, draft.country))
    return tuple(groups)


def build_alias_tables() -> dict[str, Any]:
    """The tables from the installed data packages and ``curated.json`` (slow: seconds)."""
    from tasks.search.knowledge import DEFAULT_CITY_LIMIT
    from tasks.search.reference import CURRENCY_NAMES, LANGUAGE_NAMES
    from tasks.search.sources import _raw_cities, load_cities, load_countries, load_wiki_articles, source_versions

    curated = _read_json("curated.json")
    countries = load_countries()
    drafts = _country_drafts(countries, curated["country"])
    contested = {k: v["capitals"] for k, v in curated["contested_capitals"].items() if k != "about"}
    city_forms = dict(curated["city"])
    for capitals in contested.values():
        for city in capitals:
            city_forms.setdefault(city, [])
    drafts += _city_drafts(countries, load_cities(countries, DEFAULT_CITY_LIMIT), _raw_cities(), city_forms)
    units = {k: v for k, v in curated["currency_units"].items() if k != "about"}
    drafts += _currency_drafts(countries, CURRENCY_NAMES, units)
    drafts += [_Draft("language", name, "", [name, *curated["language"].get(name, ())])
               for name in sorted(set(LANGUAGE_NAMES.values()))]
    drafts += _person_drafts(load_wiki_articles())
    return {
        "about": "Generated by `python -m tasks.search.aliases` from the data packages and curated.json; "
                 "see docs/environments.md#search-scoring.",
        "version": ALIAS_TABLES_VERSION,
        "sources": source_versions(),
        "contested_capitals": contested,
        "groups": [g.to_json() for g in _finish(drafts)],
    }


def write_alias_tables(path: Path = TABLE_DIR / "aliases.json") -> None:
    """Rebuild the shipped tables (run after editing ``curated.json``)."""
    path.write_text(json.dumps(build_alias_tables(), ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_alias_tables()
