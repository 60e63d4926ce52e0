"""Single- and multi-hop question generators over the default knowledge base.

Every generator is a pure function of ``(knowledge base, rng)``. A question carries its
gold aliases and, per hop, the document that supports the hop and the hop's answer.
``verify_question`` is the gate every emitted question passes: each hop's answer
appears in its supporting document, and the final answer appears in a supporting
document. Generators add the template-specific ambiguity checks (a city name that
names one city only, a person description that fits one person only, ...).
"""

from __future__ import annotations

import random
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tasks.search.corpus import Corpus
from tasks.search.grading import normalize_answer
from tasks.search.knowledge import KnowledgeBase, Person
from tasks.search.sources import City, Country, ascii_fold, name_key

__all__ = [
    "GENERATORS",
    "Hop",
    "Question",
    "contains_answer",
    "generate_questions",
    "verify_question",
]


@dataclass(frozen=True)
class Hop:
    """One retrieval step: the document to find and what it tells."""

    doc_id: str
    answer: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    golden_answers: tuple[str, ...]
    hops: tuple[Hop, ...]
    template: str

    @property
    def answer(self) -> str:
        return self.golden_answers[0]

    @property
    def supporting_doc_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(h.doc_id for h in self.hops))

    @property
    def num_hops(self) -> int:
        """Number of distinct documents the question needs (its retrieval hops)."""
        return len(self.supporting_doc_ids)

    def to_json(self, split: str | None = None) -> dict:
        row = {
            "id": self.id,
            "question": self.question,
            "golden_answers": list(self.golden_answers),
            "supporting_doc_ids": list(self.supporting_doc_ids),
            "hops": [{"doc_id": h.doc_id, "answer": h.answer} for h in self.hops],
            "template": self.template,
            "num_hops": self.num_hops,
        }
        if split is not None:
            row["split"] = split
        return row

    @classmethod
    def from_json(cls, row: dict) -> Question:
        return cls(
            id=str(row["id"]),
            question=str(row["question"]),
            golden_answers=tuple(str(a) for a in row["golden_answers"]),
            hops=tuple(Hop(str(h["doc_id"]), str(h["answer"])) for h in row.get("hops", ())),
            template=str(row.get("template", "")),
        )


def _containment_key(text: str) -> str:
    """Lowercase, punctuation to spaces, collapsed: "(1913–1960)" keeps both years."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(
        " " if ch in string.punctuation or unicodedata.category(ch).startswith("P") else ch
        for ch in text
    )
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def contains_answer(document_text: str, answer: str) -> bool:
    """Whether ``answer`` occurs in ``document_text`` as whole words."""
    needle = _containment_key(answer)
    return bool(needle) and f" {needle} " in f" {_containment_key(document_text)} "


def verify_question(question: Question, corpus: Corpus) -> bool:
    """Every hop's answer is in its document; the final answer is in a supporting one."""
    if not question.hops or not question.golden_answers:
        return False
    docs = {}
    for hop in question.hops:
        doc = corpus.get(hop.doc_id)
        if doc is None or not contains_answer(doc.contents, hop.answer):
            return False
        docs[hop.doc_id] = doc.contents
    return any(contains_answer(text, question.answer) for text in docs.values())


def _aliases(*names: str) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        if name:
            out.extend([name, ascii_fold(name)])
    return tuple(dict.fromkeys(out))


def _unique_by(items, key) -> list:
    counts = Counter(key(item) for item in items)
    return [item for item in items if counts[key(item)] == 1]


def _person_aliases(person: Person) -> tuple[str, ...]:
    bare = re.sub(r"\s*\([^)]*\)$", "", person.title)
    return _aliases(person.title, bare)


# --- single hop ------------------------------------------------------------------------


