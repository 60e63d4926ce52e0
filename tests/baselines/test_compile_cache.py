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

from baselines.engines import vllm as vllm_engine
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
    """Stands in for ``vllm.LLM``: notes the inductor cache it starts with and writes a kernel."""

    started_with: list[str | None] = []

    def __init__(self, **_kwargs) -> None:
        cache = os.environ.get(CACHE_ENV)
        type(self).started_with.append(cache)
        if cache:
            (Path(cache) / "kernel.so").write_bytes(b"\x7fELF")
        self.llm_engine = types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=lambda: None))


def _fake_vllm(monkeypatch):
    platform = types.SimpleNamespace(device_name="cpu", is_sleep_mode_available=lambda: False, is_cpu=lambda: True,
                                     is_cuda_alike=lambda: False)
    monkeypatch.setattr(vllm_engine, "_import_vllm", lambda: (types.SimpleNamespace(LLM=_CompilingLLM), platform))
    _CompilingLLM.started_with = []


def _model_dir(tmp_path) -> Path:
    from transformers import Qwen2Config

    Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1).save_pretrained(tmp_path / "model")
    return tmp_path / "model"


def test_two_engines_compile_into_caches_of_their_own(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    _fake_vllm(monkeypatch)
    model = _model_dir(tmp_path)
    a = vllm_engine.VLLMEngine(str(model), enforce_eager=True, dtype="float32")
    b = vllm_engine.VLLMEngine(str(model), enforce_eager=True, dtype="float32")
    first, second = _CompilingLLM.started_with
    assert first and second and first != second  # no kernel file two engines write at once
    b.close()
    a.close()
    assert not Path(first).exists() and not Path(second).exists()
    assert CACHE_ENV not in os.environ


def test_an_engine_uses_the_cache_the_user_set(tmp_path, monkeypatch):
    mine = tmp_path / "inductor"
    mine.mkdir()
    monkeypatch.setenv(CACHE_ENV, str(mine))
    _fake_vllm(monkeypatch)
    engine = vllm_engine.VLLMEngine(str(_model_dir(tmp_path)), enforce_eager=True, dtype="float32")
    engine.close()
    assert _CompilingLLM.started_with == [str(mine)] and (mine / "kernel.so").exists()


def test_an_engine_that_fails_to_start_removes_its_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    _fake_vllm(monkeypatch)
    seen: list[str] = []

    class Broken(_CompilingLLM):
        def __init__(self, **kwargs) -> None:
            seen.append(os.environ[CACHE_ENV])
            raise RuntimeError("engine core failed to start")

    platform = vllm_engine._import_vllm()[1]
    monkeypatch.setattr(vllm_engine, "_import_vllm", lambda: (types.SimpleNamespace(LLM=Broken), platform))
    with pytest.raises(RuntimeError, match="failed to start"):
        vllm_engine.VLLMEngine(str(_model_dir(tmp_path)), enforce_eager=True, dtype="float32")
    assert seen and not Path(seen[0]).exists() and CACHE_ENV not in os.environ


def test_the_async_engine_compiles_into_a_cache_of_its_own(tmp_path, monkeypatch):
    from baselines.engines import vllm_async

    monkeypatch.delenv(CACHE_ENV, raising=False)
    _fake_vllm(monkeypatch)
    monkeypatch.setattr(vllm_async, "_import_vllm", vllm_engine._import_vllm)

    async def build(self):  # stands in for AsyncLLM.from_engine_args: the engine process starts here
        llm = _CompilingLLM(**self._engine_args)
        llm.shutdown = lambda timeout=None: None
        return llm

    monkeypatch.setattr(vllm_async.AsyncVLLMEngine, "_build", build)
    engine = vllm_async.AsyncVLLMEngine(str(_model_dir(tmp_path)), enforce_eager=True, dtype="float32")
    (cache,) = _CompilingLLM.started_with
    assert cache and Path(cache).is_dir()
    engine.close()
    assert not Path(cache).exists() and CACHE_ENV not in os.environ
