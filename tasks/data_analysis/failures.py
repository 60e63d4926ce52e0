"""Where a DataAnalysis agent fails: an eval run's episodes by what the first call did.

A success rate does not say what to fix. A model that never learned an operation (a
held-out template's median, say) needs more capacity or data. One that copies a
file or column name wrongly needs better copying. One that cannot recover after an
error needs to see errors followed by fixes. :func:`failure_report` sorts each
episode of a run file (``agentgym eval run agentgym/DataAnalysis-v2 ... --out F``) by
its first tool call, and then by whether a later call fixed it. It also splits
held-out templates from the split's other questions, whose templates are train
templates on held-out tables.

    python -m tasks.data_analysis.failures runs/eval/F.jsonl

The first call is the informative one: it is the agent's plan before any feedback.
Later calls are judged by whether any of them ran (``fixed``), and each turn by what
kind of call it was: unreadable later turns are a model that cannot recover.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from tasks.data_analysis.splits import HELD_TEMPLATES

__all__ = ["FIRST_CALL_OUTCOMES", "FailureReport", "first_call_outcome", "failure_report", "render_markdown",
           "read_episodes"]

FIRST_CALL_OUTCOMES: tuple[str, ...] = (
    "solved",
    "ran, a quoted name left out",
    "ran, answered other than it printed",
    "ran, answered wrong",
    "ran, no answer",
    "wrong file name",
    "wrong column or key",
    "mismatched bracket",
    "syntax error",
    "other exception",
    "timeout, memory or crash",
    "unreadable call",
    "answered without code",
    "no call",
)
"""The outcomes, in the order a report lists them.

``solved`` is the episode's own success, whatever its first call did. The others
describe failed episodes by their first tool call. ``mismatched bracket`` is a
``SyntaxError`` whose closing bracket is not the opener's kind (``df['yield').sum()``):
the tiny model's copy running on past a name into what followed a quote elsewhere
(``read_csv('x.csv')``), most of its syntax errors on held-out tables.

A first call that ran and was answered wrongly is split three ways, because two of
them are copies gone wrong rather than a wrong computation:

- ``ran, a quoted name left out``: the code does not quote every name the question
  quotes. ``value = 'cultivar'`` for the level ``'cultivar_1'`` of the column
  ``'cultivar'``: the copy followed the wrong one of two names that begin alike.
- ``ran, answered other than it printed``: the code printed one value and the answer
  gives another (``2188918891589787.0`` for a printed ``218891589787.0``), not a
  rounding of it.
- ``ran, answered wrong``: neither; the code computed the wrong thing (a held-out
  template's median answered as a sum)."""

_EXCEPTION = re.compile(r"your code raised an exception: (\w+)")
_MISMATCHED = re.compile(r"your code raised an exception: SyntaxError: closing parenthesis .{3} does not match "
                         r"opening parenthesis")
_SANDBOX_FAILURES = ("ran past its time limit", "ran out of memory", "interpreter crashed")
_QUOTED = re.compile(r"(?<!\w)'([^'\n]+)'(?!\w)")
"""A quoted name in a question: an apostrophe inside a word (``numpy's``, ``pandas'``)
neither opens nor closes one."""
_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
_BY_EXCEPTION = {"FileNotFoundError": "wrong file name", "KeyError": "wrong column or key",
                 "SyntaxError": "syntax error", "IndentationError": "syntax error"}


def _tool_messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in record.get("messages", []) if m.get("role") == "tool"]


def _python_failed(message: dict[str, Any]) -> bool:
    text = str(message.get("content", ""))
    return bool(_EXCEPTION.match(text)) or any(s in text for s in _SANDBOX_FAILURES)


