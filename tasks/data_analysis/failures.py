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
(``read_csv('x.csv')``), most of its syntax errors on held-out tables."""

_EXCEPTION = re.compile(r"your code raised an exception: (\w+)")
_MISMATCHED = re.compile(r"your code raised an exception: SyntaxError: closing parenthesis .{3} does not match "
                         r"opening parenthesis")
_SANDBOX_FAILURES = ("ran past its time limit", "ran out of memory", "interpreter crashed")
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
    return "ran, answered wrong" if any(m.get("name") == "answer" for m in tools) else "ran, no answer"


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
