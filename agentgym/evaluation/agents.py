"""Who acts in an evaluated episode: a scripted policy or a model, behind one interface.

``agentgym run --policy`` and ``agentgym eval --model`` play episodes through the same
runner (:mod:`agentgym.evaluation.episode`), so an oracle's records, a baseline's and a
model's have one format and one summary. The runner keeps, per seat, a
:class:`SeatState` (the observation, the env's last ``info``, the chat so far) and asks
the :class:`Agent` for a :class:`Turn`: the action text the env parses, plus what the
record needs (the assistant message as the model sent it, tokens, latency).
"""

from __future__ import annotations

import inspect
import zlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentgym.errors import AgentgymError
from agentgym.seeding import derived_seed

__all__ = ["Turn", "SeatState", "Agent", "PolicyAgent", "TeamPolicyAgent", "ModelInfraError", "ModelRejectedError"]


class ModelInfraError(AgentgymError, RuntimeError):
    """The model server failed (unreachable, 5xx, timed out, a response that is not a chat
    completion) after its retries. The episode is ``infra_failed``: it says nothing about
    the agent and is reported apart, never scored 0."""


class ModelRejectedError(AgentgymError, ValueError):
    """The server refused the request as invalid (HTTP 400, e.g. the conversation no longer
    fits the context window): the episode ends as the agent's outcome, scored as it stands."""


@dataclass
class Turn:
    """One action of one seat.

    Attributes:
        action: the text the env parses (a native tool call already rendered in the env's
            parser format).
        message: the assistant message for the chat history (may carry ``tool_calls``).
        prompt_tokens / completion_tokens: as the model reported them (0 for policies).
        latency_s: how long the agent took (model round trips, retries and waits included).
    """

    action: str
    message: dict[str, Any]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0


@dataclass
class SeatState:
    """What one seat's agent knows when it acts: the env (policies read its hidden
    solution through it), the latest observation and ``info``, and the chat so far."""

    env: Any
    observation: str
    info: dict[str, Any]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    episode: int = 0
    seat: str | None = None
    turn: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def turn_seed(self) -> int | None:
        """The sampling seed of this seat's current turn, derived from the episode's
        (``extra["sampling_seed"]``; ``None`` without one), the seat and the turn: distinct
        for every turn of every seat of every episode. (``episode seed + turn`` gave
        episode i's second turn episode i + 1's first seed.)"""
        base = self.extra.get("sampling_seed")
        if base is None:
            return None
        seat = 0 if self.seat is None else zlib.crc32(self.seat.encode()) + 1
        return derived_seed(int(base), seat, self.turn)


@runtime_checkable
class Agent(Protocol):
    """Maps a seat's state to its next turn. ``describe()`` goes into the run header."""

    async def act(self, state: SeatState) -> Turn: ...

    def describe(self) -> dict[str, Any]: ...

    def sampling(self) -> dict[str, Any]: ...


class PolicyAgent:
    """A scripted :data:`agentgym.policies.Policy` (oracle, random, baselines) as an agent."""

    def __init__(self, name: str, policy: Any) -> None:
        self.name = name
        self.policy = policy

    async def act(self, state: SeatState) -> Turn:
        action = self.policy(state.env, state.observation, state.info)
        if inspect.isawaitable(action):
            action = await action
        return Turn(str(action), {"role": "assistant", "content": str(action)})

    def describe(self) -> dict[str, Any]:
        return {"kind": "policy", "name": self.name}

    def sampling(self) -> dict[str, Any]:
        return {}


class TeamPolicyAgent:
    """A scripted team policy (``agentgym.multi_agent`` oracle, random) as an agent: it picks
    the actions of the whole team at once, as team policies do."""

    def __init__(self, name: str, policy: Any) -> None:
        self.name = name
        self.policy = policy

    async def act_team(self, env: Any, seats: dict[str, SeatState]) -> dict[str, Turn]:
        actions = self.policy(env, {a: s.observation for a, s in seats.items()}, {a: s.info for a, s in seats.items()})
        if inspect.isawaitable(actions):
            actions = await actions
        return {a: Turn(str(text), {"role": "assistant", "content": str(text)}) for a, text in actions.items()}

    async def act(self, state: SeatState) -> Turn:
        raise TypeError("a team policy acts for the whole team: use act_team")

    def describe(self) -> dict[str, Any]:
        return {"kind": "team_policy", "name": self.name}

    def sampling(self) -> dict[str, Any]:
        return {}
