from collections import Counter

import pytest

from tasks.search import (
    TEMPLATES,
    Question,
    contains_answer,
    generate_questions,
    match_template,
    normalize_answer,
    verify_question,
)
from tasks.search.knowledge import parse_person
from tasks.search.quality import (
    BROKEN_WORDING,
    COUNTRY_FOUNDED,
    NAME_OUTSIDE_GRAMMAR,
    NameIndex,
    grammar_rejection,
    one_edit_apart,
    skeleton,
)
from tasks.search.questions import Hop
from tasks.search.sources import WikiArticle, name_key
from tasks.search.templates import TemplateGrammarError, render


def test_every_emitted_question_is_answerable_from_its_documents(kb, questions):
    broken = []
    for q in questions:
        texts = {d: kb.corpus.get(d).contents for d in q.supporting_doc_ids}
        ok = all(contains_answer(texts[h.doc_id], h.answer) for h in q.hops)
        ok = ok and any(contains_answer(t, q.answer) for t in texts.values())
        if not ok:
            broken.append(q.id)
    assert not broken, broken[:20]


def test_every_hop_count_is_the_number_of_different_documents(kb, questions):
    kinds = Counter()
    for q in questions:
        assert q.num_hops == TEMPLATES[q.template].hops == len({h.doc_id for h in q.hops}), q.id
        kinds[q.num_hops] += 1
    assert set(kinds) == {1, 2, 3, 4}


def test_verification_rejects_unsupported_hops(kb):
    good = Question("x", "What is the capital of France?", ("Paris",), (Hop("country-FR", "Paris"),), "t")
    assert verify_question(good, kb.corpus)
    assert not verify_question(Question("x", "?", ("Lyon",), (Hop("country-FR", "Lyon"),), "t"), kb.corpus)
    assert not verify_question(Question("x", "?", ("Paris",), (Hop("no-such-doc", "Paris"),), "t"), kb.corpus)
    assert not verify_question(Question("x", "?", ("Paris",), (), "t"), kb.corpus)


def test_no_question_text_has_two_answers(questions):
    texts = Counter(normalize_answer(q.question) for q in questions)
    assert max(texts.values()) == 1


def test_every_question_reads_as_exactly_its_own_template(questions):
    misread = [(q.question, match_template(q.question)) for q in questions if match_template(q.question) != [q.template]]
    assert not misread, misread[:5]


@pytest.mark.parametrize("template, slots", [
    ("person_country_capital", {"home": "the home country of the and American bodybuilder"}),
    ("country_of_city", {"city": "Mianzhu, Deyang"}),
    ("birth_year", {"person": "and Stanley Kubrick"}),
    ("capital_of_country", {"country": "the the Netherlands"}),
    ("born_earlier", {"person": "Mercury (planet)", "person_2": "Ada Lovelace"}),
])
def test_the_grammar_check_rejects_broken_slots(template, slots):
    with pytest.raises(TemplateGrammarError):
        render(template, **slots)
    assert render("person_country_capital", home="the home country of Kofi Annan").endswith("Kofi Annan?")


def test_the_issue_example_of_a_cut_descriptor_matches_no_template():
    assert match_template("What is the capital of the home country of the and American bodybuilder, actor and "
                          "politician born in 1947?") == []


def test_city_names_in_questions_name_one_city_of_the_city_list(kb, questions):
    city_keys = Counter(name_key(n) for _, n, _ in kb.all_city_names)
    country_keys = {name_key(c.name) for c in kb.countries.values()}
    cities = {f"city-{c.geonameid}": c for c in kb.cities}
    checked = 0
    for q in questions:
        for h in q.hops:
            if h.doc_id in cities and cities[h.doc_id].name in q.question:
                key = name_key(cities[h.doc_id].name)
                assert city_keys[key] == 1 and key not in country_keys, q.id
                checked += 1
    assert checked > 1000  # the check ran on the city questions, not on none


def test_person_names_in_questions_name_one_article(kb, questions):
    persons = {p.doc_id: p for p in kb.persons}
    bare = Counter(name_key(persons[d.id].name) if d.id in persons else name_key(d.title) for d in kb.corpus
                   if d.id.startswith("wiki-"))
    checked = 0
    for q in questions:
        for h in q.hops:
            if h.doc_id in persons and persons[h.doc_id].name in q.question:
                assert bare[name_key(persons[h.doc_id].name)] == 1, q.id
                checked += 1
    assert checked > 1000  # the check ran on the person questions, not on none


def test_name_index_catches_aliases_and_near_duplicates():
    index = NameIndex()
    index.add("city", "1", ["Saint Petersburg"])
    index.add("person", "a", ["Mohammed Rafiullah"])
    index.add("country", "IE", ["Ireland", "Éire"])
    assert index.others("city", "2", "St. Petersburg") == {("city", "1")}
    assert index.others("person", "b", "Mohamed Rafiullah") == {("person", "a")}
    assert index.others("country", "X", "Eire") == {("country", "IE")}
    assert index.others("country", "X", "Iceland") == set()  # seven letters: one letter apart is not a variant
    assert index.others("city", "2", "St. Petersburg", among=("person",)) == set()
    assert skeleton("Mt. Kenya") == skeleton("Mount Kenya")
    assert one_edit_apart("abcdefgh", "abcdxfgh") and one_edit_apart("abcdefgh", "abcdefg")
    assert not one_edit_apart("abcdefgh", "abxdxfgh")


