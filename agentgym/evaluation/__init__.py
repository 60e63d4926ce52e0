"""Evaluating agents on envs: the runner behind ``agentgym run`` and ``agentgym eval``.

One runner plays episodes with an :class:`Agent` (a scripted policy or a model), writes
one JSONL record per episode as it ends, and summarises a run (success with a confidence
interval, slices, pass@k, tool usage, infra failures apart); runs of the same env are
compared pairwise. Model clients: any OpenAI-compatible server (:class:`ChatClient`);
local checkpoints come from ``baselines`` through the ``agentgym.eval_models`` entry points.
"""

from agentgym.evaluation.agents import (Agent, ModelInfraError, ModelRejectedError, PolicyAgent, SeatState,
                                        TeamPolicyAgent, Turn)
from agentgym.evaluation.compare import FingerprintMismatchError, compare_runs
from agentgym.evaluation.episode import EpisodePlan
from agentgym.evaluation.model_agent import ChatAgent
from agentgym.evaluation.openai_client import ChatClient, ChatSettings, RateGate
from agentgym.evaluation.records import RecordWriter, RunFile, RunFileError, RunHeader, read_run
from agentgym.evaluation.run import EvalPlan, EvalResult, arun_eval, run_eval
from agentgym.evaluation.summary import summarize

__all__ = ["Agent", "PolicyAgent", "TeamPolicyAgent", "SeatState", "Turn", "ModelInfraError", "ModelRejectedError",
           "ChatAgent", "ChatClient", "ChatSettings", "RateGate", "EpisodePlan", "EvalPlan", "EvalResult",
           "run_eval", "arun_eval", "summarize", "compare_runs", "FingerprintMismatchError", "RunHeader",
           "RunFile", "RunFileError", "RecordWriter", "read_run"]
