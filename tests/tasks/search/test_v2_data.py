"""Search-v2's data: the corpus it rebuilds, templates with several wordings, hop counts that
count documents, splits with enough distinct answers."""

import re
from collections import Counter

import pytest

from tasks.search import verify_question
from tasks.search.grading import normalize_answer
from tasks.search.v2 import TEMPLATES_V2, load_default_dataset_v2, match_template_v2
from tasks.search.v2.corpus import CONTESTED_CAPITALS, DEFUNCT
from tasks.search.v2.generators import describable_persons


@pytest.fixture(scope="module")
def data():
    return load_default_dataset_v2()


@pytest.fixture(scope="module")
def everything(data):
    return [q for qs in data.splits.values() for q in qs]


def test_profiles_no_longer_list_borders_which_have_documents_of_their_own(data):
    france = data.corpus.get("country-FR").contents
    assert "Paris" in france and "borders" not in france and "Spain" not in france
    assert "Spain" in data.corpus.get("borders-FR").contents
    assert "Astana" in data.corpus.get("country-KZ").contents  # as the corpus's Wikipedia text says
    assert "Naypyidaw" in data.corpus.get("country-MM").contents
    assert all(data.corpus.get(f"country-{iso}") is None for iso in DEFUNCT)
    assert not any("New Territories" in d.title for d in data.corpus)


def test_every_template_has_three_wordings_and_questions_use_them(everything):
    assert all(len(t.wordings) >= 3 for t in TEMPLATES_V2.values())
    used: dict[str, set] = {}
    for q in everything:
        assert match_template_v2(q.question) == [q.template], q.question
        used.setdefault(q.template, set()).add(next(
            i for i, w in enumerate(TEMPLATES_V2[q.template].wordings) if _reads_as(w, q.question)))
    assert set(used) == set(TEMPLATES_V2)
    assert all(len(ws) >= 3 for t, ws in used.items() if sum(q.template == t for q in everything) >= 30), used


def _reads_as(wording: str, text: str) -> bool:
    head, tail = wording.split("{", 1)[0], wording.rsplit("}", 1)[-1]
    return text.startswith(head) and text.endswith(tail)


def test_hop_counts_are_the_documents_the_hops_use(everything):
    for q in everything:
        assert q.num_hops == TEMPLATES_V2[q.template].hops, q.id
    assert Counter(q.num_hops for q in everything).keys() == {1, 2, 3, 4}


def test_golds_are_in_the_supporting_documents(data, everything):
    assert all(verify_question(q, data.corpus) for q in everything[::25])


def test_contested_capitals_are_never_asked_or_named(data, everything):
    contested = {normalize_answer(data.corpus.get(f"country-{iso}").text.split("The capital of ")[1].split(" is ")[1]
                                  .split(".")[0]) for iso in CONTESTED_CAPITALS}
    capital_templates = {t for t in TEMPLATES_V2 if "capital" in t}
    assert not [q.id for q in everything if q.template in capital_templates and
                any(normalize_answer(a) in contested for a in q.golden_answers)]


def test_every_test_hop_count_has_at_least_100_distinct_answers(data):
    answers: dict[int, set] = {}
    for q in data.questions("test"):
        answers.setdefault(q.num_hops, set()).add(normalize_answer(q.answer))
    assert {h: len(a) >= 100 for h, a in answers.items()} == {1: True, 2: True, 3: True, 4: True}, \
        {h: len(a) for h, a in answers.items()}


def test_splits_share_no_answer_and_two_way_choices_are_a_small_share(data):
    train = {normalize_answer(a) for q in data.questions("train") for a in q.golden_answers}
    for split in ("validation", "test"):
        assert not any(normalize_answer(a) in train for q in data.questions(split) for a in q.golden_answers)
    two_way = {t for t, spec in TEMPLATES_V2.items() if spec.choices == 2}
    for split, qs in data.splits.items():
        assert sum(q.template in two_way for q in qs) / len(qs) < 0.02, split


def test_a_described_person_is_the_only_one_of_their_nationality_occupation_and_decade(data):
    from tasks.search.v2 import build_knowledge_base_v2

    kb = build_knowledge_base_v2()
    described = describable_persons(kb)
    assert len(described) > 300
    for who in described[::20]:
        p = who.person
        same = [q for q in kb.persons if q.country_iso2 == p.country_iso2 and q.birth // 10 == p.birth // 10
                and re.search(rf"\b{who.occupation}\b", q.role.lower())]
        assert same == [p]
        assert not who.phrase.endswith("00s")


