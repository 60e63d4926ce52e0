from collections import Counter

from tasks.search import Question, contains_answer, generate_questions, normalize_answer, verify_question
from tasks.search.knowledge import parse_person
from tasks.search.questions import Hop
from tasks.search.sources import WikiArticle


def test_enough_questions_of_every_template_and_hop_count(questions):
    assert len(questions) >= 5000
    templates = Counter(q.template for q in questions)
    assert len(templates) >= 10 and min(templates.values()) >= 50, templates
    hops = Counter(q.num_hops for q in questions)
    assert hops[1] >= 1000 and hops[2] >= 1000 and sum(v for k, v in hops.items() if k >= 3) >= 20, hops


def test_every_emitted_question_is_answerable_from_its_documents(kb, questions):
    broken = []
    for q in questions:
        texts = {d: kb.corpus.get(d).contents for d in q.supporting_doc_ids}
        ok = all(contains_answer(texts[h.doc_id], h.answer) for h in q.hops)
        ok = ok and any(contains_answer(t, q.answer) for t in texts.values())
        if not ok:
            broken.append(q.id)
    assert not broken, broken[:20]


def test_verification_rejects_unsupported_hops(kb):
    good = Question("x", "What is the capital of France?", ("Paris",), (Hop("country-FR", "Paris"),), "t")
    assert verify_question(good, kb.corpus)
    assert not verify_question(Question("x", "?", ("Lyon",), (Hop("country-FR", "Lyon"),), "t"), kb.corpus)
    assert not verify_question(Question("x", "?", ("Paris",), (Hop("no-such-doc", "Paris"),), "t"), kb.corpus)
    assert not verify_question(Question("x", "?", ("Paris",), (), "t"), kb.corpus)


def test_no_question_text_has_two_answers(questions):
    texts = Counter(normalize_answer(q.question) for q in questions)
    assert max(texts.values()) == 1


def test_city_and_country_names_are_unambiguous(kb, questions):
    city_names = Counter(normalize_answer(c.name) for c in kb.cities)
    country_names = {normalize_answer(c.name) for c in kb.countries.values()}
    for city in kb.cities:
        key = normalize_answer(city.name)
        assert city_names[key] == 1 and key not in country_names, city.name
    titles = Counter(normalize_answer(d.title) for d in kb.corpus if d.id.startswith("city-"))
    assert max(titles.values()) == 1


def test_person_descriptions_identify_one_person(kb, questions):
    persons = {p.doc_id: p for p in kb.persons}
    for q in questions:
        if q.template.startswith("person_country_"):
            p = persons[q.hops[0].doc_id]
            matches = [o for o in kb.persons if o.birth == p.birth and p.role.casefold() in o.description.casefold()]
            assert matches == [p], q.id
            assert p.demonym not in q.question  # the nationality hop is not given away


def test_born_earlier_pairs_have_distinct_years(kb, questions):
    persons = {p.doc_id: p for p in kb.persons}
    for q in questions:
        if q.template == "born_earlier":
            a, b = persons[q.hops[0].doc_id], persons[q.hops[1].doc_id]
            assert a.birth != b.birth
            assert q.answer == min((a, b), key=lambda p: p.birth).title


def test_most_populous_neighbour_is_clear(kb, questions):
    for q in questions:
        if q.template == "most_populous_neighbour":
            iso2 = q.id.split(":")[1]
            neighbours = sorted((kb.countries[n] for n in kb.countries[iso2].neighbours if n in kb.countries),
                                key=lambda c: c.population, reverse=True)
            assert q.answer == neighbours[0].name
            assert neighbours[0].population >= 1.2 * neighbours[1].population


def test_generation_is_deterministic_in_the_seed(kb, questions):
    again = generate_questions(kb, seed=0)
    assert [q.to_json() for q in again] == [q.to_json() for q in questions]
    other = generate_questions(kb, seed=1)
    assert {q.id for q in other if q.template == "born_earlier"} != {q.id for q in questions if q.template == "born_earlier"}


def test_parse_person_reads_life_years_and_nationality():
    demonyms = {"French": "FR", "South African": "ZA"}
    p = parse_person("w1", WikiArticle("Albert Camus", "French philosopher and writer (1913–1960)", "x", "People"), demonyms)
    assert (p.demonym, p.country_iso2, p.role, p.birth, p.death) == ("French", "FR", "philosopher and writer", 1913, 1960)
    p = parse_person("w2", WikiArticle("X", "South African activist (born 1946)", "x", "People"), demonyms)
    assert (p.demonym, p.birth, p.death) == ("South African", 1946, None)
    p = parse_person("w3", WikiArticle("Y", "French-American painter (1850–1900)", "x", "People"), demonyms)
    assert p.demonym == "" and p.country_iso2 == ""
    assert parse_person("w4", WikiArticle("Z", "Athenian general (c. 450–404 BC)", "x", "People"), demonyms) is None
