"""The bundled tables and what each column may be asked about.

A :class:`TableSpec` names a table (its CSV file name in the sandbox is
``<name>.csv``), how to load it from an installed package, its licence, and the *roles*
of its columns, which the question templates draw from:

- ``numeric``: measured quantities (means, thresholds, correlations);
- ``category``: low-cardinality labels for filters and group-bys;
- ``entity``: a column naming each row uniquely (``which X has the largest Y``);
- ``date``: an ISO ``YYYY-MM-DD`` column for time resampling;
- ``protected``: columns that never get missing values injected (keys, dates);
- ``ratios``: pairs of columns whose ratio is a meaningful derived quantity.

Tables are loaded once per process and checked against the manifest's sha256.
"""

from __future__ import annotations

import hashlib
import io
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import pandas as pd

from tasks.data_analysis import sources as S
from tasks.data_analysis.errors import TableChecksumError, UnknownTableError
from tasks.data_analysis.recorded import manifest_entry

__all__ = ["TableSpec", "TABLES", "table_spec", "load_table", "table_csv", "csv_sha256"]


@dataclass(frozen=True)
class TableSpec:
    name: str
    package: str
    """Distribution name whose wheel ships the data (its version goes in the manifest)."""
    source: str
    """Where in the package the data comes from, for people auditing the manifest."""
    title: str
    loader: Callable[[], pd.DataFrame] = field(repr=False, compare=False)
    licence: Callable[[], str] | str = field(repr=False, compare=False)
    numeric: tuple[str, ...] = ()
    category: tuple[str, ...] = ()
    entity: str | None = None
    date: str | None = None
    protected: tuple[str, ...] = ()
    ratios: tuple[tuple[str, str], ...] = ()
    """(numerator, denominator) pairs whose ratio means something (tip / total_bill),
    for the derived-column questions; the denominator is positive in the data."""

    def licence_text(self) -> str:
        return self.licence() if callable(self.licence) else self.licence

    def no_missing(self) -> tuple[str, ...]:
        keep = set(self.protected)
        keep.update(c for c in (self.entity, self.date) if c)
        return tuple(sorted(keep))


def _sm(dataset: str) -> Callable[[], str]:
    return lambda: S.statsmodels_licence(dataset)


def _bk(file: str) -> Callable[[], str]:
    return lambda: f"{S.bokeh_licence(file)} (bokeh_sampledata inventory)"


_SK = "BSD-3-Clause (scikit-learn); data from the UCI repository, CC BY 4.0"
_VEGA = "BSD-3-Clause (vega_datasets package, bundled local dataset)"
_PLOTLY = "MIT (plotly package, bundled dataset)"