def first_call_outcome(record: dict[str, Any]) -> str:
    """One of :data:`FIRST_CALL_OUTCOMES` for an episode record of an eval run file."""
    if record.get("success"):
        return "solved"
    tools = _tool_messages(record)
    if not tools:
        return "no call"
    first = tools[0]
    name, text = first.get("name"), str(first.get("content", ""))
    if name == "answer":
        return "answered without code"
    if name != "python":
        return "unreadable call"
    if any(s in text for s in _SANDBOX_FAILURES):
        return "timeout, memory or crash"
    if _MISMATCHED.match(text):
        return "mismatched bracket"
    raised = _EXCEPTION.match(text)
    if raised:
        return _BY_EXCEPTION.get(raised.group(1), "other exception")
    if not any(m.get("name") == "answer" for m in tools):
        return "ran, no answer"
    code = _first_python_code(record)
    if code is not None and any(f"'{n}'" not in code and f'"{n}"' not in code for n in _question_names(record)):
        return "ran, a quoted name left out"
    if _answered_other_than_printed(record, text):
        return "ran, answered other than it printed"
    return "ran, answered wrong"


def _question_names(record: dict[str, Any]) -> list[str]:
    """The names the question quotes (columns, text levels), not the answer's field names
    that the env's answer hint quotes after it (``Answer with 'value'``)."""
    users = [str(m.get("content", "")) for m in record.get("messages", []) if m.get("role") == "user"]
    if not users:
        return []
    question = users[0].split("Question:", 1)[-1].split(" Answer with ", 1)[0]
    fields = set((record.get("info") or {}).get("answer") or {})
    return [n for n in dict.fromkeys(_QUOTED.findall(question)) if n not in fields]


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A model turn's tool calls as ``{"name", "arguments"}``: native ``tool_calls``, or
    the text mode's ``<tool_call>`` JSON. A call that does not parse is left out."""
    calls: list[dict[str, Any]] = []
    for native in message.get("tool_calls") or ():
        function = native.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (TypeError, ValueError):
            continue
        calls.append({"name": function.get("name"), "arguments": arguments})
    for raw in _TOOL_CALL.findall(str(message.get("content") or "")):
        try:
            call = json.loads(raw)
        except ValueError:
            continue
        if isinstance(call, dict):
            calls.append(call)
    return calls


def _first_python_code(record: dict[str, Any]) -> str | None:
    for message in record.get("messages", []):
        if message.get("role") == "assistant":
            for call in _calls(message):
                arguments = call.get("arguments")
                if call.get("name") == "python" and isinstance(arguments, dict):
                    return str(arguments.get("code", ""))
    return None


def _answered_other_than_printed(record: dict[str, Any], printed_text: str) -> bool:
    """Whether a one-field answer differs from the one value the first call printed (a
    rounding of a printed number is the same value). False when either is not one value:
    nothing to compare."""
    answer = (record.get("info") or {}).get("answer")
    try:
        printed = json.loads(printed_text.strip())
    except ValueError:
        return False
    if not isinstance(answer, dict) or len(answer) != 1 or isinstance(printed, (dict, list)) or printed is None:
        return False
    given = next(iter(answer.values()))
    if isinstance(printed, str) or isinstance(given, str) or isinstance(printed, bool) or isinstance(given, bool):
        return str(given).strip() != str(printed).strip()
    if not isinstance(given, (int, float)):
        return True
    return not any(given == round(printed, digits) for digits in range(16)) and given != printed


def _fixed(record: dict[str, Any]) -> bool:
    """Whether a python call after a failed first call ran without an error."""
    python = [m for m in _tool_messages(record) if m.get("name") == "python"]
    return bool(python) and _python_failed(python[0]) and any(not _python_failed(m) for m in python[1:])


