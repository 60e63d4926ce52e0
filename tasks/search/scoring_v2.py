"""Search-v2's scorer: right phrasings pass, wrong answers and sprays fail.

``grade_answer_v2`` keeps Search-v1's contract (one final answer, reward 1.0 or 0.0, F1
as a diagnostic, no format bonus) and changes what counts as the same answer:

* names are compared by ``aliases.alias_key`` (accents, case, punctuation, spacing and
  articles folded), against the golds widened by the alias tables ("USA", "Kiev",
  "Nigerian naira", "Beethoven"; every seat of a contested capital with ``kind="capital"``;
  a unit several currencies share, "dollar", only with ``kind="currency_named"``);
* a currency may be plural ("US dollars") and a language may say so ("the Ukrainian language");
* a city may carry its own country: "Paris, France" or "Paris (France)" (never another country);
* years and numbers are compared as exact numbers: "1954", "in 1954", "the year 1954",
  "1954 AD", "**1954**" and "1,954" (a thousands separator, not a list) are 1954; "1950s",
  "c. 1954", "1953 or 1954", "1954-1955" and "1954.00000000000001" are not. With
  ``kind="year"`` one date is its year: "March 3, 1954", "3 March 1954", "1954-03-03".

The spraying guard stays: an answer that is not one accepted form as a whole and lists
several candidates ("A, B", "A or B", "A/B", "A (B)") scores 0 with the guard
``multiple_candidates``. "Washington, D.C." is one accepted form, so it is one answer.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from decimal import Decimal

from tasks.search.aliases import AliasTables, AnswerKind, alias_key, fold, load_alias_tables
from tasks.search.grading import DEFAULT_MAX_ANSWER_CHARS, Grade, GuardName, f1_score

__all__ = ["AnswerKind", "SCORER_VERSION", "accepted_answers", "grade_answer_v2", "parse_number"]

SCORER_VERSION = 2
"""In Search-v2's fingerprint: bump when what the scorer accepts changes, so that runs
scored by different rules are never compared (2: shared currency units only where the
question names the country, full dates for years, plurals, exact numbers; 2026-12-06)."""

# "in 1954", "the year 1954", "1954 AD", "AD 1954", "1954 CE", "year: 1954."
_NUMBER = re.compile(
    r"^(?:(?:in\s+)?(?:the\s+)?(?:year\s*:?\s*)?|in\s+)?(?:a\.?\s?d\.?\s+)?"
    r"(?P<num>-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?)"
    r"(?:\s*(?:a\.?\s?d\.?|c\.?\s?e\.?))?\.?$",
    re.IGNORECASE,
)
# Quotes and markdown around an answer: '"1954"', "**1954**", "`1954`".
_WRAPPING = "\"'`*_“”‘’«»"
_MONTHS = {m: i for i, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
     ("december", "dec")], start=1) for m in names}
_MONTH = r"(?P<month>[a-z]+)\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{3,4})"
# One date: "March 3, 1954", "3 March 1954", "the 3rd of March 1954", "March 1954", "1954-03-03".
_DATES = tuple(re.compile(rf"^(?:on\s+|in\s+)?{body}\.?$", re.IGNORECASE) for body in (
    rf"{_MONTH}\s+{_DAY},?\s+{_YEAR}",
    rf"(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}",
    rf"{_MONTH},?\s+{_YEAR}",
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})",
))
# What separates candidates in a list: v1's separators plus brackets ("Kyiv (Kiev)").
_LIST = re.compile(r",|/|;|\||&|\+|\n|\bor\b|\band\b|\bvs\b|\bversus\b|[()\[\]]", re.IGNORECASE)


def parse_number(text: str) -> Decimal | None:
    """The one number ``text`` states as a year or count, else ``None``; exact, so
    "1954.00000000000001" is not 1954.

    >>> parse_number("in 1954"), parse_number("1,954"), parse_number("1950s")
    (Decimal('1954'), Decimal('1954'), None)
    """
    match = _NUMBER.match(" ".join(text.strip().split()))
    return None if match is None else Decimal(match["num"].replace(",", ""))


def parse_date_year(text: str) -> Decimal | None:
    """The year of the one date ``text`` states, else ``None``.

    >>> parse_date_year("March 3, 1954"), parse_date_year("1954-03-03"), parse_date_year("1954-1955")
    (Decimal('1954'), Decimal('1954'), None)
    """
    text = " ".join(text.strip().split())
    for pattern in _DATES:
        match = pattern.match(text)
        if match is None:
            continue
        month = match["month"]
        month_number = int(month) if month.isdigit() else _MONTHS.get(month.casefold())
        day = int(match.groupdict().get("day") or 1)
        try:
            datetime.date(int(match["year"]), month_number or 0, day)
        except ValueError:
            return None
        return Decimal(match["year"])
    return None


def _unwrapped(text: str) -> str:
    """``text`` without the quotes and markdown around it ("**1954**" is "1954")."""
    return text.strip().strip(_WRAPPING).strip()


def _is_numeric(kind: AnswerKind | None, golds: Sequence[str]) -> bool:
    if kind is not None:
        return kind in ("year", "number")
    return bool(golds) and all(re.fullmatch(r"-?\d+(?:\.\d+)?", g.strip()) for g in golds)


def accepted_answers(golds: Sequence[str], kind: AnswerKind = "entity",
                     tables: AliasTables | None = None) -> tuple[str, ...]:
    """Every form ``grade_answer_v2`` accepts for these golds (golds first).

    Write these into a question's ``golden_answers`` to make a QA file that scores the
    same under plain exact match.
    """
    if kind in ("year", "number"):
        return tuple(golds)
    return (tables or load_alias_tables()).expand(golds, kind)


def _city_with_country(answer: str, golds: Sequence[str], kind: AnswerKind, tables: AliasTables) -> bool:
    """"Paris, France" or "Paris (France)": an accepted city form and that city's own country."""
    bracketed = re.fullmatch(r"\s*([^(),]+?)\s*\(\s*([^(),]+?)\s*\)\s*\.?\s*", answer)
    if bracketed is not None:
        city, country = bracketed.groups()
    elif answer.count(",") == 1:
        city, country = (part.strip() for part in answer.split(","))
    else:
        return False
    for group in tables.cities_named(golds, kind):
        if alias_key(city) in {alias_key(f) for f in (group.name, *group.forms)} and \
                alias_key(country) in {alias_key(f) for f in tables.country_forms(group.country)}:
            return True
    return False


