"""The scorers, including adversarial answers (spraying, text, keys, look-alikes)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks.data_analysis.grading import (
    float_tolerance,
    normalise_text,
    parse_answer_json,
    score_answer,
    score_answer_json,
)
from tasks.data_analysis.schema import AnswerSchema, Field

INT = AnswerSchema("int")
F3 = AnswerSchema("float", decimals=3)
STR = AnswerSchema("str")
LIST = AnswerSchema("list")
FIELDS = AnswerSchema("fields", fields=(Field("group", "str"), Field("value", "float", 4)))


def reward(schema, answer, truth) -> float:
    return score_answer(schema, answer, truth).reward


class TestIntegers:
    def test_exact(self):
        assert reward(INT, {"value": 42}, 42) == 1.0
        assert reward(INT, {"value": 41}, 42) == 0.0

    def test_integral_float_counts(self):
        assert reward(INT, {"value": 42.0}, 42) == 1.0
        assert reward(INT, {"value": 42.5}, 42) == 0.0

    @pytest.mark.parametrize("bad", ["42", "about 42", [42], [41, 42, 43], True, None, {"v": 42}])
    def test_not_one_number(self, bad):
        assert reward(INT, {"value": bad}, 42) == 0.0

    def test_bool_is_not_one(self):
        assert reward(INT, {"value": True}, 1) == 0.0


class TestFloats:
    def test_tolerance_is_half_unit_of_stated_decimals(self):
        assert reward(F3, {"value": 2.3454}, 2.345) == 1.0
        assert reward(F3, {"value": 2.3456}, 2.345) == 0.0

    def test_relative_tolerance_for_large_values(self):
        truth = 1_234_567.0
        assert float_tolerance(truth, 3) == pytest.approx(123.4567, rel=1e-6)
        assert reward(F3, {"value": truth + 120}, truth) == 1.0
        assert reward(F3, {"value": truth + 130}, truth) == 0.0

    def test_correct_rounding_at_half_way_point_counts_both_ways(self):
        assert reward(F3, {"value": 0.124}, 0.1235) == 1.0
        assert reward(F3, {"value": 0.123}, 0.1235) == 1.0

    @pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "2.345", "x=2.345", [2.345], [2.3, 2.345]])
    def test_rejects_non_numbers(self, bad):
        assert reward(F3, {"value": bad}, 2.345) == 0.0

    @given(st.floats(-1e9, 1e9, allow_nan=False), st.integers(0, 6))
    def test_correctly_rounded_answer_always_scores(self, truth, decimals):
        schema = AnswerSchema("float", decimals=decimals)
        assert reward(schema, {"value": round(truth, decimals)}, truth) == 1.0

    @given(st.floats(-1e6, 1e6, allow_nan=False), st.integers(0, 6))
    def test_answer_off_by_two_units_fails_unless_relative_tolerance_covers_it(self, truth, decimals):
        schema = AnswerSchema("float", decimals=decimals)
        off = 2 * 10.0**-decimals + 2e-4 * abs(truth)
        assert reward(schema, {"value": truth + off}, truth) == 0.0


class TestStrings:
    def test_case_and_space(self):
        assert reward(STR, {"value": "  adelie "}, "Adelie") == 1.0

    def test_fullwidth_is_nfkc_equal(self):
        assert reward(STR, {"value": "Ａｄｅｌｉｅ"}, "Adelie") == 1.0

    def test_lookalike_cyrillic_letters_fail(self):
        assert reward(STR, {"value": "Аdеliе"}, "Adelie") == 0.0  # Cyrillic A and e

    def test_zero_width_space_fails(self):
        assert reward(STR, {"value": "Ade\u200blie"}, "Adelie") == 0.0

    def test_extra_text_fails(self):
        assert reward(STR, {"value": "Adelie or Gentoo"}, "Adelie") == 0.0

    def test_list_of_candidates_fails(self):
        assert reward(STR, {"value": ["Adelie", "Gentoo"]}, "Adelie") == 0.0

    def test_normalise_text(self):
        assert normalise_text(" ÉCOLE ") == "école"


class TestLists:
    def test_set_equality_any_order(self):
        assert reward(LIST, {"value": ["b", "A"]}, ["a", "b"]) == 1.0

    def test_extra_or_missing_item_fails(self):
        assert reward(LIST, {"value": ["a", "b", "c"]}, ["a", "b"]) == 0.0
        assert reward(LIST, {"value": ["a"]}, ["a", "b"]) == 0.0

    def test_duplicates_fail(self):
        assert reward(LIST, {"value": ["a", "b", "B"]}, ["a", "b"]) == 0.0

    def test_not_a_list_fails(self):
        assert reward(LIST, {"value": "a, b"}, ["a", "b"]) == 0.0
        assert reward(LIST, {"value": ["a", 2]}, ["a", "2"]) == 0.0


class TestFieldsAndKeys:
    def test_all_or_nothing_with_fraction_in_diagnostics(self):
        truth = {"group": "Asia", "value": 1.23456}
        full = score_answer(FIELDS, {"group": "asia", "value": 1.2346}, truth)
        half = score_answer(FIELDS, {"group": "Asia", "value": 1.3}, truth)
        assert (full.reward, full.correct_fraction) == (1.0, 1.0)
        assert (half.reward, half.correct_fraction) == (0.0, 0.5)
        assert half.diagnostics()["field_correct"] == {"group": True, "value": False}

    def test_extra_key_scores_zero(self):
        assert reward(INT, {"value": 3, "alternatives": [4]}, 3) == 0.0
        truth = {"group": "Asia", "value": 1.0}
        assert reward(FIELDS, {"group": "Asia", "value": 1.0, "note": ""}, truth) == 0.0

    def test_missing_key_scores_zero(self):
        assert reward(FIELDS, {"group": "Asia"}, {"group": "Asia", "value": 1.0}) == 0.0

    def test_duplicate_keys_in_raw_json_score_zero(self):
        assert score_answer_json(INT, '{"value": 3, "value": 4}', 4).reward == 0.0
        assert score_answer_json(INT, '{"value": 4}', 4).reward == 1.0

    def test_parse_answer_json_rejects_nested_duplicates(self):
        with pytest.raises(ValueError):
            parse_answer_json('{"a": {"b": 1, "b": 2}}')

    def test_not_an_object(self):
        assert reward(INT, [3], 3) == 0.0
        assert score_answer_json(INT, "not json", 3).reward == 0.0


def test_json_schema_matches_keys():
    s = FIELDS.json_schema()
    assert s["required"] == ["group", "value"] and s["additionalProperties"] is False
    assert INT.json_schema()["properties"]["value"] == {"type": "integer"}
