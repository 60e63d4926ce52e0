"""The failure report sorts real DataAnalysis-v2 episodes (eval run files, process sandbox)
by what their first call did, and by held-out template."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import pytest

import agentgym  # noqa: F401  (registers the env ids)
from agentgym.evaluation.agents import PolicyAgent
from agentgym.evaluation.run import EvalPlan, run_eval
from tasks.data_analysis.failures import FIRST_CALL_OUTCOMES, failure_report, first_call_outcome, main, render_markdown
from tasks.data_analysis.splits import HELD_TEMPLATES

ENV_ID = "agentgym/DataAnalysis-v2"


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def _python(code: str) -> str:
    return _call("python", {"code": code})


def _oracle_code(env: Any) -> str:
    return env.get_wrapper_attr("task").question.oracle_code()


def _file(env: Any) -> str:
    return re.search(r"read_csv\('([^']+)'\)", _oracle_code(env)).group(1)


FirstCall = Callable[[Any], str]

WRONG = -987654
"""What a failing policy prints or answers: no tier-1 question's truth."""


def _printing_wrong(env: Any) -> str:
    """The oracle's code, every quoted name in it, printing :data:`WRONG` in place of its result."""
    code = _oracle_code(env)
    assert code.endswith("print(_json.dumps(result))\n")
    return _python(code.replace("print(_json.dumps(result))", f"print(_json.dumps({WRONG}))"))


FIRST_CALLS: dict[str, FirstCall] = {
    "wrong file name": lambda env: _python(_oracle_code(env).replace(_file(env), "no_such_table.csv")),
    "wrong column or key": lambda env: _python(f"import pandas as pd\nprint(pd.read_csv('{_file(env)}')['no_such_column'])"),
    # the tiny model's commonest syntax error: a copy that runs past the name (df['yield').sum())
    "mismatched bracket": lambda env: _python(f"import pandas as pd\ndf = pd.read_csv('{_file(env)}')\nprint(df['x').sum())"),
    "syntax error": lambda env: _python("import pandas as pd\ndf = pd.read_csv("),
    "other exception": lambda env: _python("1 / 0"),
    "timeout, memory or crash": lambda env: _python("while True:\n    pass"),
    "unreadable call": lambda env: "<tool_call>{\"name\": \"python\", \"arguments\": </tool_call>",
    "answered without code": lambda env: _call("answer", {"value": "no idea"}),
    # the three ways a call that ran is answered wrongly (the later turn answers WRONG)
    "ran, a quoted name left out": lambda env: _python(f"print({WRONG})"),
    "ran, answered other than it printed": lambda env: _python(_oracle_code(env)),
    "ran, answered wrong": _printing_wrong,
}


def _policy(first: FirstCall, then: str) -> Callable[[Any, str, dict[str, Any]], str]:
    """First turn: ``first``; later turns: the oracle (``then="oracle"``) or a wrong answer."""
    def act(env: Any, observation: str, info: dict[str, Any]) -> str:
        if info.get("turn", 0) == 0:
            return first(env)
        if then == "oracle":
            return env.get_wrapper_attr("oracle_action")()
        return _call("answer", {"value": WRONG})
    return act


def _records(first: FirstCall, then: str = "wrong", tasks: int = 2, **kwargs: Any) -> list[dict[str, Any]]:
    env_kwargs = {"backend": "process", "tier": 1, "max_turns": 3, "python_timeout_s": 2.0, **kwargs}
    result = run_eval(EvalPlan(ENV_ID, tasks=tasks, concurrency=tasks, env_kwargs=env_kwargs),
                      PolicyAgent("scripted", _policy(first, then)))
    assert len(result.records) == tasks and not result.lost
    return result.records


@pytest.mark.parametrize("outcome", list(FIRST_CALLS))
def test_each_first_call_is_named_by_what_it_did(outcome):
    records = _records(FIRST_CALLS[outcome])
    assert [first_call_outcome(r) for r in records] == [outcome] * len(records)
    assert not any(r["success"] for r in records)


def test_a_first_call_that_ran_with_no_answer_after_it():
    records = _records(FIRST_CALLS["ran, answered wrong"], max_turns=1)
    assert [first_call_outcome(r) for r in records] == ["ran, no answer"] * 2


def test_a_plain_text_turn_is_not_a_call():
    records = _records(lambda env: "I think the answer is 4.", max_turns=1)
    assert {first_call_outcome(r) for r in records} <= {"no call", "unreadable call"}


def test_a_solved_episode_counts_as_solved_and_as_fixed_when_its_first_call_failed():
    report = failure_report(_records(FIRST_CALLS["wrong file name"], then="oracle"), "train")
    assert report.all == {"solved": 2} and report.fixed == {"solved": 2}
    clean = failure_report(_records(lambda env: env.get_wrapper_attr("oracle_action")(), then="oracle"), "train")
    assert clean.all == {"solved": 2} and not clean.fixed


def test_held_out_templates_are_counted_apart():
    held = HELD_TEMPLATES["test"]
    template = next(t for t in ("v2_median", "t1_missing") if t in held)
    records = _records(FIRST_CALLS["syntax error"], split="test", template=template)
    report = failure_report(records, "test")
    assert report.held_out == {"syntax error": 2} and not report.seen
    other = failure_report(_records(FIRST_CALLS["syntax error"], split="test", template="v2_mean"), "test")
    assert other.seen == {"syntax error": 2} and not other.held_out


