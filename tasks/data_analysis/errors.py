"""Errors of the data-analysis task source. One base class, specific subclasses."""

from __future__ import annotations

__all__ = [
    "DataAnalysisError",
    "LicenceNotAllowedError",
    "TableChecksumError",
    "UnknownTableError",
    "ReferenceCodeError",
    "GenerationError",
]


class DataAnalysisError(Exception):
    """Base class of every error raised by :mod:`tasks.data_analysis`."""


class LicenceNotAllowedError(DataAnalysisError, PermissionError):
    """A table's recorded licence is not on the allow-list; the table cannot be used."""


class TableChecksumError(DataAnalysisError, ValueError):
    """An installed table no longer matches the manifest (a package upgrade changed it).

    Rebuild the manifest with ``python -m tasks.data_analysis.manifest --write`` and
    review the diff: the environment's fingerprint changes with it.
    """


class UnknownTableError(DataAnalysisError, KeyError):
    """A table name that is not in :data:`tasks.data_analysis.tables.TABLES`."""


class ReferenceCodeError(DataAnalysisError, RuntimeError):
    """A template's reference code raised or returned a value that breaks its schema."""


class GenerationError(DataAnalysisError, RuntimeError):
    """No unambiguous question could be drawn within the attempt budget."""
