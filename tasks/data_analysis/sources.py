"""Loaders for the real tables that ship inside installed wheels.

Every loader reads a file bundled in a package (never a ``fetch_*`` downloader, never the
network) and returns a tidy :class:`pandas.DataFrame` with plain column names, string
categories and ISO date strings, so that writing it to CSV and reading it back is exact.

Licences are recorded per table. For ``bokeh_sampledata`` they are read from the
package's own inventory (``licenses/datasets.json`` in its dist-info) and checked against
:data:`BOKEH_LICENCE_ALLOW_LIST`; for ``statsmodels`` from each dataset module's
``COPYRIGHT`` note, with :data:`STATSMODELS_EXCLUDED` (whose notes say the author keeps
the rights) refused outright.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import pathlib
import warnings
from functools import lru_cache

import pandas as pd

from tasks.data_analysis.errors import LicenceNotAllowedError

__all__ = [
    "BOKEH_LICENCE_ALLOW_LIST",
    "STATSMODELS_EXCLUDED",
    "bokeh_licence",
    "statsmodels_licence",
    "package_version",
]

BOKEH_LICENCE_ALLOW_LIST: tuple[str, ...] = (
    "Public domain",
    "CC0-1.0",
    "MIT",
    "BSD-3-Clause",
    "CC-BY-2.0",
    "CC-BY-3.0",
    "CC-BY-4.0",
)
"""Recorded licences (prefixes) we redistribute variants of. Share-alike, government
licences with extra terms and 'free to use' notes without a named licence are left out."""

STATSMODELS_EXCLUDED: frozenset[str] = frozenset(
    {"ccard", "committee", "copper", "cpunish", "fair", "scotland", "spector", "star98"}
)


def package_version(distribution: str) -> str:
    return importlib.metadata.version(distribution)


@lru_cache(maxsize=1)
def _bokeh_inventory() -> dict[str, str]:
    dist = importlib.metadata.distribution("bokeh_sampledata")
    for f in dist.files or ():
        if str(f).endswith("licenses/datasets.json"):
            data = json.loads(pathlib.Path(dist.locate_file(f)).read_text("utf-8"))
            break
    else:  # pragma: no cover - depends on the installed wheel
        raise LicenceNotAllowedError(
            "bokeh_sampledata ships no licenses/datasets.json; cannot check licences. "
            "Install a bokeh_sampledata release that has the licence inventory."
        )
    out: dict[str, str] = {}
    for entry in data["datasets"]:
        for name in entry.get("files", ()):
            out[name] = entry.get("recorded_license", "")
    return out


def bokeh_licence(file: str) -> str:
    """The recorded licence of a bokeh_sampledata file, if it is on the allow-list."""
    licence = _bokeh_inventory().get(file)
    if licence is None:
        raise LicenceNotAllowedError(
            f"bokeh_sampledata's licence inventory has no entry for {file!r}; "
            "only inventoried files may be used."
        )
    if not licence.startswith(BOKEH_LICENCE_ALLOW_LIST) or "SA" in licence.split("-"):
        raise LicenceNotAllowedError(
            f"bokeh_sampledata file {file!r} is recorded as {licence!r}, which is not on "
            f"the allow-list {BOKEH_LICENCE_ALLOW_LIST}."
        )
    return licence


def statsmodels_licence(dataset: str) -> str:
    if dataset in STATSMODELS_EXCLUDED:
        raise LicenceNotAllowedError(
            f"statsmodels dataset {dataset!r} is excluded: its notes say the author "
            "keeps the rights."
        )
    module = importlib.import_module(f"statsmodels.datasets.{dataset}")
    note = " ".join(str(getattr(module, "COPYRIGHT", "")).split())
    if "public domain" not in note.lower():
        raise LicenceNotAllowedError(
            f"statsmodels dataset {dataset!r} has copyright note {note!r}, not public domain."
        )
    return f"{note} (statsmodels BSD-3-Clause)"


def _site(package: str) -> pathlib.Path:
    return pathlib.Path(importlib.import_module(package).__file__).parent


def _sm(dataset: str) -> pd.DataFrame:
    module = importlib.import_module(f"statsmodels.datasets.{dataset}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return module.load_pandas().data.copy()


def _int_cols(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    for c in cols:
        df[c] = df[c].astype("int64")
    return df


# ---- statsmodels ---------------------------------------------------------------

def load_grunfeld() -> pd.DataFrame:
    df = _sm("grunfeld")[["firm", "year", "invest", "value", "capital"]]
    df["firm"] = df["firm"].astype(str)
    return _int_cols(df, "year")


def load_macrodata() -> pd.DataFrame:
    df = _sm("macrodata")
    df = _int_cols(df, "year", "quarter")
    month = (df["quarter"] - 1) * 3 + 1
    date = [f"{y:04d}-{m:02d}-01" for y, m in zip(df["year"], month)]
    df.insert(0, "date", date)
    return df[["date", "realgdp", "realcons", "realinv", "cpi", "unemp", "infl", "tbilrate"]]


def load_statecrime() -> pd.DataFrame:
    df = _sm("statecrime").reset_index()
    return df.rename(columns={df.columns[0]: "state"})


def load_engel() -> pd.DataFrame:
    return _sm("engel")[["income", "foodexp"]]


def load_stackloss() -> pd.DataFrame:
    df = _sm("stackloss")
    df.columns = [c.lower() for c in df.columns]
    return df


def load_sunspots() -> pd.DataFrame:
    df = _sm("sunspots").rename(columns={"YEAR": "year", "SUNACTIVITY": "sunactivity"})
    return _int_cols(df, "year")


def load_nile() -> pd.DataFrame:
    return _int_cols(_sm("nile"), "year")


def load_co2() -> pd.DataFrame:
    df = _sm("co2")
    df.index = pd.DatetimeIndex(df.index)
    return pd.DataFrame({"date": df.index.strftime("%Y-%m-%d"), "co2": df["co2"].to_numpy()})


# ---- scikit-learn (bundled CSVs through the load_* readers, not fetch_*) ---------

def _sk(name: str, **kw) -> object:
    from sklearn import datasets

    return getattr(datasets, name)(as_frame=True, **kw)


def load_iris() -> pd.DataFrame:
    b = _sk("load_iris")
    df = b.frame.copy()
    df.columns = [c.replace(" (cm)", "_cm").replace(" ", "_") for c in df.columns]
    df["species"] = [str(b.target_names[t]) for t in df.pop("target")]
    return df


def load_wine() -> pd.DataFrame:
    b = _sk("load_wine")
    df = b.frame[["alcohol", "malic_acid", "ash", "magnesium", "total_phenols",
                  "flavanoids", "color_intensity", "hue", "proline", "target"]].copy()
    df["cultivar"] = [f"cultivar_{int(t) + 1}" for t in df.pop("target")]
    return df


def load_breast_cancer() -> pd.DataFrame:
    b = _sk("load_breast_cancer")
    cols = ["mean radius", "mean texture", "mean perimeter", "mean area",
            "mean smoothness", "mean compactness", "mean concavity", "mean symmetry"]
    df = b.frame[cols].copy()
    df.columns = [c.replace(" ", "_") for c in cols]
    df["diagnosis"] = [str(b.target_names[t]) for t in b.frame["target"]]
    return df


def load_diabetes() -> pd.DataFrame:
    b = _sk("load_diabetes", scaled=False)
    df = b.frame.copy().rename(columns={"target": "progression"})
    df["sex"] = [f"sex_{int(s)}" for s in df["sex"]]
    return df


def _linnerud() -> tuple[pd.DataFrame, pd.DataFrame]:
    b = _sk("load_linnerud")
    ids = [f"A{i + 1:02d}" for i in range(len(b.data))]
    ex = b.data.copy()
    ex.columns = [c.lower() for c in ex.columns]
    ex.insert(0, "athlete", ids)
    ph = b.target.copy()
    ph.columns = [c.lower() for c in ph.columns]
    ph.insert(0, "athlete", ids)
    return _int_cols(ex, *ex.columns[1:]), _int_cols(ph, *ph.columns[1:])


def load_linnerud_exercise() -> pd.DataFrame:
    return _linnerud()[0]


def load_linnerud_physiological() -> pd.DataFrame:
    return _linnerud()[1]


# ---- palmerpenguins --------------------------------------------------------------

def load_penguins() -> pd.DataFrame:
    import palmerpenguins

    df = palmerpenguins.load_penguins()
    for c in ("species", "island", "sex"):
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


# ---- vega_datasets (local datasets only) -----------------------------------------

def _vega(name: str) -> pd.DataFrame:
    from vega_datasets import local_data

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its read_json keywords are deprecated in pandas 3
        return local_data(name).copy()


def _iso(series: pd.Series) -> list[str]:
    return list(pd.to_datetime(series).dt.strftime("%Y-%m-%d"))


def load_cars() -> pd.DataFrame:
    df = _vega("cars")
    df["Year"] = pd.to_datetime(df["Year"]).dt.year.astype("int64")
    df = df.rename(columns=lambda c: c.lower())
    return df


def load_seattle_weather() -> pd.DataFrame:
    df = _vega("seattle-weather")
    df["date"] = _iso(df["date"])
    return df


def load_vega_stocks() -> pd.DataFrame:
    df = _vega("stocks")
    df["date"] = _iso(df["date"])
    return df


def load_barley() -> pd.DataFrame:
    return _vega("barley")[["site", "variety", "year", "yield"]]


def load_us_employment() -> pd.DataFrame:
    df = _vega("us-employment")
    df["month"] = _iso(df["month"])
    keep = ["month", "nonfarm", "private", "goods_producing", "construction",
            "manufacturing", "information", "financial_activities", "government"]
    return df[[c for c in keep if c in df.columns]].rename(columns={"month": "date"})


def load_airports() -> pd.DataFrame:
    df = _vega("airports")
    return df[df["country"] == "USA"].drop(columns=["country"]).reset_index(drop=True)


# ---- plotly.data -----------------------------------------------------------------

def _plotly(name: str, **kw) -> pd.DataFrame:
    import plotly.data

    return getattr(plotly.data, name)(**kw).copy()


def load_tips() -> pd.DataFrame:
    return _plotly("tips")


def load_plotly_gapminder() -> pd.DataFrame:
    return _plotly("gapminder")[["country", "continent", "year", "lifeExp", "pop", "gdpPercap"]]


def load_election() -> pd.DataFrame:
    return _plotly("election")[["district", "Coderre", "Bergeron", "Joly", "total", "winner"]]


def load_experiment() -> pd.DataFrame:
    return _plotly("experiment")


# ---- bokeh_sampledata (licence allow-list) ---------------------------------------

def _bokeh(file: str, **kw) -> pd.DataFrame:
    bokeh_licence(file)
    df = pd.read_csv(_site("bokeh_sampledata") / "_data" / file, **kw)
    df.columns = [str(c).strip() for c in df.columns]
    for c in df.columns:
        if df[c].dtype == object or str(df[c].dtype) in ("str", "string"):
            df[c] = df[c].astype(object).where(df[c].isna(), df[c].astype(str).str.strip())
    return df


def load_titanic() -> pd.DataFrame:
    return _bokeh("titanic_all.csv")


def load_superstore() -> pd.DataFrame:
    df = _bokeh("SampleSuperstore.csv.gz")
    df.columns = [c.lower().replace(" ", "_").replace("-", "_") for c in df.columns]
    return df[["ship_mode", "segment", "region", "state", "category", "sub_category",
               "sales", "quantity", "discount", "profit"]]


def load_unemployment1948() -> pd.DataFrame:
    return _bokeh("unemployment1948.csv")


def load_marriages() -> pd.DataFrame:
    return _bokeh("us_marriages_divorces.csv")


def load_forensic_glass() -> pd.DataFrame:
    return _bokeh("forensic_glass.csv")


def load_lincoln_weather() -> pd.DataFrame:
    df = _bokeh("lincoln_weather.csv")[["DATE", "TMAX", "TMIN"]]
    df.columns = ["date", "tmax", "tmin"]
    df["date"] = _iso(df["date"])
    return df


def load_sprint() -> pd.DataFrame:
    return _bokeh("sprint.csv")


def load_mpg() -> pd.DataFrame:
    df = _bokeh("auto-mpg2.csv").drop(columns=["Unnamed: 0"])
    return df[["manufacturer", "model", "displ", "year", "cyl", "drv", "cty", "hwy", "class"]]


def load_bokeh_gapminder() -> pd.DataFrame:
    return _bokeh("gapminder.csv.gz")


def load_gapminder_regions() -> pd.DataFrame:
    return _bokeh("gapminder_regions.csv")[["Country", "Group"]]


def load_cows() -> pd.DataFrame:
    return _bokeh("cows.csv")

