"""Check an env id and its kwargs before anything is built (the CLI and training configs).

``gym.make`` reports an unknown id deep in a stack trace and an unknown kwarg as a
``TypeError`` from the constructor; a kwarg with a bad value may only fail when the
first episode needs it, where it looks like an infrastructure failure and the episode is
dropped as ``infra_failed``. These checks turn each into a ``ConfigError`` that names the
id or kwarg and what is allowed, from the registry and the constructor's signature (its
``Literal`` types and plain scalar types).

>>> import agentgym
>>> check_env_kwargs("agentgym/Calculator-v0", {"difficulty": 2})
>>> check_env_id("agentgym/Calculatr-v0")
Traceback (most recent call last):
...
agentgym.errors.ConfigError: Unknown environment 'agentgym/Calculatr-v0'; did you mean 'agentgym/Calculator-v0'? (`agentgym envs` lists them)
"""

from __future__ import annotations

import difflib
import inspect
import types
import typing
from typing import Any, Literal

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from agentgym.errors import ConfigError

__all__ = ["check_env_id", "check_env_kwargs", "check_train_part", "env_kwargs_of"]


def _multi_agent_ids() -> list[str]:
    from agentgym.multi_agent import MULTI_AGENT_ENVS

    return [s.env_id for s in MULTI_AGENT_ENVS]


def _is_multi_agent(env_id: str) -> bool:
    from agentgym.multi_agent import is_multi_agent_env

    return is_multi_agent_env(env_id)


def check_env_id(env_id: str, *, multi_agent: bool = True) -> None:
    """Raise ``ConfigError`` (naming the closest ids) unless ``env_id`` is registered with
    Gymnasium or, when ``multi_agent``, as a multi-agent env."""
    if env_id in gym.registry or (multi_agent and _is_multi_agent(env_id)):
        return
    retired = _retired_ids().get(env_id)
    if retired is not None:
        raise ConfigError(f"{env_id} was retired: its tasks changed, so runs on it could not be matched with runs "
                          f"on the new version (their fingerprints differ). Use {retired!r}.")
    if _is_multi_agent(env_id):
        raise ConfigError(f"{env_id!r} is a multi-agent env; this takes a single-agent env (`agentgym envs` "
                          "lists both kinds)")
    known = list(gym.registry) + (_multi_agent_ids() if multi_agent else [])
    close = difflib.get_close_matches(env_id, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"Unknown environment {env_id!r}{hint} (`agentgym envs` lists them)")


def _retired_ids() -> dict[str, str]:
    from agentgym.envs import RETIRED_IDS
    from agentgym.multi_agent import RETIRED_IDS as RETIRED_TEAM_IDS

    return {**RETIRED_IDS, **RETIRED_TEAM_IDS}


def _env_class(env_id: str) -> tuple[Any, dict[str, Any]]:
    """The env's class (or creator) and the kwargs its registration passes to it."""
    if env_id in gym.registry:
        registered = gym.spec(env_id)
        entry_point = registered.entry_point
        return (load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point), registered.kwargs
    from agentgym.multi_agent import spec

    return spec(env_id).load(), spec(env_id).kwargs


def _parameters_of(env_id: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    cls, registered = _env_class(env_id)
    family_class = kwargs.get("family_class", registered.get("family_class"))  # ReviewTeamEnv takes one
    return _init_parameters(cls, family_class)


def _init_parameters(cls: Any, family_class: Any = None) -> tuple[dict[str, Any], bool]:
    """Keyword parameters of ``cls``'s constructor with their types, and whether that
    list is complete. An env built on ``ToolEnv`` or ``TeamEnv`` passes ``**kwargs`` on
    to that base (the documented contract), and the base passes what is not its own to
    the env's ``family_class`` (``cls``'s, or the one given to it as a kwarg): both are
    followed, so an env never repeats its family's signature. Elsewhere ``**kwargs``
    leaves the list open."""
    from agentgym.env import ToolEnv
    from agentgym.multi_agent.base import TeamEnv

    drivers = (ToolEnv, TeamEnv)
    params: dict[str, Any] = {}
    for klass in getattr(cls, "__mro__", (cls,)):
        if klass is object:  # a family without a constructor of its own takes nothing
            return params, True
        init = klass.__dict__.get("__init__") if isinstance(klass, type) else klass
        if init is None:
            continue
        try:
            hints = typing.get_type_hints(init)
        except Exception:  # noqa: BLE001 - an unresolvable annotation only loses the type check
            hints = {}
        signature = inspect.signature(init)
        for p in signature.parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
                params.setdefault(p.name, hints.get(p.name, Any))
        if not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
            return params, True
        if klass in drivers:
            family_class = family_class or getattr(cls, "family_class", None)  # a given one wins, as in make
            if family_class is None:  # the base refuses keywords it has no family for
                return params, True
            family_params, complete = _init_parameters(family_class)
            for name, tp in family_params.items():
                params.setdefault(name, tp)
            return params, complete
        if not (isinstance(cls, type) and issubclass(cls, drivers)):
            return params, False
    return params, False


def _matches(value: Any, tp: Any) -> bool:
    """Whether ``value`` fits ``tp`` as far as it can be checked; unknown types pass."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    kind = origin if origin is not None else tp
    try:
        return not isinstance(kind, type) or isinstance(value, kind)
    except TypeError:  # a Protocol that is not runtime-checkable: cannot tell
        return True


def _describe(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return f"one of {list(typing.get_args(tp))}"
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    return "None" if tp is type(None) else getattr(tp, "__name__", str(tp))


def env_kwargs_of(env_id: str) -> dict[str, Any]:
    """The keyword arguments ``env_id``'s env takes (its own, its base's and its family's),
    with their types; ``agentgym stress`` asks it whether an env takes ``retriever_url``.

    >>> "difficulty" in env_kwargs_of("agentgym/Calculator-v0")
    True
    """
    check_env_id(env_id)
    return _parameters_of(env_id, {})[0]


def check_env_kwargs(env_id: str, kwargs: dict[str, Any]) -> None:
    """Raise ``ConfigError`` for a kwarg the env does not take, or a value of the wrong
    type or outside its ``Literal`` choices. Imports the env's module, not its data."""
    check_env_id(env_id)
    params, complete = _parameters_of(env_id, kwargs)
    for name, value in kwargs.items():
        if name not in params:
            if complete:
                close = difflib.get_close_matches(name, list(params), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"Unknown kwarg {name!r} for {env_id}{hint} (it takes {sorted(params)})")
            continue
        if not _matches(value, params[name]):
            raise ConfigError(f"Expected kwarg {name} of {env_id} to be {_describe(params[name])}, "
                              f"actual value: {value!r}")


def check_train_part(train_part: Any) -> tuple[int, int] | None:
    """An env's ``train_part`` kwarg, ``[k, n]``: the k-th of n fixed parts of the train
    split (Search: questions; DataAnalysis-v2: tables), as a tuple; None stays None."""
    if train_part is None:
        return None
    part = list(train_part) if isinstance(train_part, (list, tuple)) else []
    if len(part) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in part) or not 0 <= part[0] < part[1] or part[1] < 2:
        raise ConfigError(f"Expected train_part to be [k, n] with 0 <= k < n and n >= 2, actual value: {train_part!r}")
    return part[0], part[1]