_SPECS: tuple[TableSpec, ...] = (
    TableSpec("penguins", "palmerpenguins", "palmerpenguins/data/penguins.csv",
              "Palmer Archipelago penguins", S.load_penguins, "CC0-1.0",
              numeric=("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"),
              category=("species", "island", "sex"),
              ratios=(("body_mass_g", "flipper_length_mm"), ("bill_length_mm", "bill_depth_mm"))),
    TableSpec("iris", "scikit-learn", "sklearn/datasets/data/iris.csv", "Fisher's iris",
              S.load_iris, _SK,
              numeric=("sepal_length_cm", "sepal_width_cm", "petal_length_cm", "petal_width_cm"),
              category=("species",),
              ratios=(("petal_length_cm", "petal_width_cm"), ("sepal_length_cm", "sepal_width_cm"))),
    TableSpec("wine", "scikit-learn", "sklearn/datasets/data/wine_data.csv",
              "Wine chemical analysis by cultivar", S.load_wine, _SK,
              numeric=("alcohol", "malic_acid", "ash", "magnesium", "total_phenols",
                       "flavanoids", "color_intensity", "hue", "proline"),
              category=("cultivar",), ratios=(("flavanoids", "total_phenols"),)),
    TableSpec("breast_cancer", "scikit-learn", "sklearn/datasets/data/breast_cancer.csv",
              "Wisconsin diagnostic breast cancer (cell nucleus means)", S.load_breast_cancer, _SK,
              numeric=("mean_radius", "mean_texture", "mean_perimeter", "mean_area",
                       "mean_smoothness", "mean_compactness", "mean_concavity"),
              category=("diagnosis",)),
    TableSpec("diabetes", "scikit-learn", "sklearn/datasets/data/diabetes_data_raw.csv.gz",
              "Diabetes progression (raw, unscaled)", S.load_diabetes,
              "BSD-3-Clause (scikit-learn); Efron et al. (2004) diabetes data",
              numeric=("age", "bmi", "bp", "s1", "s2", "s3", "s5", "progression"),
              category=("sex",)),
    TableSpec("linnerud_exercise", "scikit-learn", "sklearn/datasets/data/linnerud_exercise.csv",
              "Linnerud exercise counts per athlete", S.load_linnerud_exercise,
              "BSD-3-Clause (scikit-learn)", numeric=("chins", "situps", "jumps"),
              entity="athlete", protected=("athlete",)),
    TableSpec("linnerud_physiological", "scikit-learn",
              "sklearn/datasets/data/linnerud_physiological.csv",
              "Linnerud physiological measurements per athlete", S.load_linnerud_physiological,
              "BSD-3-Clause (scikit-learn)", numeric=("weight", "waist", "pulse"),
              entity="athlete", protected=("athlete",)),
    TableSpec("grunfeld", "statsmodels", "statsmodels/datasets/grunfeld",
              "Grunfeld (1950) investment by firm and year", S.load_grunfeld, _sm("grunfeld"),
              numeric=("invest", "value", "capital"), category=("firm",),
              protected=("firm", "year"), ratios=(("invest", "capital"), ("invest", "value"))),
    TableSpec("macrodata", "statsmodels", "statsmodels/datasets/macrodata",
              "US quarterly macroeconomic series 1959-2009", S.load_macrodata, _sm("macrodata"),
              numeric=("realgdp", "realcons", "realinv", "cpi", "unemp", "infl", "tbilrate"),
              date="date", ratios=(("realcons", "realgdp"), ("realinv", "realgdp"))),
    TableSpec("statecrime", "statsmodels", "statsmodels/datasets/statecrime",
              "US state crime and demographics, 2009", S.load_statecrime, _sm("statecrime"),
              numeric=("violent", "murder", "hs_grad", "poverty", "single", "white", "urban"),
              entity="state", ratios=(("murder", "violent"),)),
    TableSpec("engel", "statsmodels", "statsmodels/datasets/engel",
              "Engel (1857) household income and food expenditure", S.load_engel, _sm("engel"),
              numeric=("income", "foodexp")),
    TableSpec("stackloss", "statsmodels", "statsmodels/datasets/stackloss",
              "Brownlee's stack loss plant data", S.load_stackloss, _sm("stackloss"),
              numeric=("stackloss", "airflow", "watertemp", "acidconc")),
    TableSpec("sunspots", "statsmodels", "statsmodels/datasets/sunspots",
              "Yearly sunspot activity 1700-2008", S.load_sunspots, _sm("sunspots"),
              numeric=("sunactivity",), entity="year", protected=("year",)),
    TableSpec("nile", "statsmodels", "statsmodels/datasets/nile",
              "Nile river yearly flow at Aswan 1871-1970", S.load_nile, _sm("nile"),
              numeric=("volume",), entity="year", protected=("year",)),
    TableSpec("co2", "statsmodels", "statsmodels/datasets/co2",
              "Mauna Loa weekly atmospheric CO2", S.load_co2, _sm("co2"),
              numeric=("co2",), date="date"),
    TableSpec("cars", "vega_datasets", "vega_datasets/_data/cars.json", "Cars 1970-1982",
              S.load_cars, _VEGA,
              numeric=("miles_per_gallon", "displacement", "horsepower", "weight_in_lbs",
                       "acceleration"),
              category=("origin", "cylinders"),
              ratios=(("horsepower", "weight_in_lbs"), ("displacement", "cylinders"))),
    TableSpec("seattle_weather", "vega_datasets", "vega_datasets/_data/seattle-weather.csv",
              "Seattle daily weather 2012-2015", S.load_seattle_weather, _VEGA,
              numeric=("precipitation", "temp_max", "temp_min", "wind"),
              category=("weather",), date="date"),
    TableSpec("stocks", "vega_datasets", "vega_datasets/_data/stocks.csv",
              "Monthly closing prices of five stocks", S.load_vega_stocks, _VEGA,
              numeric=("price",), category=("symbol",), date="date", protected=("symbol",)),
    TableSpec("barley", "vega_datasets", "vega_datasets/_data/barley.json",
              "Immer et al. (1934) barley yields by site, variety and year", S.load_barley,
              _VEGA, numeric=("yield",), category=("site", "variety", "year")),
    TableSpec("us_employment", "vega_datasets", "vega_datasets/_data/us-employment.csv",
              "US monthly employment by sector (thousands)", S.load_us_employment, _VEGA,
              numeric=("nonfarm", "private", "goods_producing", "construction",
                       "manufacturing", "information", "government"),
              date="date"),
    TableSpec("airports", "vega_datasets", "vega_datasets/_data/airports.csv",
              "US airports", S.load_airports, _VEGA,
              numeric=("latitude", "longitude"), category=("state",), entity="iata"),
    TableSpec("tips", "plotly", "plotly/package_data/datasets/tips.csv.gz",
              "Restaurant tips", S.load_tips, _PLOTLY,
              numeric=("total_bill", "tip"), category=("sex", "smoker", "day", "time", "size"),
              ratios=(("tip", "total_bill"),)),
    TableSpec("gapminder", "plotly", "plotly/package_data/datasets/gapminder.csv.gz",
              "Gapminder life expectancy, population and GDP per capita", S.load_plotly_gapminder,
              _PLOTLY, numeric=("lifeExp", "pop", "gdpPercap"),
              category=("continent", "year"), protected=("country", "year")),
    TableSpec("election", "plotly", "plotly/package_data/datasets/election.csv.gz",
              "Montreal 2013 mayoral election by district", S.load_election, _PLOTLY,
              numeric=("Coderre", "Bergeron", "Joly", "total"), category=("winner",),
              entity="district",
              ratios=(("Coderre", "total"), ("Bergeron", "total"), ("Joly", "total"))),
    TableSpec("experiment", "plotly", "plotly/package_data/datasets/experiment.csv.gz",
              "Synthetic experiment results by gender and group", S.load_experiment, _PLOTLY,
              numeric=("experiment_1", "experiment_2", "experiment_3"),
              category=("gender", "group")),
    TableSpec("titanic", "bokeh_sampledata", "bokeh_sampledata/_data/titanic_all.csv",
              "Titanic passengers", S.load_titanic, _bk("titanic_all.csv"),
              numeric=("age", "survived"), category=("class", "sex")),
    TableSpec("superstore", "bokeh_sampledata", "bokeh_sampledata/_data/SampleSuperstore.csv.gz",
              "Sample superstore orders", S.load_superstore, _bk("SampleSuperstore.csv.gz"),
              numeric=("sales", "quantity", "discount", "profit"),
              category=("ship_mode", "segment", "region", "category"),
              ratios=(("profit", "sales"), ("sales", "quantity"))),
    TableSpec("unemployment1948", "bokeh_sampledata",
              "bokeh_sampledata/_data/unemployment1948.csv",
              "US monthly unemployment rate by year since 1948", S.load_unemployment1948,
              _bk("unemployment1948.csv"),
              numeric=("Jan", "Apr", "Jul", "Oct", "Annual"), entity="Year",
              protected=("Year",), ratios=(("Jul", "Jan"), ("Oct", "Apr"))),
    TableSpec("marriages", "bokeh_sampledata", "bokeh_sampledata/_data/us_marriages_divorces.csv",
              "US marriages and divorces per year", S.load_marriages,
              _bk("us_marriages_divorces.csv"),
              numeric=("Marriages_per_1000", "Divorces_per_1000"), entity="Year",
              protected=("Year",), ratios=(("Divorces_per_1000", "Marriages_per_1000"),)),
    TableSpec("forensic_glass", "bokeh_sampledata", "bokeh_sampledata/_data/forensic_glass.csv",
              "Glass fragments' chemistry by glass type", S.load_forensic_glass,
              _bk("forensic_glass.csv"),
              numeric=("RI", "Na", "Mg", "Al", "Si", "Ca"), category=("type",),
              ratios=(("Na", "Ca"),)),
    TableSpec("lincoln_weather", "bokeh_sampledata", "bokeh_sampledata/_data/lincoln_weather.csv",
              "Lincoln, Nebraska daily temperatures 2016", S.load_lincoln_weather,
              _bk("lincoln_weather.csv"), numeric=("tmax", "tmin"), date="date"),
    TableSpec("mpg", "bokeh_sampledata", "bokeh_sampledata/_data/auto-mpg2.csv",
              "Fuel economy of popular car models 1999 and 2008", S.load_mpg,
              _bk("auto-mpg2.csv"), numeric=("displ", "cty", "hwy"),
              category=("manufacturer", "drv", "class", "year", "cyl"),
              ratios=(("hwy", "cty"), ("displ", "cyl"))),
    TableSpec("world_gapminder", "bokeh_sampledata", "bokeh_sampledata/_data/gapminder.csv.gz",
              "Gapminder fertility, life expectancy and population by country and year",
              S.load_bokeh_gapminder, _bk("gapminder.csv.gz"),
              numeric=("fertility", "life_expectancy", "population"),
              protected=("country", "year")),
    TableSpec("gapminder_regions", "bokeh_sampledata",
              "bokeh_sampledata/_data/gapminder_regions.csv",
              "Region of each Gapminder country", S.load_gapminder_regions,
              _bk("gapminder_regions.csv"), category=("Group",), entity="Country",
              protected=("Country", "Group")),
    TableSpec("cows", "bokeh_sampledata", "bokeh_sampledata/_data/cows.csv",
              "Butterfat of milk by cattle breed and age", S.load_cows, _bk("cows.csv"),
              numeric=("butterfat",), category=("breed", "age")),
)