def test_infra_failed_episodes_are_left_out():
    records = _records(FIRST_CALLS["syntax error"])
    records[0] = {**records[0], "infra_failed": True}
    assert failure_report(records, "train").episodes == 1


def test_the_command_prints_a_table_of_a_run_file(tmp_path, capsys):
    out = tmp_path / "run.jsonl"
    run_eval(EvalPlan(ENV_ID, tasks=2, concurrency=2, env_kwargs={"backend": "process", "tier": 1, "split": "test"}),
             PolicyAgent("scripted", _policy(FIRST_CALLS["wrong file name"], "wrong")), out=out)
    assert main([str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2 episodes of the test split" in printed
    assert re.search(r"\| wrong file name \| 2 \(100%\) \|", printed)


def test_each_turn_is_counted_by_the_kind_of_call_it_made():
    records = _records(FIRST_CALLS["unreadable call"], then="oracle")  # unreadable, python, answer
    report = failure_report(records, "train")
    assert report.turns == {(1, "unreadable"): 2, (2, "python"): 2, (3, "answer"): 2}
    table = render_markdown(report)
    assert "| 1 | 2 | 0 (0%) | 0 (0%) | 2 (100%) |" in table
    assert "| 3 | 2 | 0 (0%) | 2 (100%) | 0 (0%) |" in table


def test_every_outcome_has_a_row_in_the_rendering_order():
    report = failure_report([], "test")
    for k, outcome in enumerate(FIRST_CALL_OUTCOMES):
        report.all[outcome] = k + 1
        report.seen[outcome] = k + 1
    table = render_markdown(report)
    rows = [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[4:]]
    assert rows == list(FIRST_CALL_OUTCOMES)


def test_a_file_that_is_not_a_run_file_is_refused(tmp_path):
    bad = tmp_path / "notes.jsonl"
    bad.write_text('{"kind": "episode", "episode": 0}\n')
    with pytest.raises(ValueError, match="header line first"):
        main([str(bad)])


def _ran_and_answered(question: str, code: str, printed: str, answer: dict[str, Any], native: bool = False) -> dict[str, Any]:
    """An episode record in the shape ``agentgym eval run`` writes: one python call that
    ran, then an answer that scored 0."""
    call = {"name": "python", "arguments": {"code": code}}
    turn = ({"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "python", "arguments": json.dumps(call["arguments"])}}]}
            if native else {"role": "assistant", "content": f"<tool_call>{json.dumps(call)}</tool_call>"})
    return {"success": False, "info": {"template": "v2_count_level", "answer": answer},
            "messages": [{"role": "system", "content": "You are a data analyst."},
                         {"role": "user", "content": f"Files: x.csv\n\nQuestion: {question}"}, turn,
                         {"role": "tool", "name": "python", "content": printed},
                         {"role": "assistant", "content": _call("answer", answer)},
                         {"role": "tool", "name": "answer", "content": "ok"}]}


@pytest.mark.parametrize("native", [False, True])
def test_a_level_copied_as_its_column_is_a_quoted_name_left_out(native):
    """The tiny model's commonest wrong answer on wine: the level 'cultivar_1' written as
    'cultivar', the column's name that begins it. The answer field the env's hint quotes
    is not a name the code must hold."""
    question = "In wine.csv, how many rows have 'cultivar' equal to 'cultivar_1'? Answer with 'value' (an integer)."
    left_out = _ran_and_answered(question, "column = 'cultivar'\nvalue = 'cultivar'\nprint(0)", "0", {"value": 0}, native)
    assert first_call_outcome(left_out) == "ran, a quoted name left out"
    both = _ran_and_answered(question, 'df = x[x["cultivar"] == "cultivar_1"]\nprint(3)', "3", {"value": 3}, native)
    assert first_call_outcome(both) == "ran, answered wrong"


def test_an_apostrophe_inside_a_word_does_not_quote_a_name():
    question = ("In x.csv, what is the 90th percentile of 'alcohol' (linear interpolation, numpy's and pandas' "
                "default)? Answer with 'value' (a number rounded to 2 decimal places).")
    record = _ran_and_answered(question, "c = 'alcohol'\nprint(1.5)", "1.5", {"value": 1.5})
    assert first_call_outcome(record) == "ran, answered wrong"


@pytest.mark.parametrize(("printed", "answer", "outcome"), [
    ("218891589787.0", 2188918891589787.0, "ran, answered other than it printed"),  # digits copied twice
    ("11.1", 11.11, "ran, answered other than it printed"),
    ("3.14159", 3.14, "ran, answered wrong"),  # rounded as the question asks: the value it printed
    ("7", 7, "ran, answered wrong"),
    ('"sun"', "sun 6", "ran, answered other than it printed"),
    ('"sun"', "sun", "ran, answered wrong"),
    ('{"a": 1}', 1, "ran, answered wrong"),  # not one printed value: nothing to compare
    ("no json here", 1, "ran, answered wrong"),
])
def test_an_answer_is_compared_with_the_one_value_its_call_printed(printed, answer, outcome):
    record = _ran_and_answered("In x.csv, what is the total of 'pop'? Answer with 'value'.", "c = 'pop'\nprint(r)",
                               printed, {"value": answer})
    assert first_call_outcome(record) == outcome
