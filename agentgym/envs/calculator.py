"""Calculator-v0: arithmetic word problems solved with a ``calculate`` and an ``answer`` tool.

The test bed of the core and the first env the CPU baseline learns on: tasks are cheap,
the reward is exact, and the oracle is two turns long (calculate, then answer).
"""

from __future__ import annotations

import ast
import json
import operator
from typing import Any

import numpy as np

from agentgym.env import ToolEnv
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily
from agentgym.errors import AgentError, ConfigError
from agentgym.tools import Tool
from tasks.calculator import CalculatorTask, grade_numeric, make_task, parse_number, sample_task

__all__ = ["CalculatorEnv", "evaluate_arithmetic"]

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_UNOPS = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_EXPR_CHARS = 500
_MAX_ABS = 1e15


def evaluate_arithmetic(expression: str) -> float | int:
    """Evaluate ``+ - * / // % **`` and parentheses over numbers, nothing else.

    Raises ``AgentError`` with an instruction for anything else (names, calls, huge powers).

    >>> evaluate_arithmetic("(3 + 4) * 2")
    14
    """
    if len(expression) > _MAX_EXPR_CHARS:
        raise AgentError(f"the expression is {len(expression)} characters long; keep it under {_MAX_EXPR_CHARS}.")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise AgentError(f"{expression!r} is not an arithmetic expression; use numbers, + - * / ** and parentheses.") from None
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise AgentError("division by zero.") from None
    except RecursionError:
        raise AgentError("the expression is nested too deeply.") from None


def _eval(node: ast.AST) -> float | int:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
        return _UNOPS[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
            raise AgentError("that power is too large; exponents are limited to 64.")
        value = _BINOPS[type(node.op)](left, right)
        if isinstance(value, complex) or abs(value) > _MAX_ABS:
            raise AgentError("the result is out of range.")
        return value
    raise AgentError(f"{ast.dump(node)[:60]}… is not allowed; only numbers and + - * / // % ** ( ) are.")


def _format_number(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


class CalculatorFamily(TaskFamily):
    """Arithmetic word problems with exact answers: a ``calculate`` tool and ``answer``.

    Args:
        difficulty: 1 (one operation), 2 (two) or 3 (three, with parentheses).
    """

    name = "Calculator"

    def __init__(self, difficulty: int = 1) -> None:
        if difficulty not in (1, 2, 3):
            raise ConfigError(f"Expected difficulty 1, 2 or 3, actual value: {difficulty}")
        self.difficulty = difficulty

    def new_task(self, rng: np.random.Generator, split: str, options: dict[str, Any]) -> CalculatorTask:
        if "task_id" in options:
            try:
                _, d, seed = str(options["task_id"]).split("-")
                return make_task(int(seed), int(d.lstrip("d")))
            except ValueError:
                raise ConfigError(f"Expected a task_id like 'calc-d1-123', actual value: {options['task_id']!r}") from None
        return sample_task(rng, self.difficulty, split)  # type: ignore[arg-type]

    def tools(self, task: CalculatorTask | None) -> dict[str, Tool]:
        async def calculate(expression: str) -> str:
            return _format_number(evaluate_arithmetic(expression))

        async def answer(answer: float | str) -> str:
            if parse_number(answer) is None:
                raise AgentError(f"the answer must be a single number, got {str(answer)[:80]!r}.")
            return "Answer recorded."

        return {
            "calculate": Tool(
                "calculate", "Evaluate an arithmetic expression (+ - * / // % ** and parentheses) and return its value.",
                {"type": "object", "properties": {"expression": {"type": "string"}},
                 "required": ["expression"], "additionalProperties": False},
                calculate, max_output_chars=200, timeout_s=2.0),
            ANSWER_TOOL: Tool(
                ANSWER_TOOL, "Give the final answer (a single number). Ends the episode.",
                {"type": "object", "properties": {"answer": {"type": ["number", "string"]}},
                 "required": ["answer"], "additionalProperties": False},
                answer, max_output_chars=200, timeout_s=2.0),
        }

    def system_prompt(self) -> str:
        return ("Solve the arithmetic word problem. Use the calculate tool for arithmetic, then give the final "
                "number with the answer tool.")

    def prompt(self, task: CalculatorTask) -> str:
        return task.question

    def score(self, task: CalculatorTask, answer: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        reward = grade_numeric(answer.get("answer"), task.answer)
        return reward, {"exact_match": reward}

    def fingerprint_fields(self) -> dict[str, Any]:
        return {"difficulty": self.difficulty, "task_source": "tasks.calculator/v1"}

    def oracle_action(self, task: CalculatorTask, episode: EpisodeView) -> str:
        if episode.parser == "tags":
            return f"<answer>{task.answer}</answer>"
        calculated = [r for r in episode.results if r.name == "calculate" and r.status == "ok"]
        if not calculated:
            call = {"name": "calculate", "arguments": {"expression": task.expression}}
        else:
            call = {"name": ANSWER_TOOL, "arguments": {"answer": int(calculated[-1].output)}}
        return f"<tool_call>{json.dumps(call)}</tool_call>"


class CalculatorEnv(ToolEnv):
    """``ToolEnv(CalculatorFamily(difficulty))``, registered as ``agentgym/Calculator-v0``.

    Args:
        max_turns: steps before truncation (the oracle needs two).
        **kwargs: ``CalculatorFamily``'s (``difficulty``) and ``ToolEnv``'s (parser, split, ...).
    """

    family_class = CalculatorFamily

    def __init__(self, *, max_turns: int = 4, **kwargs: Any) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        self.family: CalculatorFamily

    @property
    def difficulty(self) -> int:
        return self.family.difficulty