TABLES: dict[str, TableSpec] = {t.name: t for t in _SPECS}


def table_spec(name: str) -> TableSpec:
    try:
        return TABLES[name]
    except KeyError:
        raise UnknownTableError(
            f"Expected one of {sorted(TABLES)}, actual value: {name!r}"
        ) from None


def table_csv(df: pd.DataFrame) -> bytes:
    """The canonical CSV bytes of a frame: no index, full float precision, LF endings."""
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue().encode("utf-8")


def csv_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=None)
def _load_checked(name: str) -> tuple[pd.DataFrame, str]:
    spec = table_spec(name)
    raw = spec.loader()
    data = table_csv(raw)
    digest = csv_sha256(data)
    entry = manifest_entry(name)
    if entry is not None and entry["sha256"] != digest:
        raise TableChecksumError(
            f"Table {name!r} from {spec.package} {S.package_version(spec.package)} has sha256 "
            f"{digest[:12]}..., the manifest records {entry['sha256'][:12]}... (package "
            f"version {entry['version']}). Rebuild with "
            "`python -m tasks.data_analysis.manifest --write` and review the change."
        )
    # Re-read the canonical CSV so every later step sees exactly what a CSV reader sees.
    df = pd.read_csv(io.BytesIO(data))
    return df, digest


# Loaders import their data packages on first use; two threads importing the same package at
# once can hit Python's import deadlock detection (seen with plotly -> narwhals when an env
# generates questions in worker threads). Loading is rare, so it is simply serialised.
_load_lock = threading.RLock()


def load_table(name: str, *, verify: bool = True) -> pd.DataFrame:
    """A fresh copy of the canonical table (as read back from its canonical CSV). Thread-safe."""
    with _load_lock:
        if not verify:
            return pd.read_csv(io.BytesIO(table_csv(table_spec(name).loader())))
        frame = _load_checked(name)[0]
    return frame.copy()