def _matches(answer: str, golds: Sequence[str], kind: AnswerKind | None, tables: AliasTables) -> bool:
    if _is_numeric(kind, golds):
        answer = _unwrapped(answer)
        value = parse_number(answer)
        if value is None and kind == "year":
            value = parse_date_year(answer)
        return value is not None and value in {parse_number(g) for g in golds}
    entity_kind: AnswerKind = kind or "entity"
    accepted = {alias_key(form) for form in accepted_answers(golds, entity_kind, tables)}
    if alias_key(answer) in accepted:
        return True
    for form, group_kind in _reworded(answer):
        if alias_key(form) in accepted and group_kind in tables.kinds_of(form):
            return True
    return _city_with_country(answer, golds, entity_kind, tables)


def _reworded(answer: str) -> list[tuple[str, str]]:
    """The answer said another way, with the kind of name that makes it the same answer:
    a currency's singular ("US dollars": "US dollar") and a language's name ("the Ukrainian
    language": "Ukrainian")."""
    words = alias_key(answer).split()
    if not words:
        return []
    out: list[tuple[str, str]] = []
    last = words[-1]
    if len(last) > 3 and last.endswith("s"):
        stems = [last[:-1], *([last[:-2]] if last.endswith("es") else [])]
        out.extend((" ".join([*words[:-1], stem]), "currency") for stem in stems)
    if len(words) > 1 and last == "language":
        out.append((" ".join(words[:-1]), "language"))
    return out


def grade_answer_v2(
    prediction: str | None,
    golds: Sequence[str],
    *,
    kind: AnswerKind | None = None,
    max_answer_chars: int = DEFAULT_MAX_ANSWER_CHARS,
    tables: AliasTables | None = None,
) -> Grade:
    """Grade one final answer against a question's golds.

    Args:
        prediction: the agent's single final answer (``None`` when it gave none).
        golds: the gold forms of the one right answer (a question's ``golden_answers``).
        kind: what the question asks for. ``"capital"`` accepts every seat of a contested
            capital; ``"year"``/``"number"`` compare numbers; a group kind ("country",
            "city", "currency", "person", "language") widens golds only by that table.
            ``None``: numbers when every gold is a number, else any table ("entity"),
            where a gold that names two entities ("Luxembourg") is not widened.
        max_answer_chars: answers longer than this (after stripping) score 0.
        tables: alias tables (default: the shipped ones).
    """
    tables = tables or load_alias_tables()
    answer = (prediction or "").strip()
    guard: GuardName | None = None
    em = False
    if not alias_key(answer):
        guard = "empty"
    elif len(answer) > max_answer_chars:
        guard = "too_long"
    else:
        em = _matches(answer, golds, kind, tables)
        if not em and _lists_candidates(answer):
            guard = "multiple_candidates"
    f1 = 1.0 if em else f1_score(answer, golds)  # a diagnostic, against the golds as written
    return Grade(reward=1.0 if em and guard is None else 0.0, exact_match=em, f1=f1, guard=guard,
                 normalized_answer=fold(answer))


def _lists_candidates(answer: str) -> bool:
    """Several non-empty parts split by a list separator (a bare "1,954" is one number)."""
    if parse_number(answer) is not None:
        return False
    return sum(1 for part in _LIST.split(answer) if alias_key(part)) >= 2
