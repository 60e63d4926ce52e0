"""The question-quality gate: names that point at one thing, phrasings that are true, an audit.

Three checks decide whether a generated question may be emitted (the grammar check of
the wording lives with the templates, ``tasks.search.templates.render``; what it refused
is recorded as one of two reasons, :func:`grammar_rejection`):

* **Uniqueness against the whole corpus.** A name a question uses (a city, a country, a
  person) must not be shared by another entity of the corpus: not exactly after
  accent folding and normalisation, not through an alias, and not as a near-duplicate
  ("St. Petersburg" / "Saint Petersburg", "Mohammed" / "Mohamed": a variant is the
  same skeleton, or one letter apart in a name of eight letters or more).
  :class:`NameIndex` holds every name of the corpus and of the city list.
* **No anachronism.** "The home country of X" is only said of persons alive when that
  country existed (``home_phrase``); of earlier persons the question says what is true,
  "the present-day country of X's nationality".
* **Every hop a different document**, and every hop's answer in its document
  (``tasks.search.questions.verify_question``).

What the gate drops is counted by template and reason in a :class:`QualityAudit`, with
a few examples per reason, so a reviewer reads what was rejected and why.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tasks.search.sources import name_key
from tasks.search.templates import SLOT_PATTERNS

__all__ = ["AUDIT_LABELS_VERSION", "BROKEN_WORDING", "COUNTRY_FOUNDED", "NAME_OUTSIDE_GRAMMAR", "NameIndex",
           "QualityAudit", "Rejected", "grammar_rejection", "home_phrase", "one_edit_apart", "skeleton"]

# States in their present form founded after 1993; every other country of the corpus
# existed (at least as the state its people are named for) by 1993.
COUNTRY_FOUNDED: dict[str, int] = {"ME": 2006, "RS": 2006, "TL": 2002, "SS": 2011, "XK": 2008, "CW": 2010,
                                   "SX": 2010, "BQ": 2010}
_DEFAULT_FOUNDED = 1993

NEAR_DUPLICATE_MIN_LETTERS = 8  # shorter names differ by one letter too often to call that a variant
_ABBREVIATIONS = {"st": "saint", "ste": "sainte", "mt": "mount", "ft": "fort", "pt": "port"}


def skeleton(name: str) -> str:
    """A loose key for spelling variants: folded, abbreviations expanded, no spaces or hyphens.

    >>> skeleton("St. Petersburg") == skeleton("Saint-Petersburg")
    True
    """
    words = [_ABBREVIATIONS.get(w, w) for w in re.split(r"[\s\-]+", name_key(name)) if w]
    return "".join(words)


def _deletions(word: str) -> set[str]:
    """The word and every word one letter shorter (the symmetric-deletion index of spelling variants)."""
    return {word} | {word[:i] + word[i + 1:] for i in range(len(word))}


def one_edit_apart(a: str, b: str) -> bool:
    """Whether one letter substituted, inserted or deleted turns ``a`` into ``b`` ("Mohammed"/"Mohamed").

    >>> one_edit_apart("mohammed", "mohamed"), one_edit_apart("shanghai", "shuanghuai")
    (True, False)
    """
    if abs(len(a) - len(b)) > 1 or a == b:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
    return a[i + 1:] == b[i + 1:] if len(a) == len(b) else a[i:] == b[i + 1:]


# The grammar check refuses two different things, and the audit says which.
NAME_OUTSIDE_GRAMMAR = "name the slot grammar cannot render"
"""A real name the proper-name grammar has no room for: a lower-case word that is not one
of its particles ("Hoji ya Henda", "Ngũgĩ wa Thiong'o"), a digit ("Sector 3"), a word
opening on a quote or a lower-case prefix ("Al ‘Amārah", "d'Alembert"). The wording would
be fine; the question is dropped because the template check could not tell it from a
broken slot."""
BROKEN_WORDING = "broken wording (grammar check)"
"""The sentence itself would be wrong: a comma or bracket inside a name (a title or a
region: "Horatio Nelson, 1st Viscount Nelson", "Mianzhu, Deyang, Sichuan") breaks a
sentence that lists names, a doubled space or word, or a text that reads as another
template too."""
AUDIT_LABELS_VERSION = 2
"""Bumped when a rejection reason is renamed or split (2: the grammar check's two reasons),
so a cached audit is rebuilt with the current labels (the questions come out the same)."""

_BREAKS_A_SENTENCE = re.compile(r"[,;()\[\]]|\s{2}")


def grammar_rejection(slots: dict[str, str]) -> str:
    """Which of the grammar check's reasons a question refused by it is dropped for.

    >>> grammar_rejection({"city": "Hoji ya Henda"}) == NAME_OUTSIDE_GRAMMAR
    True
    >>> grammar_rejection({"person": "Horatio Nelson, 1st Viscount Nelson", "person_2": "Tyagaraja"}) == BROKEN_WORDING
    True
    """
    outside = [value for slot, value in slots.items()
               if not re.fullmatch(SLOT_PATTERNS[slot.removesuffix("_2")], value)]
    if not outside or any(_BREAKS_A_SENTENCE.search(value) for value in outside):
        return BROKEN_WORDING  # every name fits, so the sentence is what fails; or a name breaks it
    return NAME_OUTSIDE_GRAMMAR


class Rejected(Exception):
    """Raised inside a generator to drop one candidate question, with the reason the audit records."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class NameIndex:
    """Every name the corpus gives an entity, to tell whether a name points at one entity only.

    Entities are keyed ``(kind, id)``; a name is ambiguous when another entity (of the
    kinds asked about) has the same normalised name, the same skeleton, or a skeleton
    one letter apart (names of ``NEAR_DUPLICATE_MIN_LETTERS`` letters or more).
    """

    def __init__(self) -> None:
        self._by_key: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self._by_deletion: dict[str, set[tuple[str, str]]] = defaultdict(set)

    def add(self, kind: str, entity_id: str, names: Iterable[str]) -> None:
        for name in names:
            for key in {name_key(name), skeleton(name)}:
                if key:
                    self._by_key[key].add((kind, entity_id))
            sk = skeleton(name)
            if len(sk) >= NEAR_DUPLICATE_MIN_LETTERS - 1:
                for variant in _deletions(sk):
                    self._by_deletion[variant].add((kind, entity_id))

    def others(self, kind: str, entity_id: str, name: str, among: Iterable[str] | None = None
               ) -> set[tuple[str, str]]:
        """Entities other than ``(kind, entity_id)`` (of the kinds ``among``) ``name`` could also mean."""
        me = (kind, entity_id)
        found = set()
        for key in {name_key(name), skeleton(name)}:
            found |= self._by_key.get(key, set())
        sk = skeleton(name)
        if len(sk) >= NEAR_DUPLICATE_MIN_LETTERS:
            for variant in _deletions(sk):  # two names share a deletion variant iff one edit apart (or swapped)
                found |= self._by_deletion.get(variant, set())
        kinds = None if among is None else set(among)
        return {e for e in found - {me} if kinds is None or e[0] in kinds}


def home_phrase(name: str, country_iso2: str, birth: int, death: int | None) -> str:
    """How a question may refer to a person's country without an anachronism.

    >>> home_phrase("Fuzuli", "AZ", 1483, 1556)
    "the present-day country of Fuzuli's nationality"
    >>> home_phrase("Kofi Annan", "GH", 1938, 2018)
    'the home country of Kofi Annan'
    """
    founded = COUNTRY_FOUNDED.get(country_iso2, _DEFAULT_FOUNDED)
    if death is None or death >= founded:
        return f"the home country of {name}"
    return f"the present-day country of {name}'s nationality"


@dataclass
class QualityAudit:
    """Candidates dropped by the gate, by template and reason, with examples; and counts kept."""

    rejected: Counter = field(default_factory=Counter)  # (template, reason) -> count
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> first few details
    kept: Counter = field(default_factory=Counter)  # template -> count
    max_examples: int = 3

    def reject(self, template: str, reason: str, detail: str) -> None:
        self.rejected[(template, reason)] += 1
        shown = self.examples.setdefault(reason, [])
        if len(shown) < self.max_examples:
            shown.append(f"{template}: {detail}")

    def by_reason(self) -> Counter:
        out: Counter = Counter()
        for (_, reason), n in self.rejected.items():
            out[reason] += n
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "kept": dict(sorted(self.kept.items())),
            "rejected": [{"template": t, "reason": r, "count": n} for (t, r), n in sorted(self.rejected.items())],
            "examples": self.examples,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QualityAudit:
        audit = cls()
        audit.kept.update(data.get("kept", {}))
        for row in data.get("rejected", []):
            audit.rejected[(row["template"], row["reason"])] += int(row["count"])
        audit.examples = {k: list(v) for k, v in data.get("examples", {}).items()}
        return audit