def test_home_country_is_only_said_of_persons_alive_when_it_existed(kb, questions):
    persons = {p.doc_id: p for p in kb.persons}
    said = rephrased = 0
    for q in questions:
        for h in q.hops:
            p = persons.get(h.doc_id)
            if p is None or p.name not in q.question:
                continue
            if f"the home country of {p.name}" in q.question:
                said += 1
                assert p.death is None or p.death >= COUNTRY_FOUNDED.get(p.country_iso2, 1993), q.question
            elif f"the present-day country of {p.name}'s nationality" in q.question:
                rephrased += 1
    assert said > 100 and rephrased > 100


def test_persons_are_people_with_one_nationality(kb):
    titles = {p.title for p in kb.persons}
    assert "Ming dynasty" not in titles and "Byzantine Empire" not in titles
    schwarzenegger = next(p for p in kb.persons if p.title == "Arnold Schwarzenegger")
    assert schwarzenegger.compound_nationality and schwarzenegger.country_iso2 == ""


def test_the_audit_counts_rejects_by_reason(audit):
    reasons = audit.by_reason()
    for reason in ("compound nationality (no single home country)", "ambiguous city name",
                   BROKEN_WORDING, NAME_OUTSIDE_GRAMMAR, "answer given away in the question"):
        assert reasons[reason] > 0, reasons
        assert audit.examples[reason]
    assert sum(audit.kept.values()) > 10_000


def test_the_grammar_checks_refusals_are_split_into_unrenderable_names_and_broken_wording():
    """A valid name the slot grammar has no room for is not a broken wording: the audit
    must not count "Hoji ya Henda" with "Horatio Nelson, 1st Viscount Nelson or ..."."""
    assert grammar_rejection({"city": "Hoji ya Henda"}) == NAME_OUTSIDE_GRAMMAR
    assert grammar_rejection({"person": "Ngũgĩ wa Thiong'o", "person_2": "Abu Hanifa"}) == NAME_OUTSIDE_GRAMMAR
    assert grammar_rejection({"city": "Sector 3", "country": "Greece"}) == NAME_OUTSIDE_GRAMMAR
    assert grammar_rejection({"city": "Mianzhu, Deyang, Sichuan"}) == BROKEN_WORDING
    assert grammar_rejection({"home": "the present-day country of John Churchill, 1st Duke of Marlborough's "
                                      "nationality"}) == BROKEN_WORDING
    assert grammar_rejection({"country": "France"}) == BROKEN_WORDING  # every name fits: the sentence fails


def _neighbours(kb, iso2):
    return {n for n in kb.countries[iso2].neighbours if n in kb.countries and iso2 in kb.countries[n].neighbours}


def test_intersection_answers_are_the_one_shared_neighbour(kb, questions):
    by_doc = {f"country-{iso2}": iso2 for iso2 in kb.countries}
    checked = Counter()
    for q in questions:
        if TEMPLATES[q.template].kind != "intersection":
            continue
        if q.template.endswith(("_capital", "_currency")):
            answer = by_doc[q.hops[-1].doc_id]
        else:
            answer = next(iso2 for iso2, c in kb.countries.items() if c.name == q.answer)
        borders = {by_doc[h.doc_id] for h in q.hops if h.doc_id in by_doc} - {answer}
        assert len(borders) == 2, q.id
        shared = set.intersection(*(_neighbours(kb, c) for c in borders)) - borders
        assert shared == {answer}, q.id
        checked[q.template] += 1
    assert len(checked) == sum(t.kind == "intersection" for t in TEMPLATES.values())


def test_comparisons_have_a_clear_winner(kb, questions):
    persons = {p.doc_id: p for p in kb.persons}
    for q in questions:
        if q.template == "born_earlier":
            a, b = persons[q.hops[0].doc_id], persons[q.hops[1].doc_id]
            assert a.birth != b.birth and q.answer == min((a, b), key=lambda p: p.birth).name
        if q.template == "home_countries_more_populous":
            ca, cb = (kb.countries[persons[q.hops[i].doc_id].country_iso2] for i in (0, 2))
            big, small = sorted((ca, cb), key=lambda c: -c.population)
            assert q.answer == big.name and big.population >= 1.2 * small.population


def test_generation_is_deterministic_in_the_seed(kb, questions):
    again = generate_questions(kb, seed=0)
    assert [q.to_json() for q in again] == [q.to_json() for q in questions]
    other = generate_questions(kb, seed=1)
    assert {q.id for q in other if q.template == "born_earlier"} != {q.id for q in questions if q.template == "born_earlier"}


def test_parse_person_reads_life_years_and_nationality():
    demonyms = {"French": "FR", "South African": "ZA", "Austrian": "AT", "American": "US"}
    p = parse_person("w1", WikiArticle("Albert Camus", "French philosopher and writer (1913–1960)", "x", "People"), demonyms)
    assert (p.demonym, p.country_iso2, p.role, p.birth, p.death) == ("French", "FR", "philosopher and writer", 1913, 1960)
    p = parse_person("w2", WikiArticle("X", "South African activist (born 1946)", "x", "People"), demonyms)
    assert (p.demonym, p.birth, p.death) == ("South African", 1946, None)
    p = parse_person("w3", WikiArticle("Y", "French-American painter (1850–1900)", "x", "People"), demonyms)
    assert p.demonym == "" and p.country_iso2 == ""
    p = parse_person("w5", WikiArticle("Y", "Austrian and American actor (born 1947)", "x", "People"), demonyms)
    assert p.compound_nationality and p.country_iso2 == ""
    assert parse_person("w4", WikiArticle("Z", "Athenian general (c. 450–404 BC)", "x", "People"), demonyms) is None