@dataclass
class FailureReport:
    """Counts of :data:`FIRST_CALL_OUTCOMES`, over all episodes and by template kind.

    ``held_out`` counts episodes whose template the split holds out. ``seen`` counts
    the others: on validation and test, train templates on held-out tables. ``fixed``
    counts episodes whose first python call failed and a later one ran."""

    split: str
    episodes: int = 0
    all: Counter = field(default_factory=Counter)
    held_out: Counter = field(default_factory=Counter)
    seen: Counter = field(default_factory=Counter)
    fixed: Counter = field(default_factory=Counter)
    turns: Counter = field(default_factory=Counter)
    """``(turn, kind)``: what each turn's call was, ``python``, ``answer`` or
    ``unreadable`` (turns counted from 1). A model that cannot recover writes unreadable
    later turns: its share of turn 2 and 3 says whether the extra turns are of any use."""


def failure_report(records: Iterable[dict[str, Any]], split: str) -> FailureReport:
    """Sort the finished episode records of one run (infra failures are left out: they
    are not the agent's) into a :class:`FailureReport`."""
    held = set(HELD_TEMPLATES.get(split, ()))
    report = FailureReport(split)
    for record in records:
        if record.get("infra_failed"):
            continue
        outcome = first_call_outcome(record)
        template = (record.get("info") or {}).get("template")
        report.episodes += 1
        report.all[outcome] += 1
        (report.held_out if template in held else report.seen)[outcome] += 1
        if _fixed(record):
            report.fixed[outcome] += 1
        for turn, message in enumerate(_tool_messages(record), start=1):
            name = message.get("name")
            report.turns[turn, name if name in ("python", "answer") else "unreadable"] += 1
    return report


def render_markdown(report: FailureReport) -> str:
    """The report as a Markdown table: count and share of each outcome, by template kind."""
    def cell(counter: Counter, outcome: str) -> str:
        total = sum(counter.values())
        return f"{counter[outcome]} ({counter[outcome] / total:.0%})" if total else "0"

    lines = [f"{report.episodes} episodes of the {report.split} split: "
             f"{sum(report.held_out.values())} on held-out templates, {sum(report.seen.values())} on others.",
             "", "| first call | episodes | held-out template | other | a later call ran |",
             "|---|---|---|---|---|"]
    for outcome in FIRST_CALL_OUTCOMES:
        if report.all[outcome]:
            lines.append(f"| {outcome} | {cell(report.all, outcome)} | {cell(report.held_out, outcome)} | "
                         f"{cell(report.seen, outcome)} | {report.fixed[outcome]} |")
    last = max((turn for turn, _ in report.turns), default=0)
    if last:
        lines += ["", "| turn | calls | python | answer | unreadable |", "|---|---|---|---|---|"]
        for turn in range(1, last + 1):
            kinds = Counter({kind: n for (t, kind), n in report.turns.items() if t == turn})
            lines.append(f"| {turn} | {sum(kinds.values())} | {cell(kinds, 'python')} | "
                         f"{cell(kinds, 'answer')} | {cell(kinds, 'unreadable')} |")
    return "\n".join(lines)


def read_episodes(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run file's header and its finished episodes, the last record of each (a resumed
    run may hold an episode twice). Read as plain JSON lines: ``tasks`` sits below
    ``agentgym`` and does not import it."""
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    if not lines or lines[0].get("kind") != "run":
        raise ValueError(f"Expected a run file of agentgym eval run (a header line first), actual: {path}")
    episodes = {int(r["episode"]): r for r in lines[1:] if r.get("kind") == "episode" and not r.get("infra_failed")}
    return lines[0], [episodes[i] for i in sorted(episodes)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.data_analysis.failures", description=__doc__.split("\n")[0])
    parser.add_argument("run_file", type=Path, help="a run file of agentgym eval run on DataAnalysis-v2")
    args = parser.parse_args(argv)
    header, records = read_episodes(args.run_file)
    if not str(header.get("env", "")).startswith("agentgym/DataAnalysis"):
        print(f"Expected a DataAnalysis run file, actual: {header.get('env')}", file=sys.stderr)
        return 2
    print(render_markdown(failure_report(records, str(header.get("env_kwargs", {}).get("split", "train")))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
