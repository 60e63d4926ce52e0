import numpy as np
import pytest

from tasks.calculator import grade_numeric, make_task, parse_number, sample_task, split_of


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_tasks_are_pure_functions_of_seed_with_integer_answers(difficulty):
    for seed in range(300):
        t = make_task(seed, difficulty)
        assert t == make_task(seed, difficulty) and t.answer >= 0
        assert str(t.answer) not in t.question.split()[-3:]  # the answer is not printed at the end


def test_splits_are_disjoint_and_respected():
    rng = np.random.default_rng(0)
    seen = {s: {sample_task(rng, 1, s).task_id for _ in range(200)} for s in ("train", "validation", "test")}
    assert not (seen["train"] & seen["validation"]) and not (seen["train"] & seen["test"])
    assert all(split_of(int(tid.split("-")[-1])) == s for s, ids in seen.items() for tid in ids)


@pytest.mark.parametrize("value, ok", [(42, True), ("42", True), (" 42.0 ", True), (42.0000000001, True),
                                       ("42 apples", False), ("41 or 42", False), (True, False), ("", False),
                                       ("4e1", False), ("nan", False), ([42], False), ("1,042", False)])
def test_grade_numeric_accepts_only_a_single_number(value, ok):
    truth = 1042 if value == "1,042" else 42
    expected = 1.0 if ok or value == "1,042" else 0.0
    assert grade_numeric(value, truth) == expected


def test_parse_number_handles_thousands_separators():
    assert parse_number("1,042") == 1042.0 and parse_number("1,04") is None
