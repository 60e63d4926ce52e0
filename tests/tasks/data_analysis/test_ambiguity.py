"""The ambiguity filter rejects exactly the questions whose readings disagree."""

from __future__ import annotations

import pathlib

import numpy as np
import pandas as pd
import pytest

from tasks.data_analysis.ambiguity import check_question, near_rounding_boundary
from tasks.data_analysis.reference import run_reference
from tasks.data_analysis.schema import AnswerSchema
from tasks.data_analysis.tables import TableSpec, table_csv
from tasks.data_analysis.templates import RenderedQuestion, Template
from tasks.data_analysis.tiers import template_by_id
from tasks.data_analysis.variants import TableVariant

TOY = TableSpec("toy", "none", "test", "toy", loader=lambda: None, licence="test",
                numeric=("x", "y"), category=("g",), entity="name")


def toy_variant(df: pd.DataFrame) -> TableVariant:
    return TableVariant(TOY, table_csv(df), {}, 0.0, len(df))


def verdict(template: Template, df: pd.DataFrame, tmp: pathlib.Path, names=None, values=None):
    v = toy_variant(df)
    (tmp / v.file).write_bytes(v.data)
    rq = RenderedQuestion(template, names or {}, values or {}, (v.file,))
    truth = run_reference(rq.code(str(tmp)))
    return check_question(rq, truth, tmp, (v,), np.random.default_rng(0)), truth


def base(**cols) -> pd.DataFrame:
    n = len(next(iter(cols.values())))
    data = {"name": [f"n{i}" for i in range(n)], "g": ["a", "b"] * (n // 2) + ["a"] * (n % 2)}
    data.update(cols)
    return pd.DataFrame(data)


def test_threshold_on_a_data_value_is_dropped(tmp_path):
    t = template_by_id("t2_count_above")
    df = base(x=[1.0, 2.0, 3.0, 4.0])
    bad, _ = verdict(t, df, tmp_path, {"x": "x"}, {"t": 3.0})
    good, truth = verdict(t, df, tmp_path, {"x": "x"}, {"t": 2.5})
    assert not bad.ok and "op" in bad.reason
    assert good.ok and truth == 2


def test_ties_are_dropped(tmp_path):
    t = template_by_id("t1_argmax")
    tied, _ = verdict(t, base(x=[5.0, 1.0, 5.0, 2.0]), tmp_path, {"x": "x", "e": "name"})
    clear, truth = verdict(t, base(x=[5.0, 1.0, 4.0, 2.0]), tmp_path, {"x": "x", "e": "name"})
    assert not tied.ok and "tie" in tied.reason
    assert clear.ok and truth == "n0"


def test_ddof_disagreement_is_dropped(tmp_path):
    t = template_by_id("t2_zscore")
    # with ddof=1 the outlier is 1.94 sd above the mean, with ddof=0 it is 2.0 sd
    x = [0.0] * 3 + [1.0]
    v, truth = verdict(t, base(x=x), tmp_path, {"x": "x"}, {"z": 1.5})
    assert not v.ok and "ddof" in v.reason


def test_nan_answers_are_dropped(tmp_path):
    t = template_by_id("t2_filtered_mean")
    v, truth = verdict(t, base(x=[1.0, 2.0, 3.0, 4.0]), tmp_path, {"x": "x", "g": "g"},
                       {"v": "zzz", "v_text": "'zzz'"})
    assert not v.ok and "not a proper answer" in v.reason


def test_alternative_that_only_gives_nan_does_not_count_as_disagreement(tmp_path):
    t = template_by_id("t1_mean")
    v, truth = verdict(t, base(x=[1.0, None, 3.0, 5.0]), tmp_path, {"x": "x"})
    assert v.ok and truth == 3.0
    assert v.alternatives_checked == 1 and v.alternatives_invalid == 1


def test_answers_that_flip_under_float_noise_are_dropped(tmp_path):
    no_knobs = Template("toy_noise", 2, "count", "import pandas as pd\ndf = pd.read_csv({path})\n"
                        "result = int((df['x'] > 0.3).sum())\n", AnswerSchema("int"), draw=lambda r: None)
    fragile, _ = verdict(no_knobs, base(x=[0.1 + 0.2] * 10), tmp_path)
    robust, truth = verdict(no_knobs, base(x=[0.31] * 10), tmp_path)
    assert not fragile.ok and "noise" in fragile.reason
    assert robust.ok and truth == 10


@pytest.mark.parametrize("truth,expected", [(0.1235, True), (0.1234, False), (2.0, False),
                                            (-7.0005, True)])
def test_near_rounding_boundary(truth, expected):
    assert near_rounding_boundary(AnswerSchema("float", decimals=3), truth) is expected
