"""Old import path of AnalysisReview-v1, which now lives beside its family in
:mod:`agentgym.envs.analysis_review`; kept so existing imports keep working."""

from agentgym.envs.analysis_review import ANALYST, REVIEWER, AnalysisReviewEnv

__all__ = ["AnalysisReviewEnv", "ANALYST", "REVIEWER"]
