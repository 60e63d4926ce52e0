"""Policies that ship with the suite: the oracle (the first test of every env), a
random-text policy (a smoke test of robustness), and baselines that show what the tools
are worth, because a task a policy solves without its tools does not teach tool use:

* ``no_tool`` (Search): answers the most frequent training answer of the question's
  template, recognised from the wording alone; never searches.
* ``one_search`` (Search): searches the question text once and answers a span of the top
  result (a year for "what year" questions, else the first name the question does not
  already contain, or, for an "A or B" question, the option the result is about).
* ``regex_agent`` (Search): the scripted agent of ``agentgym.regex_agent``, one regex and
  one recipe of BM25 lookups per Search-v1 template, nothing learned; it shows how much of
  a question set a handful of recipes solves.
* ``no_code`` (DataAnalysis): answers from the file list (column names, row counts) and the
  question, without running code.

A policy maps ``(env, observation, info)`` to an action; it may be a coroutine function.
Baselines read only what an agent sees (the observation, the tool schemas) plus, for
``no_tool``, the training split's answers, as a trained model would have seen them.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from typing import Any, Awaitable, Callable, Union

import numpy as np

from agentgym.env import ToolEnv
from agentgym.errors import ConfigError

__all__ = ["Policy", "get_policy", "play_oracle", "no_code_policy", "no_tool_policy", "one_search_policy", "oracle_policy",
           "random_text_policy", "regex_agent_policy"]

Policy = Callable[[ToolEnv, str, dict[str, Any]], Union[str, Awaitable[str]]]


def oracle_policy(env: ToolEnv, observation: str, info: dict[str, Any]) -> str:
    """Solve the task through the tools from its hidden solution."""
    return env.get_wrapper_attr("oracle_action")()


def play_oracle(env: Any, max_steps: int) -> tuple[str, float, bool, bool, dict[str, Any]] | None:
    """Step ``env`` (already reset) with its oracle until the episode ends: the last
    step's ``(obs, reward, terminated, truncated, info)``, or None if it had not ended
    after ``max_steps`` steps."""
    base = env.unwrapped
    for _ in range(max_steps):
        step = env.step(base.oracle_action())
        if step[2] or step[3]:
            return step
    return None


def random_text_policy(env: ToolEnv, observation: str, info: dict[str, Any]) -> str:
    """Random Unicode text: exercises the format hints and the turn limit."""
    return env.action_space.sample()


def _answer_action(env: ToolEnv, answer: Any) -> str:
    if getattr(env.get_wrapper_attr("parser"), "name", "") == "tags":
        return f"<answer>{answer}</answer>"
    return _tool_call("answer", {"answer": answer})


def _tool_call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}</tool_call>"


def _question_text(observation: str) -> str | None:
    match = re.search(r"Question:\s*(.+?)\s*$", observation, re.S)
    return match.group(1).strip() if match else None


def _search_dataset(env: ToolEnv) -> Any:
    dataset = getattr(env.get_wrapper_attr("family"), "dataset", None)
    if dataset is None or not hasattr(dataset, "questions"):
        raise ConfigError("Expected an env with a question dataset (agentgym/Search-v1, SearchR1-v1) for this "
                          f"baseline, actual value: {type(env.unwrapped).__name__}")
    return dataset


_TRAIN_ANSWERS: dict[str, tuple[dict[str, str], str]] = {}


def _train_answers(dataset: Any) -> tuple[dict[str, str], str]:
    """Per template, the most frequent training answer; and the most frequent overall."""
    if dataset.version not in _TRAIN_ANSWERS:
        per_template: dict[str, Counter] = {}
        overall: Counter = Counter()
        for q in dataset.questions("train"):
            per_template.setdefault(q.template, Counter())[q.answer] += 1
            overall[q.answer] += 1
        _TRAIN_ANSWERS[dataset.version] = ({t: c.most_common(1)[0][0] for t, c in per_template.items()},
                                           overall.most_common(1)[0][0] if overall else "")
    return _TRAIN_ANSWERS[dataset.version]


def no_tool_policy(env: ToolEnv, observation: str, info: dict[str, Any]) -> str:
    """The most frequent training answer of the question's template (read from its wording)."""
    from tasks.search import match_template

    by_template, overall = _train_answers(_search_dataset(env))
    templates = match_template(_question_text(observation) or "")
    return _answer_action(env, by_template.get(templates[0], overall) if templates else overall)


