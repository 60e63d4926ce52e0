"""Who the SFT warm start imitates: the env's oracle, or a policy a model can imitate.

An env's oracle (``env.unwrapped.oracle_action()``) solves its task from the hidden
solution, which is what it is for: proving the task solvable. It is not always a good
teacher. Search's oracle searches a document's title *and opens its doc id in the same
turn*, before it has seen any result; a model cannot learn to write an id it has not
seen, so imitating that turn teaches it to make ids up (measured: the tiny model trained
on it for 800 steps solved 1 of 128 held-out 1-hop questions, docs/training.md).

A *demonstrator* is a policy whose every written token follows from what the episode
has shown so far (the question, the tool results); the hidden solution only decides
which of the visible options to take. Imitating it teaches copying and reading, which is
what RL then has to sharpen.

``DEMONSTRATORS`` maps ``sft.demonstrator`` names to callables ``env -> action text``:

- ``"oracle"``: the env's own oracle (any env);
- ``"search_reader"``: Search (tool-call style): search the question verbatim, answer
  from the results if the answer is shown there, otherwise open a doc id the results
  show (the supporting one when listed), then answer from the page.

:func:`recovering` wraps any of them (``sft.recovery``): in a fraction of episodes the
first ``python`` call is a mistake of the kind a small model makes, so the episode shows
the error and then the right call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DEMONSTRATORS", "Demonstrator", "counterfactual", "demonstrator", "episode_slots", "invented_name", "mistaken_call",
           "recovering", "search_reader"]

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
    gold answer (measured: 14 of 200 1-hop test questions), which keeps the episode a
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
        at = last.output.casefold().index(shown.casefold())
        return _call("answer", answer=_as_tokenised(last.output, at, len(shown)))
    if last.name == "search":
        ids = _DOC_ID.findall(last.output)
        support = set(question.supporting_doc_ids)
        gold = [d for d in ids if d in support]
        if ids:
            return _call("open", doc_id=(gold or ids)[0])
    return _call("answer", answer=question.answer)


def _as_tokenised(text: str, at: int, length: int) -> str:
    """``text[at:at + length]``, with the space in front when the text has one there and
    the span starts with a letter.

    A byte-level BPE (Qwen2's) joins a word to the space before it: "Tanzania" in "a
    city in Tanzania." is `` T|an|z|ania``, but as a JSON value, after a quote, it is
    ``T|an|z|ania``, a different first token. A small model copies a span by matching
    tokens (an induction head); across that respelling it cannot, and the tiny model
    answered a country it had memorised instead (0% on held-out country, capital and
    currency answers against 58% on years, whose digits are single tokens everywhere).
    With the space kept, the answer is the result's own tokens; graders strip it.
    """
    span = text[at:at + length]
    return " " + span if at > 0 and text[at - 1] == " " and span[:1].isalpha() else span


_LITERAL = re.compile(r"'([^'\\\n]*)'")
_ROLES = (("file", "read_csv("), ("column", "["))  # what comes just before a name of that role


def bind_names_first(code: str) -> str:
    """``code`` with each distinct quoted string bound once to a variable named for its
    role (``file``, ``column``, ``value``; ``column2`` for a second column), the
    bindings on their own lines after the imports, and the program using the variables.

    Why: in the oracle's code a name ends in whatever its context closes with,
    ``read_csv('tips.csv')`` or ``df['tip'].mean()``, and the tokenizer merges the
    closing quote with that bracket (``')``, ``'].``). After a held-out name the tiny
    model had to pick the closer matching an opener a name's length back, and most of
    its syntax errors were the wrong one (``df['yield').sum()``, docs/training.md).
    Bound first, every name ends in the same ``'`` and newline. The program is the
    same; code it cannot rewrite safely (double quotes, a backslash, a comment that may
    hold an apostrophe, prefixed strings, a role's name already in use) is returned
    unchanged.
    """
    literals = list(_LITERAL.finditer(code))
    prefixed = any(m.start() and (code[m.start() - 1].isalnum() or code[m.start() - 1] == "_") for m in literals)
    if not literals or prefixed or any(c in code for c in ('"', "\\", "#")):
        return code
    names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for m in literals:
        if m.group(0) in names:
            continue
        role = next((r for r, before in _ROLES if code.endswith(before, 0, m.start())), "value")
        counts[role] = counts.get(role, 0) + 1
        names[m.group(0)] = role if counts[role] == 1 else f"{role}{counts[role]}"
    outside = _LITERAL.sub("''", code)
    if any(re.search(rf"\b{v}\b", outside) for v in names.values()):
        return code
    body = _LITERAL.sub(lambda m: names[m.group(0)], code)
    lines = body.split("\n")
    at = next((i for i, line in enumerate(lines) if not line.startswith("import ")), len(lines))
    bindings = [f"{v} = {literal}" for literal, v in names.items()]
    return "\n".join(lines[:at] + bindings + lines[at:])


def names_first(env: Any) -> str:
    """The env's oracle, its code's names bound first (:func:`bind_names_first`)."""
    action = oracle(env)
    code = python_code(action)
    return action if code is None else _call("python", code=bind_names_first(code))


def python_code(action: str) -> str | None:
    """The code of ``action`` when it is exactly one ``python`` tool call, else None."""
    match = _CALL.fullmatch(action.strip())
    try:
        call = json.loads(match.group(1)) if match else None
    except json.JSONDecodeError:
        return None
    code = call.get("arguments", {}).get("code") if isinstance(call, dict) and call.get("name") == "python" else None
    return code if isinstance(code, str) else None


DEMONSTRATORS: dict[str, Demonstrator] = {"oracle": oracle, "search_reader": search_reader, "names_first": names_first}


def demonstrator(name: str) -> Demonstrator:
    """The demonstrator registered as ``name`` (a clear error for an unknown one)."""
    try:
        return DEMONSTRATORS[name]
    except KeyError:
        raise ValueError(f"Expected sft.demonstrator to be one of {sorted(DEMONSTRATORS)}, actual value: {name!r}") from None


# ------------------------------------------------------------ recovery from a mistake
_READ_CSV = re.compile(r"(?:read_csv\(|^file\d* = )(['\"])([^'\"]+)\1", re.M)  # names_first binds the file


MISTAKES: tuple[str, ...] = ("name", "cut", "short", "column")
"""The kinds of :func:`mistaken_call`; ``("name", "cut")`` are the original two."""

_COLUMN = re.compile(r"(?:\[|^column\d* = )(['\"])([^'\"]{2,})\1", re.M)  # df['x'], or names_first's binding


def _drop_one(name: str, rng: Any) -> str | None:
    """``name`` with an underscore dropped, else a letter after the first; None if too short."""
    spots = [i for i, ch in enumerate(name) if ch == "_"] or list(range(1, len(name)))
    if not spots:
        return None
    at = rng.choice(spots)
    return name[:at] + name[at + 1:]


def mistaken_call(action: str, rng: Any, kinds: Sequence[str] = ("name", "cut")) -> str | None:
    """``action`` (a ``python`` tool call) with one mistake of one of ``kinds`` that makes
    the code fail, or None when the action is not a ``python`` call they apply to.

    The mistakes are the tiny model's own, from 128 held-out DataAnalysis episodes
    (docs/training.md):

    - ``name``: a file name copied wrong (32: ``seattle_weather.csv`` written
      ``seattleweather.csv``; an underscore dropped, else a letter): ``FileNotFoundError``;
    - ``cut``: a garbled copy (42 syntax errors) is the code cut off after an opening
      bracket, which Python rejects before running anything;
    - ``short``: a file name cut short, its extension gone (names-first demonstrations'
      commonest held-out failure, 17 of 91: ``file = 'nile'`` for ``nile.csv``,
      ``'state'`` for ``statecrime.csv``): at an underscore, at a letter, or the whole stem;
    - ``column``: a column name with an underscore or a letter dropped: ``KeyError``
      (18% of first calls on made-up-name training questions were a wrong column).

    Each always fails, so the episode's next call is the demonstrator's right one. With
    the default ``kinds`` the draws are the original two kinds' (old runs replay).
    """
    code = python_code(action)
    if code is None:
        return None
    files = list(_READ_CSV.finditer(code))
    cuts = [i + 1 for i, ch in enumerate(code) if ch in "([" and i > (files[-1].end() if files else 0)]
    columns = [m for m in _COLUMN.finditer(code) if "." not in m.group(2)] if "column" in kinds else []
    available = {"name": files, "cut": cuts, "short": files, "column": columns}
    unknown = sorted(set(kinds) - set(available))
    if unknown:
        raise ValueError(f"Expected mistake kinds among {MISTAKES}, actual value: {unknown}")
    choices = [k for k in kinds if available[k]]
    if not choices:
        return None
    kind = rng.choice(choices)
    if kind == "cut":
        return _call("python", code=code[:rng.choice(cuts)])
    found = rng.choice(files if kind in ("name", "short") else columns)
    name = found.group(2)
    if kind == "short":
        stem = name.rpartition(".")[0] or name
        ends = [len(stem)] + [i for i, ch in enumerate(stem) if ch == "_"] + ([rng.randrange(2, len(stem))] if len(stem) > 3 else [])
        garbled: str | None = stem[:rng.choice(ends)]
    elif kind == "name":
        stem, dot, ext = name.rpartition(".")
        stem = stem or ext  # a name without an extension
        dropped = _drop_one(stem, rng)
        garbled = None if dropped is None else dropped + (dot + ext if dot else "")
    else:
        garbled = _drop_one(name, rng)
    if garbled is None or garbled == name:
        return None
    return _call("python", code=code[:found.start(2)] + garbled + code[found.end(2):])


def recovering(policy: Demonstrator, fraction: float, seed: int = 0, retry_turns: int = 3,
               mistakes: Sequence[str] = ("name", "cut")) -> Demonstrator:
    """``policy``, except that in ``fraction`` of episodes its first call is
    :func:`mistaken_call`'s: the episode shows the error, then ``policy``'s right call.

    Why: the oracle never errs, so a model imitating it has never seen an error
    followed by a fix. Measured on the tiny DataAnalysis model, after one failed call it
    wrote no further valid call, and each of its remaining turns was lost. Which
    episodes err is drawn from the question and ``seed`` (reproducible); an episode is
    left alone when the env allows fewer than ``retry_turns`` steps (mistake, fix,
    answer), so every demonstration still ends in a success. ``mistakes``: the kinds
    :func:`mistaken_call` draws from.
    """
    import random

    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"Expected a recovery fraction in [0, 1], actual value: {fraction}")

    def act(env: Any) -> str:
        action = policy(env)
        if fraction == 0.0:
            return action
        unwrapped = env.unwrapped
        first = not any(m.get("role") == "assistant" for m in unwrapped.transcript)
        if not first or getattr(unwrapped, "max_turns", retry_turns) < retry_turns:
            return action
        question = getattr(unwrapped.task, "question", unwrapped.task)
        rng = random.Random(f"{seed}|{getattr(question, 'text', None) or repr(question)}")
        if rng.random() >= fraction:
            return action
        return mistaken_call(action, rng, mistakes) or action

    return act


# ------------------------------------------------------------ counterfactual copies
Slots = tuple[str, dict[str, str]]
"""(kind, {slot: text as the episode shows it}): episodes of one kind can swap slots."""

_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


def episode_slots(env: Any, messages: list[dict[str, Any]]) -> Slots | None:
    """The swappable strings of the episode just played on ``env`` (``messages``).

    - ``answer``: the final answer call's value, when a tool result showed it (Search's
      year or country read from a snippet; DataAnalysis's printed value);
    - ``entity`` (Search): what the question names, its document's title less a
      ``(city profile)``-style suffix;
    - ``name:<i>`` (DataAnalysis): a quoted column or value, or a file's stem; only
      ever replaced by a made-up name (``invent``), never by another episode's.

    The kind is the question's template (Search) or the answer's shape (a whole number,
    a decimal, text), so a swap keeps a year a year. None when nothing can be swapped.
    """
    slots: dict[str, str] = {}
    answer = _final_answer(messages)
    answer = answer.strip() if answer is not None else None  # (search_reader keeps a word's space)
    if answer is not None and _shown(messages, answer):
        slots["answer"] = answer
    question = getattr(getattr(env.unwrapped, "task", None), "question", None)
    docs = getattr(question, "supporting_doc_ids", ())
    if len(docs) == 1 and hasattr(env.unwrapped, "dataset"):
        doc = env.unwrapped.dataset.corpus.get(docs[0])
        entity = re.sub(r"\s*\([^)]*\)$", "", doc.title) if doc is not None else ""
        if entity and entity in question.question:
            slots["entity"] = entity
    if not slots:
        return None
    slots.update(_quoted_names(question, messages))
    template = str(getattr(question, "template", "") or "")
    shape = "int" if re.fullmatch(r"-?\d+", answer or "") else "decimal" if re.fullmatch(r"-?\d+\.\d*", answer or "") else "text"
    return f"{template}|{shape}|{','.join(sorted(k for k in slots if not k.startswith('name:')))}", slots


def _quoted_names(question: Any, messages: list[dict[str, Any]]) -> dict[str, str]:
    """DataAnalysis: the names a question quotes (columns, category values) and its
    files' stems, as ``name:<i>`` slots that only :func:`invented_name` replaces.

    A name is left out when it has no letter, is an answer field ("value"), or shares a
    word with the question's own wording or the code's (a column called ``sum`` or
    ``n``): replacing it would rewrite the template or break the program.
    """
    text, files = getattr(question, "text", None), getattr(question, "file_info", ())
    if not isinstance(text, str):
        return {}
    schema = getattr(question, "schema", None)
    fields = {"value", *getattr(schema, "fields", ())}
    unquoted = re.sub(r"'[^']*'", " ", text + " " + " ".join(m["content"] for m in messages if m["role"] == "assistant"))
    for f in files:  # "In sunspots.csv, ...": a file's name is a name, not wording
        unquoted = unquoted.replace(f.name, " ")
    reserved = {w.casefold() for w in re.findall(r"\w+", unquoted)}
    names = [*re.findall(r"'([^']+)'", text), *(f.name.rsplit(".", 1)[0] for f in files)]
    keep = [n for n in dict.fromkeys(names) if n not in fields and re.search(r"[^\W\d_]", n)
            and not any(w.casefold() in reserved for w in re.findall(r"\w+", n))]
    return {f"name:{i}": n for i, n in enumerate(keep)}


def _final_answer(messages: list[dict[str, Any]]) -> str | None:
    """The value of the last assistant turn's ``answer`` call, as text (one argument)."""
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    for raw in _CALL.findall(last["content"] if last else ""):
        try:
            call = json.loads(raw)
        except json.JSONDecodeError:
            continue
        values = list(call.get("arguments", {}).values()) if call.get("name") == "answer" else []
        if len(values) == 1 and isinstance(values[0], (str, int, float)) and not isinstance(values[0], bool):
            return str(values[0])
    return None


def invented_name(like: str, rng: Any, pieces: Sequence[str] = ()) -> str:
    """A made-up name shaped like ``like`` (as many words, each about as long), built
    from random syllables: no model has seen it, so only copying reproduces it.

    Swapping in another training episode's entity still leaves a model a fixed set of
    names to memorise; measured on the tiny model, its held-out failures were mostly a
    garbled copy of an unseen name into the query ("James Prescott Joule" searched as
    "James ... Berdikald"), so copying an arbitrary name is the skill to teach.

    A word with inner structure (an underscore, digits, capitals after its first letter)
    keeps it (:func:`tasks.data_analysis.names.made_up_name`): trained only on smooth
    made-up words, the DataAnalysis model copied ``seattle_weather.csv`` as
    ``seattleweather.csv``. Plain words draw as before, so Search's copies are unchanged.

    ``pieces`` (lowercase words): spell each word with random ones of them instead of
    syllables. Syllables (onset, vowel, coda) never hold ``ps``, ``x`` or ``qu``, so a
    tokenizer's pieces for such letters never occur in a syllable name, and the tiny
    model garbled exactly those in held-out names (``tips.csv`` -> ``tiokes.csv``);
    spelling with the tokenizer's own pieces puts every one of them into some name.
    """
    import numpy as np

    from tasks.data_analysis.names import ONSETS, VOWELS, made_up_name, made_up_word, piece_speller

    onsets, vowels = list(ONSETS), list(VOWELS)
    spell = piece_speller(pieces) if pieces else made_up_word  # once: it checks every piece
    words = []
    for word in like.split() or ["x"]:
        if not word[:1].isalpha() or len(word) <= 2:  # "W.", "de", "of": keep as written
            words.append(word)
            continue
        if re.search(r"[_\d]|.[A-Z]", word):  # seattle_weather, TEMP_MIN, gdpPercap: keep the shape
            words.append(made_up_name(word, np.random.default_rng(rng.getrandbits(64)), spell))
            continue
        out = ""
        while len(out) < max(3, len(word) + rng.randint(-2, 2)):
            out += (rng.choice(pieces) if pieces else
                    rng.choice(onsets) + rng.choice(vowels) + (rng.choice("nrlsmtk") if rng.random() < 0.3 else ""))
        words.append(out[:1].upper() + out[1:] if word[0].isupper() else out)
    return " ".join(words)


def counterfactual(played: list[tuple], slots: list[Slots | None], n: int, seed: int = 0, invent: float = 0.0,
                   pieces: Sequence[str] = (), spelled: float = 0.0):
    """``n`` episodes that cannot be memorised: each copies a played episode with its
    slots swapped for another episode's of the same kind, everywhere they occur ("When
    did Ernst Mach die?" ... "(1838-1924)" ... answer "1924"). A model that memorised
    "Ernst Mach -> 1916" is wrong on the copy; one that copies what it read is right on
    both, so imitation rewards reading. The answer is swapped only after the task's
    prompt (a DataAnalysis question's numbers are left alone). With probability
    ``invent`` a copy's entity becomes a made-up name (:func:`invented_name`) instead of
    the other episode's, so even the set of names cannot be memorised (DataAnalysis: its
    quoted columns, values and file stems are renamed, so held-out tables read like
    training ones). A made-up name is spelled with random ``pieces`` (a tokenizer's
    lowercase tokens) with probability ``spelled`` (:func:`invented_name`).
    Yields ``(messages, tools, task_id, reward, success)``.
    """
    import random

    rng = random.Random(seed)
    by_kind: dict[str, list[int]] = {}
    for i, s in enumerate(slots):
        if s is not None:
            by_kind.setdefault(s[0], []).append(i)
    pool = [i for group in by_kind.values() if len(group) > 1 for i in group]
    if not pool:
        raise ValueError("Expected episodes whose answer a tool result showed (or a Search entity), two of a kind; "
                         "actual: none (sft.counterfactual needs them)")
    for _ in range(n):
        i = rng.choice(pool)
        kind, mine = slots[i]  # type: ignore[misc]
        j = rng.choice(by_kind[kind])
        theirs = slots[j][1]  # type: ignore[index]
        mapping = {mine[k]: theirs[k] for k in mine if not k.startswith("name:") and mine[k] != theirs[k]}
        names = [k for k in mine if k == "entity" or k.startswith("name:")]
        if names and rng.random() < invent:  # (no draw without a name: the copies of a seed stay the same)
            spell = pieces if pieces and spelled > 0 and rng.random() < spelled else ()  # (no draw when off: old runs replay)
            mapping.update({mine[k]: invented_name(mine[k], rng, spell) for k in names})
        messages, tools, task_id, reward, success = played[i]
        first = next(k for k, m in enumerate(messages) if m["role"] == "assistant")
        prompt_mapping = {a: b for a, b in mapping.items() if a != mine.get("answer")}
        in_prompt, after = _swapper(prompt_mapping), _swapper(mapping)
        swapped = [(in_prompt if k < first else after)(m) for k, m in enumerate(messages)]
        yield swapped, tools, f"{task_id}#cf{j}", reward, success


def _shown(messages: list[dict[str, Any]], answer: str) -> bool:
    first = next((k for k, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
    seen = " ".join(m["content"] for m in messages[first:] if m["role"] != "assistant")
    return answer.casefold() in seen.casefold()


def _swapper(mapping: dict[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A message -> message function replacing every key of ``mapping`` (whole words,
    any case) by its value in one pass, so a value is never replaced again; the system
    prompt is left alone. The pattern is compiled once per episode, not per message."""
    if not mapping:
        return lambda message: message
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(k)}(?!\w)" for k in sorted(mapping, key=len, reverse=True)), re.I)
    lower = {k.casefold(): v for k, v in mapping.items()}

    def swap(message: dict[str, Any]) -> dict[str, Any]:
        if message["role"] == "system":
            return message
        return {**message, "content": pattern.sub(lambda m: lower[m.group(0).casefold()], message["content"])}

    return swap
