"""Each vLLM engine compiles into a torch-inductor cache of its own.

Two engines compiling at once into the machine-wide inductor cache left a 0-byte kernel
there, and every later engine on the machine died loading it ("file too short"). An
engine now starts with ``TORCHINDUCTOR_CACHE_DIR`` pointing at a private directory
(unless the user set one), removed when it closes. Runs without vLLM: the engine is
built against a stand-in ``vllm`` whose ``LLM`` records the cache directory it was
started with and writes a kernel there, as a compiling engine would.
"""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from baselines.engines import vllm_async
from baselines.engines.compile_cache import CACHE_ENV, PrivateCompileCache


def test_each_cache_is_a_fresh_private_directory_removed_on_close():
    environ: dict[str, str] = {}
    first, second = PrivateCompileCache(environ), PrivateCompileCache(environ)
    assert first.path is not None and second.path is not None and first.path != second.path
    assert first.path.is_dir() and second.path.is_dir() and not any(first.path.iterdir())
    assert environ[CACHE_ENV] == str(second.path)  # the engine starting now gets the newest
    one, two = first.path, second.path
    second.close()
    assert not two.exists() and environ[CACHE_ENV] == str(one)
    (one / "kernel.so").write_bytes(b"")
    first.close()
    first.close()  # idempotent
    assert not one.exists() and CACHE_ENV not in environ


def test_a_cache_directory_the_user_set_is_left_alone(tmp_path):
    environ = {CACHE_ENV: str(tmp_path)}
    cache = PrivateCompileCache(environ)
    assert cache.path is None and environ[CACHE_ENV] == str(tmp_path)
    cache.close()
    assert tmp_path.is_dir() and environ[CACHE_ENV] == str(tmp_path)


class _CompilingLLM:
    """Stands in for vLLM's ``AsyncLLM``: notes the inductor cache it starts with and writes a kernel."""

    started_with: list[str | None] = []

    def __init__(self, **_kwargs) -> None:
        cache = os.environ.get(CACHE_ENV)
        type(self).started_with.append(cache)
        if cache:
            (Path(cache) / "kernel.so").write_bytes(b"\x7fELF")

    def shutdown(self, timeout=None) -> None:
        pass


def _fake_vllm(monkeypatch, llm_class: type = _CompilingLLM) -> None:
    """No vLLM: the platform is CPU and ``AsyncLLM.from_engine_args`` (where the engine
    process starts) builds ``llm_class`` from the engine's arguments."""
    platform = types.SimpleNamespace(device_name="cpu", is_cpu=lambda: True, is_cuda_alike=lambda: False)
    monkeypatch.setattr(vllm_async, "import_vllm", lambda: (types.SimpleNamespace(), platform))

    async def build(self):
        return llm_class(**self._engine_args)

    monkeypatch.setattr(vllm_async.AsyncVLLMEngine, "_build", build)
    _CompilingLLM.started_with = []


def _model_dir(tmp_path) -> Path:
    from transformers import Qwen2Config

    Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1).save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def _engine(tmp_path) -> vllm_async.AsyncVLLMEngine:
    return vllm_async.AsyncVLLMEngine(str(_model_dir(tmp_path)), enforce_eager=True, dtype="float32")


def test_two_engines_compile_into_caches_of_their_own(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    _fake_vllm(monkeypatch)
    a = _engine(tmp_path / "a")
    b = _engine(tmp_path / "b")
    first, second = _CompilingLLM.started_with
    assert first and second and first != second  # no kernel file two engines write at once
    assert Path(first).is_dir() and Path(second).is_dir()
    b.close()
    a.close()
    assert not Path(first).exists() and not Path(second).exists()
    assert CACHE_ENV not in os.environ


def test_an_engine_uses_the_cache_the_user_set(tmp_path, monkeypatch):
    mine = tmp_path / "inductor"
    mine.mkdir()
    monkeypatch.setenv(CACHE_ENV, str(mine))
    _fake_vllm(monkeypatch)
    _engine(tmp_path).close()
    assert _CompilingLLM.started_with == [str(mine)] and (mine / "kernel.so").exists()


def test_an_engine_that_fails_to_start_removes_its_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    seen: list[str] = []

    class Broken(_CompilingLLM):
        def __init__(self, **kwargs) -> None:
            seen.append(os.environ[CACHE_ENV])
            raise RuntimeError("engine core failed to start")

    _fake_vllm(monkeypatch, Broken)
    with pytest.raises(RuntimeError, match="failed to start"):
        _engine(tmp_path)
    assert seen and not Path(seen[0]).exists() and CACHE_ENV not in os.environ