_RESULT = re.compile(r"^\s*1\. \[(?P<doc>[^\]]+)\] (?P<title>.+)\n\s+(?P<text>.*)$", re.M)
_TAG_RESULT = re.compile(r"Doc 1\(Title: (?P<title>[^)]*(?:\([^)]*\))?[^)]*)\) (?P<text>.*)")
_NAME_SPAN = re.compile(r"[A-Z\u00C0-\u024F][\w'’.\-]*(?: (?:(?:of|and|the|de|da|del|la|le|van|von|es) )*"
                        r"[A-Z\u00C0-\u024F][\w'’.\-]*)*")
_PROFILE = re.compile(r"\s*\((?:city|country) profile\)$|\s*\([^)]*\)$")


# What a fact sheet says, by what the question asks for ("the capital of X is Y").
_FACTS = {
    "capital": re.compile(r"The capital of .+? is ([^.]+)\."),
    "currency": re.compile(r"The currency of .+? is the (.+?) \("),
    "language": re.compile(r"official language of .+? is ([^.]+)\."),
    "country": re.compile(r"is a city in ([^.]+)\.|borders ([^.]+)\."),
}


def _stated_fact(question: str, text: str) -> str:
    asked = next((k for k in ("capital", "currency", "language") if k in question.split("of", 1)[0]), None)
    if asked is None and re.search(r"\bwhich country\b|which has more people", question):
        asked = "country"
    if asked is None:
        return ""
    for match in _FACTS[asked].finditer(text):
        spans = [g for g in match.groups() if g]
        names = re.split(r", | and ", spans[0]) if asked == "country" else spans
        fresh = [n.strip() for n in names if n.strip() and n.strip().casefold() not in question]
        if fresh:
            return fresh[0]
    return ""


def top_result_span(question: str, title: str, text: str) -> str:
    """``one_search``'s answer: a span of the top result that fits the question's form.

    >>> top_result_span("In what year was Ada Lovelace born?", "Ada Lovelace", "English mathematician (1815–1852).")
    '1815'
    >>> top_result_span("In which country is the city of Graz?", "Graz (city profile)", "Graz is a city in Austria.")
    'Austria'
    """
    lowered = question.casefold()
    if re.match(r"(in )?what year|when\b", lowered):
        years = [y for y in re.findall(r"\b\d{3,4}\b", text) if y not in question]
        life = re.search(r"\((\d{3,4})\s*[–-]\s*(\d{3,4})\)", text)
        if life and re.search(r"\bdie\b|\bdied\b", lowered):
            return life.group(2)  # "(born–died)": the second year
        return years[0] if years else ""
    name = _PROFILE.sub("", title).strip()
    stated = _stated_fact(lowered, text)
    if stated:
        return stated
    candidates = [name, *_NAME_SPAN.findall(text)]
    options = re.search(r", (.+) or (.+)\?$", question)
    if options and name.casefold() in {o.strip().casefold() for o in options.groups()}:
        return name  # an "A or B" question: the option the result is about
    fresh = [c for c in candidates if c.casefold() not in lowered]
    return fresh[0] if fresh else name


def one_search_policy(env: ToolEnv, observation: str, info: dict[str, Any]) -> str:
    """Search the question text once; answer a span of the top result."""
    question = _question_text(observation)
    tags = getattr(env.get_wrapper_attr("parser"), "name", "") == "tags"
    if question is not None and "Results for" not in observation and "<information>" not in observation:
        return f"<search>{question}</search>" if tags else _tool_call("search", {"query": question})
    asked = re.search(r"Results for '(.*)':", observation)
    question = asked.group(1) if asked else (question or "")
    top = (_TAG_RESULT if tags else _RESULT).search(observation)
    if top is None:
        return _answer_action(env, "unknown")
    return _answer_action(env, top_result_span(question, top.group("title"), top.group("text")) or "unknown")