def capital_of_country(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    for c in _unique_by(list(kb.countries.values()), lambda c: name_key(c.name)):
        yield Question(
            f"capital_of_country:{c.iso2}",
            f"What is the capital of {c.name}?",
            _aliases(c.capital),
            (Hop(kb.country_doc(c.iso2), c.capital),),
            "capital_of_country",
        )


def country_of_capital(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    for c in _unique_by(list(kb.countries.values()), lambda c: name_key(c.capital)):
        yield Question(
            f"country_of_capital:{c.iso2}",
            f"{c.capital} is the capital of which country?",
            c.aliases,
            (Hop(kb.country_doc(c.iso2), c.name),),
            "country_of_capital",
        )


def currency_of_country(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    for c in kb.countries.values():
        if c.currency_name:
            yield Question(
                f"currency_of_country:{c.iso2}",
                f"What is the currency of {c.name}?",
                _aliases(c.currency_name, c.currency_code),
                (Hop(kb.country_doc(c.iso2), c.currency_name),),
                "currency_of_country",
            )


def country_of_city(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    for city in kb.cities:
        country = kb.countries[city.country_iso2]
        yield Question(
            f"country_of_city:{city.geonameid}",
            f"In which country is the city of {city.name}?",
            country.aliases,
            (Hop(kb.city_doc(city), country.name),),
            "country_of_city",
        )


def birth_year(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    for p in kb.persons:
        yield Question(
            f"birth_year:{p.doc_id}",
            f"In what year was {p.title} born?",
            (str(p.birth),),
            (Hop(p.doc_id, str(p.birth)),),
            "birth_year",
        )


def death_year(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    for p in kb.persons:
        if p.death is not None:
            yield Question(
                f"death_year:{p.doc_id}",
                f"In what year did {p.title} die?",
                (str(p.death),),
                (Hop(p.doc_id, str(p.death)),),
                "death_year",
            )


# --- multi hop -------------------------------------------------------------------------


def _city_chain(
    kb: KnowledgeBase,
    template: str,
    ask: Callable[[City], str],
    fact: Callable[[Country], tuple[str, tuple[str, ...]] | None],
) -> Iterator[Question]:
    """city -> its country (city profile) -> a fact of that country (country profile)."""
    for city in kb.cities:
        country = kb.countries[city.country_iso2]
        found = fact(country)
        if found is None:
            continue
        answer, aliases = found
        yield Question(
            f"{template}:{city.geonameid}",
            ask(city),
            aliases,
            (Hop(kb.city_doc(city), country.name), Hop(kb.country_doc(country.iso2), answer)),
            template,
        )


def _capital(c: Country):
    return c.capital, _aliases(c.capital)


def _currency(c: Country):
    return (c.currency_name, _aliases(c.currency_name, c.currency_code)) if c.currency_name else None


def _sole_language(c: Country):
    return (c.languages[0], _aliases(c.languages[0])) if len(c.languages) == 1 else None


def city_country_capital(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    yield from _city_chain(
        kb, "city_country_capital",
        lambda city: f"What is the capital of the country in which the city of {city.name} lies?",
        _capital,
    )


def city_country_currency(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    yield from _city_chain(
        kb, "city_country_currency",
        lambda city: f"What currency is used in the country where the city of {city.name} is?",
        _currency,
    )


def city_country_language(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    yield from _city_chain(
        kb, "city_country_language",
        lambda city: f"What is the official language of the country where the city of {city.name} is?",
        _sole_language,
    )


def _identifiable_persons(kb: KnowledgeBase) -> list[Person]:
    """Persons with a country whose (role, birth year) fits nobody else in the corpus."""
    by_birth: dict[int, list[Person]] = {}
    for p in kb.persons:
        by_birth.setdefault(p.birth, []).append(p)

    def fits_one(q: Person) -> bool:
        role = q.role.casefold()
        return sum(role in p.description.casefold() for p in by_birth[q.birth]) == 1

    return [p for p in kb.persons if p.country_iso2 and p.role and fits_one(p)]


def _person_chain(
    kb: KnowledgeBase,
    template: str,
    ask: Callable[[Person], str],
    fact: Callable[[Country], tuple[str, tuple[str, ...]] | None],
) -> Iterator[Question]:
    """person (by role and birth year) -> nationality -> country -> a fact of it."""
    for p in _identifiable_persons(kb):
        country = kb.countries[p.country_iso2]
        found = fact(country)
        if found is None:
            continue
        answer, aliases = found
        yield Question(
            f"{template}:{p.doc_id}",
            ask(p),
            aliases,
            (Hop(p.doc_id, p.demonym), Hop(kb.country_doc(country.iso2), p.demonym),
             Hop(kb.country_doc(country.iso2), answer)),
            template,
        )


def person_country_capital(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    yield from _person_chain(
        kb, "person_country_capital",
        lambda p: f"What is the capital of the home country of the {p.role} born in {p.birth}?",
        _capital,
    )


def person_country_currency(kb: KnowledgeBase, rng: random.Random) -> Iterator[Question]:
    yield from _person_chain(
        kb, "person_country_currency",
        lambda p: f"What is the currency of the home country of the {p.role} born in {p.birth}?",
        _currency,
    )


def born_earlier(kb: KnowledgeBase, rng: random.Random, count: int = 1500) -> Iterator[Question]:
    """Which of two persons was born earlier; both birth years must differ."""
    persons = sorted(kb.persons, key=lambda p: p.doc_id)
    seen: set[tuple[str, str]] = set()
    for _ in range(count * 3):
        if len(seen) >= count:
            break
        a, b = rng.sample(persons, 2)
        pair = tuple(sorted((a.doc_id, b.doc_id)))
        if a.birth == b.birth or pair in seen or a.title.casefold() in b.title.casefold() \
                or b.title.casefold() in a.title.casefold():
            continue
        seen.add(pair)
        earlier = a if a.birth < b.birth else b
        yield Question(
            f"born_earlier:{pair[0]}:{pair[1]}",
            f"Who was born earlier, {a.title} or {b.title}?",
            _person_aliases(earlier),
            (Hop(a.doc_id, str(a.birth)), Hop(b.doc_id, str(b.birth)), Hop(earlier.doc_id, earlier.title)),
            "born_earlier",
        )


def most_populous_neighbour(
    kb: KnowledgeBase, rng: random.Random, max_neighbours: int = 5, margin: float = 1.2
) -> Iterator[Question]:
    """A country's most populous neighbour, by a clear margin over the runner-up."""
    for c in kb.countries.values():
        neighbours = [kb.countries[n] for n in c.neighbours if n in kb.countries]
        if not 2 <= len(neighbours) <= max_neighbours or any(n.population <= 0 for n in neighbours):
            continue
        ranked = sorted(neighbours, key=lambda n: n.population, reverse=True)
        if ranked[0].population < margin * ranked[1].population:
            continue
        hops = [Hop(kb.country_doc(c.iso2), n.name) for n in neighbours]
        hops += [Hop(kb.country_doc(n.iso2), f"{n.population:,}") for n in neighbours]
        yield Question(
            f"most_populous_neighbour:{c.iso2}",
            f"Which country that borders {c.name} has the largest population?",
            ranked[0].aliases,
            tuple(hops),
            "most_populous_neighbour",
        )


GENERATORS: dict[str, Callable[[KnowledgeBase, random.Random], Iterator[Question]]] = {
    "capital_of_country": capital_of_country,
    "country_of_capital": country_of_capital,
    "currency_of_country": currency_of_country,
    "country_of_city": country_of_city,
    "birth_year": birth_year,
    "death_year": death_year,
    "city_country_capital": city_country_capital,
    "city_country_currency": city_country_currency,
    "city_country_language": city_country_language,
    "person_country_capital": person_country_capital,
    "person_country_currency": person_country_currency,
    "born_earlier": born_earlier,
    "most_populous_neighbour": most_populous_neighbour,
}


def generate_questions(kb: KnowledgeBase, seed: int = 0) -> list[Question]:
    """All verified questions, deterministic in ``seed``; questions with one text only.

    Two questions with the same text but different answers would be ambiguous, so a
    repeated text is dropped altogether.
    """
    questions: list[Question] = []
    for name, generator in GENERATORS.items():
        rng = random.Random(f"{seed}:{name}")
        questions.extend(q for q in generator(kb, rng) if verify_question(q, kb.corpus))
    keys = [(_containment_key(q.question), normalize_answer(ascii_fold(q.question))) for q in questions]
    counts = Counter(k for pair in keys for k in set(pair))
    return [q for q, pair in zip(questions, keys) if all(counts[k] == 1 for k in set(pair))]
