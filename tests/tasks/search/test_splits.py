from collections import Counter

from tasks.search import (
    SPLITS,
    TEMPLATES,
    Hop,
    Question,
    normalize_answer,
    split_questions,
)
from tasks.search.splits import shares, split_balance


def test_splits_are_disjoint_by_question_and_by_answer(splits):
    ids = {s: {q.id for q in qs} for s, qs in splits.items()}
    texts = {s: {normalize_answer(q.question) for q in qs} for s, qs in splits.items()}
    aliases = {s: {normalize_answer(a) for q in qs for a in q.golden_answers} for s, qs in splits.items()}
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1:]:
            assert not ids[a] & ids[b]
            assert not texts[a] & texts[b]
            assert not aliases[a] & aliases[b], sorted(aliases[a] & aliases[b])[:10]


def test_templates_and_hop_counts_have_the_same_shares_in_every_split(splits):
    assert split_balance(splits, lambda q: q.template) <= 3.0
    assert split_balance(splits, lambda q: q.num_hops) <= 3.0
    for qs in splits.values():
        assert {q.template for q in qs} == set(TEMPLATES)
        assert max(shares(qs, lambda q: q.template).values()) <= 0.20


def test_at_least_a_thousand_questions_per_hop_count_from_two_to_four(splits):
    hops = Counter(q.num_hops for qs in splits.values() for q in qs)
    assert min(hops[2], hops[3], hops[4]) >= 1000, hops


def test_split_sizes(splits):
    sizes = {s: len(qs) for s, qs in splits.items()}
    total = sum(sizes.values())
    assert 0.78 <= sizes["train"] / total <= 0.82
    assert sizes["validation"] >= 900 and sizes["test"] >= 900


def test_no_answer_dominates_a_template(splits):
    for qs in splits.values():
        counts = Counter((q.template, normalize_answer(q.answer)) for q in qs)
        assert max(counts.values()) <= 12


def test_splitting_is_deterministic(questions, splits):
    again = split_questions(questions, seed=0)
    assert {s: [q.id for q in v] for s, v in again.items()} == {s: [q.id for q in v] for s, v in splits.items()}


def _fake(template: str, i: int, answer: str) -> Question:
    return Question(f"{template}:{i}", f"{template} question {i}?", (answer,), (Hop(f"d{i}", answer),), template)


def test_a_template_whose_answers_repeat_keeps_its_share():
    """The old failure: few distinct answers (capitals) starved validation and test of a template."""
    questions = [_fake("repeats", i, f"capital {i % 40}") for i in range(1200)]
    questions += [_fake("unique", i, f"person {i}") for i in range(1200)]
    splits = split_questions(questions, seed=3, max_per_answer=12)
    assert split_balance(splits, lambda q: q.template) <= 3.0
    assert all(sum(q.template == "repeats" for q in qs) >= 30 for qs in splits.values())


def test_the_report_finds_broken_wording_that_got_in(splits):
    from tasks.search.report import dataset_report

    broken = Question("capital_of_country:x", "What is the capital of the and American?", ("x",),
                      (Hop("d", "x"),), "capital_of_country")
    assert dataset_report(splits)["broken_wording"] == []
    assert dataset_report({**splits, "test": [*splits["test"], broken]})["broken_wording"] == [broken.id]