_SCRIPTED: dict[int, tuple[str, str]] = {}  # id(env.unwrapped) -> (task id, the answer its script found)


async def regex_agent_policy(env: ToolEnv, observation: str, info: dict[str, Any]) -> str:
    """Run the scripted regex agent's searches, show them through the search tool, then answer."""
    from agentgym.regex_agent import RegexAgent

    family = env.get_wrapper_attr("family")
    _search_dataset(env)
    key, task_id = id(env.unwrapped), info.get("task_id") or env.get_wrapper_attr("task").task_id
    if key in _SCRIPTED and _SCRIPTED[key][0] == task_id:
        return _answer_action(env, _SCRIPTED.pop(key)[1])

    async def search(query: str, k: int) -> list[str]:
        return [doc.contents for doc in (await family.retriever.search([query], k))[0]]

    agent = RegexAgent(search)
    answer = await agent.answer(_question_text(observation) or "")
    _SCRIPTED[key] = (task_id, answer)
    tags = getattr(env.get_wrapper_attr("parser"), "name", "") == "tags"
    if tags or not agent.queries:
        return f"<search>{(agent.queries or ['unknown'])[0]}</search>" if tags else _answer_action(env, answer)
    return "".join(_tool_call("search", {"query": q}) for q in agent.queries)


def _guess_field(spec: dict[str, Any], question: str, files: list[tuple[str, int, list[str]]]) -> Any:
    """A guess of one answer field (its JSON schema ``spec``) from what the prompt shows (no
    data read, no code run); a list field gets a list of one guess of its item."""
    kind = spec.get("type", "string")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    if kind == "array":
        return [_guess_field(spec.get("items", {}), question, files)]
    quoted = re.findall(r"'([^']+)'", question)
    columns = [c for _, _, cols in files for c in cols]
    if kind == "integer":
        named = [rows for name, rows, _ in files if name in question]
        return named[0] if named else (files[0][1] if files else 0)
    if kind == "number":
        return 0.0
    if kind == "boolean":
        return False
    in_question = [c for c in quoted if c in columns]
    return in_question[-1] if in_question else (columns[0] if columns else "")


def no_code_policy(env: ToolEnv, observation: str, info: dict[str, Any]) -> str:
    """Answer at once from the file list and the question: row counts, column names, zeros."""
    files = [(m[1], int(m[2]), [c.strip() for c in m[3].split(",")])
             for m in re.finditer(r"^- (\S+) \((\d+) rows\): (.*)$", observation, re.M)]
    question = _question_text(observation) or ""
    specs = info.get("tools") or [t.spec() for t in env.get_wrapper_attr("tools_for")(env.get_wrapper_attr("task")).values()]
    answer_tool = next((t for t in specs if t.get("function", t).get("name") == "answer"), None)
    if answer_tool is None:
        raise ConfigError("Expected the answer tool's schema in info['tools'] (a DataAnalysis env), actual tools: "
                          f"{[t.get('function', t).get('name') for t in info.get('tools', ())]}")
    properties = answer_tool.get("function", answer_tool).get("parameters", {}).get("properties", {})
    arguments = {}
    for field, spec in properties.items():
        arguments[field] = _guess_field(spec, question, files)
    return _tool_call("answer", arguments)


_POLICIES: dict[str, Policy] = {"oracle": oracle_policy, "random": random_text_policy, "no_tool": no_tool_policy,
                                "one_search": one_search_policy, "no_code": no_code_policy,
                                "regex_agent": regex_agent_policy}


def get_policy(name: str) -> Policy:
    try:
        return _POLICIES[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(_POLICIES), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"Expected a policy in {sorted(_POLICIES)}, actual value: {name!r}{hint}") from None


def seeded_rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed)