def test_wikipedia_descriptions_place_articles_in_countries(data):
    """A relation from the Wikipedia text itself: "River in Russia" puts the Neva in Russia."""
    from tasks.search.v2 import build_knowledge_base_v2
    from tasks.search.v2.generators import wiki_places

    places = {p.name: p.country_iso2 for p in wiki_places(build_knowledge_base_v2())}
    assert len(places) > 150 and places.get("Neva") == "RU"
    assert "Rwandan genocide" not in places  # an event, not a place
    questions = [q for q in data.questions("train") if q.template == "person_of_place_country"]
    assert len(questions) > 50 and all(q.num_hops == 3 for q in questions)


def test_no_question_is_answered_by_the_document_of_what_it_names(data, everything):
    """A currency shared with a named country, or a person's article naming the clue, would let
    one query with the question's own names find the answer: the gate drops both."""
    from tasks.search import contains_answer

    currency_of = {}
    for doc in data.corpus:
        if doc.id.startswith("country-") and "The currency of " in doc.text:
            currency_of[doc.title.removesuffix(" (country profile)")] = doc.text.split("The currency of ")[1] \
                .split(" is the ")[1].split(" (")[0]
    for q in everything:
        if q.template == "shared_neighbour_currency":
            named = [c for c in currency_of if contains_answer(q.question, c)]
            assert named and all(currency_of[c] != q.answer for c in named), q.question
        if q.template in ("person_of_capital_country", "death_of_capital_country"):
            capital = q.question.split("capital is ")[1].rstrip("?.")
            assert not contains_answer(data.corpus.get(q.hops[-1].doc_id).contents, capital), q.question


SHARED_UNITS = ("dollar", "dollars", "pound", "dinar", "peso", "krone", "krona", "franc", "rupee", "shilling", "rial",
                "dirham", "manat", "leu", "won", "som", "ruble", "rouble", "kwacha", "guilder", "CFA franc")


def test_a_bare_unit_scores_only_where_the_question_names_the_country(data, everything):
    """"dollar" says which currency only once the question has named the country: on a bridge
    question the country is the hidden hop, so a constant unit must not score there."""
    from tasks.search.scoring_v2 import grade_answer_v2
    from tasks.search.v2 import answer_kind

    bridge = [q for q in everything if answer_kind(q.template) == "currency"]
    assert {q.template for q in bridge} == {"city_country_currency", "person_country_currency",
                                            "shared_neighbour_currency"}
    for unit in SHARED_UNITS:
        scored = [q.id for q in bridge if grade_answer_v2(unit, q.golden_answers, kind="currency").reward
                  and unit.casefold() not in {g.casefold() for g in q.golden_answers}]  # a gold as written ("Won")
        assert not scored, (unit, scored[:5])
    test = [q for q in data.questions("test") if answer_kind(q.template) in ("currency", "currency_named")]
    dollar = [q for q in test if grade_answer_v2("dollar", q.golden_answers, kind=answer_kind(q.template)).reward]
    assert {q.template for q in dollar} == {"currency_of_country"}
    assert len(dollar) / len(test) < 0.12, (len(dollar), len(test))  # 13 of 123 (33 before, 26.8%)


def test_every_gold_scores_one_with_the_v2_scorer(data):
    from tasks.search.scoring_v2 import grade_answer_v2
    from tasks.search.v2 import answer_kind

    for qs in data.splits.values():
        for q in qs:
            for gold in (q.answer, *q.golden_answers):
                assert grade_answer_v2(gold, q.golden_answers, kind=answer_kind(q.template)).reward == 1.0, (q.id, gold)


def test_accepted_answers_shared_with_train_are_only_units_of_named_countries(data):
    """The splits are disjoint by normalised gold, not by every form the scorer accepts.

    After the unit rule a test question shares an accepted form with train only where the
    question names its country ("dollar": right for Jamaica in test and for the United States
    in train) or where the gold as written is a shared unit ("Won", South Korea's ISO name,
    against North Korea's "won"). The counts are pinned (76 test and 7 validation questions
    shared a form before the rule) so that a change to the tables or the splits shows here;
    regrouping the splits by accepted forms would change the dataset (its builder version).
    """
    from tasks.search.aliases import alias_key
    from tasks.search.scoring_v2 import accepted_answers
    from tasks.search.v2 import answer_kind

    def keys(q):
        return {alias_key(f) for f in accepted_answers(q.golden_answers, answer_kind(q.template) or "entity")}

    train = set().union(*(keys(q) for q in data.questions("train")))
    overlap = {split: [q for q in data.questions(split) if keys(q) & train] for split in ("validation", "test")}
    for q in (q for qs in overlap.values() for q in qs if answer_kind(q.template) != "currency_named"):
        assert keys(q) & train <= {alias_key(g) for g in q.golden_answers}, q.id
    assert {split: len(qs) for split, qs in overlap.items()} == {"validation": 5, "test": 29}
