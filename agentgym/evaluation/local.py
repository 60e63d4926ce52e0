"""Local models for ``agentgym eval --model PATH`` / ``--model vllm:PATH``.

The token-in/token-out agent that plays a local checkpoint the way training does (the
project's chat template and tool rendering, exact generated ids) lives in ``baselines``,
above agentgym; agentgym never imports it (imports point down). It is found instead
through the ``agentgym.eval_models`` entry-point group: ``hf`` for a transformers
checkpoint and ``vllm`` for the in-process vLLM engine, each naming a function
``(path, settings) -> Agent``.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from agentgym.errors import ConfigError

__all__ = ["load_local_agent", "EVAL_MODEL_GROUP"]

EVAL_MODEL_GROUP = "agentgym.eval_models"


def load_local_agent(model: str, settings: dict[str, Any]) -> Any:
    """The agent for a local checkpoint: ``vllm:PATH`` or a transformers ``PATH``."""
    kind, path = ("vllm", model[len("vllm:"):]) if model.startswith("vllm:") else ("hf", model)
    if not Path(path).is_dir():  # never a download from a hub: no network at run time
        raise ConfigError(f"Expected --model to be a local checkpoint directory (or vllm:DIR), actual value: "
                          f"{model!r} is not a directory; for a served model pass --base-url URL --model NAME")
    found = {ep.name: ep for ep in entry_points(group=EVAL_MODEL_GROUP)}
    if kind not in found:
        raise ConfigError(f"Expected the {kind!r} model loader of {EVAL_MODEL_GROUP!r} for --model {model} "
                          "(it comes with the baselines package: pip install -e '.[train]'), actual: not installed; "
                          "for a served model pass --base-url URL --model NAME")
    return found[kind].load()(path, settings)
