"""AnalysisReport task source: open questions over DataAnalysis tables, answered by a report.

"What drives X in this table?": the agent finds the numeric column most strongly
associated with a target column and writes a short report. The truth (every column's
correlation with the target and the rows it rests on) is computed here on the episode's
table variant; :mod:`tasks.analysis_report.claims` checks the figures a report quotes
against it. No env logic: the judge and the env live in ``agentgym``.
"""

from tasks.analysis_report.claims import ClaimCheck, check_claims, numbers_in
from tasks.analysis_report.generator import ColumnFact, ReportQuestion, generate_report_question, report_tables

__all__ = ["ReportQuestion", "ColumnFact", "generate_report_question", "report_tables", "ClaimCheck", "check_claims",
           "numbers_in"]
