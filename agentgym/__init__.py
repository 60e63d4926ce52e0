"""agentgym: Gymnasium environments in which LLM agents solve tasks by calling tools.

>>> import gymnasium as gym, agentgym
>>> env = gym.make("agentgym/Calculator-v0")
>>> obs, info = env.reset(seed=0)
>>> sorted(t["function"]["name"] for t in info["tools"])
['answer', 'calculate']
"""

from agentgym import telemetry, vector
from agentgym.env import ToolEnv
from agentgym.envs import ENVS, register_all
from agentgym.errors import (
    AgentError,
    AgentgymError,
    ConfigError,
    EpisodeFinishedError,
    InfraError,
    InvalidOptionError,
    ResetNeededError,
    ToolTimeout,
)
from agentgym.executor import ToolExecutor, ToolResult
from agentgym.family import ANSWER_TOOL, EpisodeView, TaskFamily
from agentgym.fingerprint import Fingerprint, fingerprint_diff
from agentgym.parsing import HermesParser, ParsedCall, TagParser
from agentgym.telemetry import Telemetry
from agentgym.tools import Tool
from agentgym.wrappers import ToolWrapper

__all__ = [
    "ToolEnv", "TaskFamily", "EpisodeView", "ANSWER_TOOL", "ToolWrapper", "Tool", "ToolExecutor", "ToolResult", "Telemetry", "Fingerprint", "fingerprint_diff",
    "HermesParser", "TagParser", "ParsedCall", "ENVS", "telemetry", "vector",
    "AgentgymError", "AgentError", "InfraError", "ConfigError", "EpisodeFinishedError",
    "InvalidOptionError", "ResetNeededError", "ToolTimeout",
]

__version__ = "0.1.0"

register_all()
