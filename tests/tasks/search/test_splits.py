from collections import Counter

from tasks.search import SPLITS, normalize_answer, split_questions


def test_splits_are_disjoint_by_question_and_by_answer(splits):
    ids = {s: {q.id for q in qs} for s, qs in splits.items()}
    texts = {s: {normalize_answer(q.question) for q in qs} for s, qs in splits.items()}
    aliases = {s: {normalize_answer(a) for q in qs for a in q.golden_answers} for s, qs in splits.items()}
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1:]:
            assert not ids[a] & ids[b]
            assert not texts[a] & texts[b]
            assert not aliases[a] & aliases[b], sorted(aliases[a] & aliases[b])[:10]


def test_split_sizes_and_hop_labels(splits):
    sizes = {s: len(qs) for s, qs in splits.items()}
    total = sum(sizes.values())
    assert total >= 5000
    assert 0.7 <= sizes["train"] / total <= 0.9
    assert sizes["validation"] >= 300 and sizes["test"] >= 300
    for qs in splits.values():
        hops = Counter(q.num_hops for q in qs)
        assert hops[1] > 0 and hops[2] > 0


def test_answers_are_capped_so_no_answer_dominates(splits):
    for qs in splits.values():
        counts = Counter(normalize_answer(q.answer) for q in qs)
        assert max(counts.values()) <= 20


def test_splitting_is_deterministic(questions, splits):
    again = split_questions(questions, seed=0)
    assert {s: [q.id for q in v] for s, v in again.items()} == {s: [q.id for q in v] for s, v in splits.items()}
