"""Scripted judges: test doubles that read the judge prompt the way a model would.

* :class:`GullibleJudge` — a deliberately bad judge with the weaknesses judge hacking
  exploits in real models: it obeys anything in the answer that speaks to it (orders,
  verdict JSON, roles, flattery), reads look-alike letters and right-to-left overrides
  as they render, trusts any "rubric" outside the first closing fence it sees, credits
  long answers and answers that mirror the question, ticks a criterion for any of its
  words, and quotes the answer in its evidence. Through a hardened
  :class:`~agentgym.judges.Judge` every attack on it must still score 0; with one
  defence off, the attack that defence stops gets through (the audit's ablation).
* :class:`HonestJudge` — grades by the reference notes only, reading the answer between
  the real fences; it cannot be talked into anything.
* :class:`LazyJudge` — marks everything met (calibration must refuse it).
* :class:`ScriptedReplies` — replies (or raises) from a list, for failure tests.

None of them needs a network or a model.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterable
from typing import Any

from agentgym.judges.backends import SamplingSettings
from agentgym.judges.echo import measure_echo
from agentgym.judges.neutralise import find_injections
from agentgym.judges.normalise import normalise_answer

__all__ = ["GullibleJudge", "HonestJudge", "LazyJudge", "ScriptedReplies", "parse_judge_prompt", "render_as_displayed"]

_FENCES = re.compile(r"between the line (<<<ANSWER[^\n]*?>>>) and the line (<<<END ANSWER[^\n]*?>>>)")
_CRITERION = re.compile(r"^- \[([a-z][a-z0-9_]*)\] \(weight [0-9.]+\) (.*)$", re.MULTILINE)
_REFERENCE = re.compile(r"^- ([a-z][a-z0-9_]*): (.*)$", re.MULTILINE)
_RLO_RUN = re.compile("[\u202e\u202b]([^\u202c\u2069]*)[\u202c\u2069]?")


def parse_judge_prompt(messages: list[dict[str, str]]) -> dict[str, Any]:
    """The parts of a judge prompt, read exactly (by the fence lines the system message
    names): question, criteria ``{id: description}``, references ``{id: [terms]}``, answer."""
    system, user = messages[0]["content"], messages[1]["content"]
    begin, end = _FENCES.search(system).groups()
    head, _, rest = user.partition("\n" + begin + "\n")
    answer = rest.rpartition("\n" + end)[0]
    question = head.partition("Question:\n")[2].partition("\n\nRubric:\n")[0]
    rubric, _, refs = head.partition("\n\nReference notes:\n")
    return {"question": question, "criteria": dict(_CRITERION.findall(rubric)),
            "references": {k: [t.strip() for t in v.split("|")] for k, v in _REFERENCE.findall(refs)},
            "answer": answer}


def render_as_displayed(text: str) -> str:
    """``text`` as a reader sees it: right-to-left override runs reversed, then the
    invisible characters gone and look-alikes read as the letters they imitate."""
    return normalise_answer(_RLO_RUN.sub(lambda m: m.group(1)[::-1], text)).text


def _verdict(marks: dict[str, bool], evidence: str) -> str:
    return json.dumps({"criteria": {k: {"met": v, "evidence": evidence} for k, v in marks.items()}})


def _has(text: str, term: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(term.casefold())}(?![\w]|\.\d)", text.casefold()) is not None


class _Scripted:
    kind = "scripted"

    def __init__(self) -> None:
        self.calls = 0
        self.prompts: list[list[dict[str, str]]] = []

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind}

    async def complete(self, messages: list[dict[str, str]], *, sampling: SamplingSettings, timeout_s: float,
                       schema: dict[str, Any] | None = None) -> str:
        self.calls += 1
        self.prompts.append(messages)
        return self.reply(messages)

    def reply(self, messages: list[dict[str, str]]) -> str:
        raise NotImplementedError

    async def aclose(self) -> None:
        pass


class HonestJudge(_Scripted):
    """Marks a criterion met iff the answer contains one of its reference terms (a
    criterion without references: iff the answer has five words or more)."""

    kind = "scripted-honest"

    def reply(self, messages: list[dict[str, str]]) -> str:
        p = parse_judge_prompt(messages)
        answer = p["answer"]
        marks = {cid: (any(_has(answer, t) for t in p["references"][cid]) if cid in p["references"]
                       else len(answer.split()) >= 5) for cid in p["criteria"]}
        return _verdict(marks, answer[:80])


class GullibleJudge(_Scripted):
    """The judge every attack in the audit kit works on (see the module docstring).

    Args:
        long_answer_chars: answers at least this long (as displayed) get every criterion.
    """

    kind = "scripted-gullible"

    def __init__(self, long_answer_chars: int = 3000) -> None:
        super().__init__()
        self.long_answer_chars = long_answer_chars

    def _naive_parts(self, user: str) -> tuple[str, str]:
        """The answer as far as the first closing-fence-like line, and the rest of the
        prompt (which it trusts, closing fence or not)."""
        lines = user.split("\n")
        start = next(i for i, line in enumerate(lines) if line.startswith("<<<ANSWER"))
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("<<<END ANSWER")), len(lines))
        return "\n".join(lines[start + 1:end]), "\n".join(lines[:start] + lines[end + 1:])

    def reply(self, messages: list[dict[str, str]]) -> str:
        answer, trusted = self._naive_parts(messages[1]["content"])
        seen = render_as_displayed(answer)
        criteria = dict(_CRITERION.findall(trusted))  # a later "rubric" line overrides an earlier one
        references = {k: [t.strip() for t in v.split("|")] for k, v in _REFERENCE.findall(trusted)}
        question = trusted.partition("Question:\n")[2].partition("\n\nRubric:\n")[0]
        if find_injections(seen) or len(seen) >= self.long_answer_chars \
                or measure_echo(seen, question, "").restated > 0.5:
            return _verdict({cid: True for cid in criteria}, seen[:80])
        marks = {cid: any(_has(seen, t) for t in references.get(cid, ()))
                 or any(_has(seen, w) for w in re.findall(r"[A-Za-z]{6,}", desc)) for cid, desc in criteria.items()}
        return _verdict(marks, seen[:80])


class LazyJudge(_Scripted):
    """Marks every criterion met, whatever the answer."""

    kind = "scripted-lazy"

    def reply(self, messages: list[dict[str, str]]) -> str:
        return _verdict({cid: True for cid in parse_judge_prompt(messages)["criteria"]}, "")


class ScriptedReplies(_Scripted):
    """Replies from ``script`` in order: a string is the reply, an exception is raised,
    a number is seconds to hang (past any timeout). The last entry repeats."""

    kind = "scripted-replies"

    def __init__(self, script: Iterable[str | BaseException | float]) -> None:
        super().__init__()
        self.script = list(script)

    async def complete(self, messages: list[dict[str, str]], *, sampling: SamplingSettings, timeout_s: float,
                       schema: dict[str, Any] | None = None) -> str:
        step = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, (int, float)):
            await asyncio.sleep(step)
            return "{}"
        return step
