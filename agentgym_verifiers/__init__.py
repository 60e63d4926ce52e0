"""verifiers' name for agentgym's envs: taskset id ``agentgym-verifiers``.

verifiers imports a taskset (and its default env and harness) by id as a top-level module
whose ``__all__`` exports one subclass of each; a dotted path cannot be an id. This package
is only that entry point: the adapter lives in :mod:`agentgym.interop.verifiers_env`.
"""

from agentgym.interop.verifiers_env import AgentgymEnv, AgentgymHarness, AgentgymTaskset

__all__ = ["AgentgymEnv", "AgentgymHarness", "AgentgymTaskset"]
