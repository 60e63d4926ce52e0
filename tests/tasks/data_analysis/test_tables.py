"""Tables, manifest and licence checks."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from tasks.data_analysis import sources
from tasks.data_analysis.errors import LicenceNotAllowedError
from tasks.data_analysis.manifest import check_manifest, read_manifest
from tasks.data_analysis.tables import TABLES, load_table, table_csv


def test_manifest_matches_installed_packages():
    assert check_manifest() == []


def test_manifest_records_package_version_sha_and_licence():
    entries = read_manifest()["tables"]
    assert {e["name"] for e in entries} == set(TABLES)
    for e in entries:
        assert e["package"] and e["version"] and len(e["sha256"]) == 64 and e["licence"]
    packages = {e["package"] for e in entries}
    assert {"scikit-learn", "statsmodels", "palmerpenguins", "vega_datasets", "plotly",
            "bokeh_sampledata"} <= packages


@pytest.mark.parametrize("name", sorted(TABLES))
def test_roles_name_real_columns_and_csv_round_trips(name):
    spec = TABLES[name]
    df = load_table(name)
    roles = [*spec.numeric, *spec.category, *spec.protected, spec.entity, spec.date]
    for col in filter(None, roles):
        assert col in df.columns, f"{name}: role column {col!r} missing"
    for col in spec.numeric:
        assert pd.api.types.is_numeric_dtype(df[col]), f"{name}.{col} is not numeric"
    if spec.entity:
        assert df[spec.entity].is_unique, f"{name}: entity {spec.entity!r} not unique"
    again = pd.read_csv(io.BytesIO(table_csv(df)))
    pd.testing.assert_frame_equal(df, again)


@pytest.mark.parametrize("dataset", sorted(sources.STATSMODELS_EXCLUDED))
def test_statsmodels_rights_reserved_datasets_are_refused(dataset):
    with pytest.raises(LicenceNotAllowedError):
        sources.statsmodels_licence(dataset)


def test_bokeh_allow_list_comes_from_its_licence_inventory():
    assert sources.bokeh_licence("penguins.csv") == "CC0-1.0"
    with pytest.raises(LicenceNotAllowedError):  # CC-BY-SA-3.0 in the inventory
        sources.bokeh_licence("browsers_nov_2013.csv")
    with pytest.raises(LicenceNotAllowedError):  # not in the inventory at all
        sources.bokeh_licence("no_such_file.csv")


def test_enough_tables_from_every_source():
    assert len(TABLES) >= 30


@pytest.mark.parametrize("name", sorted(n for n, t in TABLES.items() if t.ratios))
def test_ratio_denominators_are_positive_numeric_columns(name):
    df = load_table(name)
    for x, y in TABLES[name].ratios:
        assert pd.api.types.is_numeric_dtype(df[x]) and df[y].dropna().min() > 0


def test_first_loads_from_many_threads_at_once_do_not_deadlock():
    """A fresh interpreter loads every table from 8 threads at once (first imports included)."""
    import subprocess
    import sys

    code = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from tasks.data_analysis.tables import TABLES, load_table\n"
        "names = list(TABLES) * 2\n"
        "with ThreadPoolExecutor(8) as pool:\n"
        "    frames = list(pool.map(load_table, names))\n"
        "assert all(len(f) > 0 for f in frames)\n"
        "print('ok', len(frames))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]
