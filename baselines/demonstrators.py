"""Who the SFT warm start imitates: the env's oracle, or a policy a model can imitate.

An env's oracle (``env.unwrapped.oracle_action()``) solves its task from the hidden
solution, which is what it is for: proving the task solvable. It is not always a good
teacher. Search's oracle searches a document's title *and opens its doc id in the same
turn*, before it has seen any result; a model cannot learn to write an id it has not
seen, so imitating that turn teaches it to make ids up (measured: the tiny model trained
on it for 800 steps never solved a held-out 1-hop question, docs/training.md).

A *demonstrator* is a policy whose every written token follows from what the episode
has shown so far (the question, the tool results); the hidden solution only decides
which of the visible options to take. Imitating it teaches copying and reading, which is
what RL then has to sharpen.

``DEMONSTRATORS`` maps ``sft.demonstrator`` names to callables ``env -> action text``:

- ``"oracle"``: the env's own oracle (any env);
- ``"search_reader"``: Search (tool-call style): search the question verbatim, answer
  from the results if the answer is shown there, otherwise open a doc id the results
  show (the supporting one when listed), then answer from the page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["DEMONSTRATORS", "Demonstrator", "counterfactual", "demonstrator", "episode_slots", "search_reader"]

Demonstrator = Callable[[Any], str]
"""``(env) -> action text`` for the env's current episode state."""

_DOC_ID = re.compile(r"\[([\w.-]+)\]")


def _call(name: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


def oracle(env: Any) -> str:
    """The env's oracle (uses the hidden solution freely)."""
    return env.unwrapped.oracle_action()


def _visible_answer(question: Any, text: str) -> str | None:
    """The first gold answer (in the set's order) that the text shows verbatim."""
    lowered = text.casefold()
    return next((a for a in question.golden_answers if a and a.casefold() in lowered), None)


def search_reader(env: Any) -> str:
    """Search the question as asked; answer what the results show, else open and read.

    Every token written is in the prompt or an observation except when the answer was
    never shown (the top results and the opened page both lack it): then it answers the
    gold answer, which is rare (about 7% of 1-hop test questions) and keeps the episode a
    success so the demonstration stays a good one.
    """
    unwrapped = env.unwrapped
    question = unwrapped.task.question
    if getattr(unwrapped.parser, "name", "") == "tags":
        raise ValueError("search_reader writes tool calls; use sft.demonstrator=oracle with parser='tags'.")
    results = [r for r in unwrapped.last_results if r.status == "ok"]
    last = results[-1] if results else None
    if last is None:
        return _call("search", query=question.question)
    shown = _visible_answer(question, last.output)
    if shown is not None:
        span = last.output[last.output.casefold().index(shown.casefold()):][: len(shown)]
        return _call("answer", answer=span)
    if last.name == "search":
        ids = _DOC_ID.findall(last.output)
        gold = [d for d in ids if d in set(question.supporting_doc_ids)]
        if ids:
            return _call("open", doc_id=(gold or ids)[0])
    return _call("answer", answer=question.answer)


DEMONSTRATORS: dict[str, Demonstrator] = {"oracle": oracle, "search_reader": search_reader}


def demonstrator(name: str) -> Demonstrator:
    """The demonstrator registered as ``name`` (a clear error for an unknown one)."""
    try:
        return DEMONSTRATORS[name]
    except KeyError:
        raise ValueError(f"Expected sft.demonstrator to be one of {sorted(DEMONSTRATORS)}, actual value: {name!r}") from None


# ------------------------------------------------------------ counterfactual copies
Slots = tuple[str, dict[str, str]]
"""(kind, {slot: text as the episode shows it}): episodes of one kind can swap slots."""

_ANSWER_ARG = re.compile(r'"name": "answer", "arguments": \{"answer": (".*?"|[-\d.]+)\}')


def episode_slots(env: Any) -> Slots | None:
    """The swappable strings of the env's current (just played) Search episode: the
    entity the question names (its document's title, less a ``(city profile)``-style
    suffix) and the answer as written. None when the env is not Search or the question
    does not name the title."""
    task = getattr(env.unwrapped, "task", None)
    question = getattr(task, "question", None)
    if question is None or not hasattr(question, "supporting_doc_ids") or len(question.supporting_doc_ids) != 1:
        return None
    doc = env.unwrapped.dataset.corpus.get(question.supporting_doc_ids[0])
    entity = re.sub(r"\s*\([^)]*\)$", "", doc.title) if doc is not None else ""
    if not entity or entity not in question.question:
        return None
    kind = str(getattr(question, "template", "") or "").split(":")[0] or "any"
    return kind, {"entity": entity, "answer": question.answer}


def counterfactual(played: list[tuple], slots: list[Slots | None], n: int, seed: int = 0):
    """``n`` episodes that cannot be memorised: each copies a played episode with its
    entity and answer swapped, everywhere they occur (question, actions, results), for
    another episode's of the same kind ("When did Ernst Mach die?" ... "(1838-1924)"
    ... answer "1924"). A model that memorised "Ernst Mach -> 1916" is wrong on the
    copy; one that reads the result is right on both, so imitation rewards reading.

    Episodes whose answer the demonstrator never saw are not used (their swapped answer
    would be unreadable too). Yields ``(messages, tools, task_id, reward, success)``.
    """
    import random

    rng = random.Random(seed)
    by_kind: dict[str, list[int]] = {}
    for i, s in enumerate(slots):
        if s is not None and _shown(played[i][0], s[1]["answer"]):
            by_kind.setdefault(s[0], []).append(i)
    pool = [i for group in by_kind.values() if len(group) > 1 for i in group]
    if not pool:
        raise ValueError("Expected episodes with swappable slots (Search questions naming their document), actual: none")
    for _ in range(n):
        i = rng.choice(pool)
        kind, mine = slots[i]  # type: ignore[misc]
        j = rng.choice(by_kind[kind])
        theirs = slots[j][1]  # type: ignore[index]
        mapping = {mine[k]: theirs[k] for k in mine if mine[k] != theirs[k]}
        messages, tools, task_id, reward, success = played[i]
        yield [_swap(m, mapping) for m in messages], tools, f"{task_id}#cf{j}", reward, success


def _shown(messages: list[dict[str, Any]], answer: str) -> bool:
    seen = " ".join(m["content"] for m in messages if m["role"] not in ("assistant", "system"))
    return answer.casefold() in seen.casefold()


def _swap(message: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    if message["role"] == "system" or not mapping:
        return message
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(k)}(?!\w)" for k in sorted(mapping, key=len, reverse=True)), re.I)
    lower = {k.casefold(): v for k, v in mapping.items()}
    return {**message, "content": pattern.sub(lambda m: lower[m.group(0).casefold()], message["content"])}
