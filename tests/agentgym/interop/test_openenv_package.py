"""``agentgym package-env``: OpenEnv's package layout, judged by OpenEnv's own tools
(``openenv validate`` on the directory and on the running container, ``from_docker_image``
to start it), with the image built locally from the host's wheelhouse."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import requests
import yaml
from openenv.cli._validation import (
    validate_running_environment,  # what `openenv validate --url` runs
)
from openenv.core import GenericEnvClient

import agentgym
from agentgym.errors import ConfigError
from agentgym.interop.openenv_package import build_openenv_image, write_openenv_package

OPENENV = str(Path(sys.executable).parent / "openenv")


def _prepare(package: Path) -> subprocess.CompletedProcess:
    """``python -m server.app --prepare`` in the package, as the image's build runs it."""
    env = {**os.environ, "PYTHONPATH": str(package)}
    return subprocess.run([sys.executable, "-m", "server.app", "--prepare"], cwd=package, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def calculator_package(tmp_path_factory):
    return write_openenv_package("agentgym/Calculator-v0", tmp_path_factory.mktemp("pkg") / "calc",
                                 {"difficulty": 2})


def test_openenv_validate_accepts_the_package(calculator_package):
    proc = subprocess.run([OPENENV, "validate", str(calculator_package.path), "--json", "--verbose"],
                          capture_output=True, text=True, timeout=120, check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["passed"], report["issues"]
    assert report["deployment_modes"]["docker"] is True


def test_the_package_records_what_it_serves_and_locks_exactly_its_wheelhouse(calculator_package):
    path = calculator_package.path
    manifest = yaml.safe_load((path / "openenv.yaml").read_text())
    assert (manifest["app"], manifest["port"], manifest["runtime"]) == ("server.app:app", 8000, "fastapi")
    local, default = gym.make("agentgym/Calculator-v0", difficulty=2), gym.make("agentgym/Calculator-v0")
    try:
        assert manifest["agentgym"]["fingerprint"] == str(local.unwrapped.fingerprint) == calculator_package.fingerprint
        assert str(local.unwrapped.fingerprint) != str(default.unwrapped.fingerprint)
    finally:
        local.close()
        default.close()
    assert manifest["agentgym"]["env_kwargs"] == {"difficulty": 2}
    assert manifest["agentgym"]["agentgym_version"] == agentgym.__version__

    wheels = {p.name for p in (path / "wheels").glob("*.whl")}
    lock = (path / "uv.lock").read_text()
    locked = [line.split('"')[1] for line in lock.splitlines() if line.strip().startswith("{ path = ")]
    assert locked and set(locked) <= wheels, "every locked wheel is in the wheelhouse"
    assert any(w.startswith(f"agentgym-{agentgym.__version__}-") for w in locked) and any(w.startswith("openenv_core-") for w in locked)
    pins = [line.split(" ;")[0] for line in (path / "server" / "requirements.txt").read_text().splitlines()
            if line and not line.startswith(("#", " "))]
    assert f"agentgym=={agentgym.__version__}" in pins and len(pins) == len(locked)


def test_prepare_refuses_an_env_that_is_not_the_one_packaged(calculator_package, tmp_path):
    ok = _prepare(calculator_package.path)
    assert ok.returncode == 0 and "as packaged" in ok.stdout, ok.stderr
    # The same package with another fingerprint on record: the build must fail, not serve it.
    import shutil

    tampered = tmp_path / "tampered"
    shutil.copytree(calculator_package.path, tampered, ignore=shutil.ignore_patterns("wheels"))
    manifest = (tampered / "openenv.yaml").read_text()
    (tampered / "openenv.yaml").write_text(manifest.replace(calculator_package.fingerprint, "deadbeefdeadbeef"))
    bad = _prepare(tampered)
    assert bad.returncode == 1 and "not the packaged deadbeefdeadbeef" in bad.stderr


def test_bad_input_is_refused_before_anything_is_written(tmp_path, calculator_package):
    with pytest.raises(ConfigError, match="difficulty"):
        write_openenv_package("agentgym/Calculator-v0", tmp_path / "a", {"difficulty": 9}, wheels=False)
    with pytest.raises(ConfigError, match="did you mean"):
        write_openenv_package("agentgym/Calculator-v0", tmp_path / "b", {"dificulty": 2}, wheels=False)
    with pytest.raises(ConfigError, match="Unknown environment"):
        write_openenv_package("agentgym/NoSuchEnv-v0", tmp_path / "c", wheels=False)
    with pytest.raises(ConfigError, match="has files"):
        write_openenv_package("agentgym/Calculator-v0", calculator_package.path, wheels=False)
    assert not any((tmp_path / name).exists() for name in "abc")
    with pytest.raises(ConfigError, match="wheelhouse"):
        build_openenv_image(write_openenv_package("agentgym/Calculator-v0", tmp_path / "d", wheels=False))
    # Agent code in a sandbox cannot run in the env's container: refused, with what to do instead.
    with pytest.raises(ConfigError, match="serve-env agentgym/DataAnalysis-v1"):
        write_openenv_package("agentgym/DataAnalysis-v1", tmp_path / "e", {"backend": "process"}, wheels=False)
    assert not (tmp_path / "e").exists()


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    from agentgym.interop import openenv_package

    def broken(wheels):
        raise openenv_package.PackageBuildError("pip wheel failed (exit 1): no index")

    monkeypatch.setattr(openenv_package, "_wheelhouse", broken)
    with pytest.raises(openenv_package.PackageBuildError, match="no index"):
        write_openenv_package("agentgym/Calculator-v0", tmp_path / "pkg")
    assert list(tmp_path.iterdir()) == []


def test_kwargs_come_back_exactly_from_the_generated_app():
    """Quotes, backslashes, unicode and newlines in a kwarg survive server/app.py's source."""
    from agentgym.interop.openenv_package import _app

    kwargs = {"s": 'a "quoted" \\ back\nslash é 🙂', "n": "123", "x": [1, "2, 3"], "f": 0.5}
    source = _app("agentgym/Calculator-v0", kwargs)
    (line,) = [line for line in source.splitlines() if line.startswith("ENV_KWARGS = ")]
    assert eval(line.removeprefix("ENV_KWARGS = "), {"json": json}) == kwargs  # the literal the module runs


def test_the_cli_writes_a_package_and_refuses_an_occupied_directory(tmp_path):
    agentgym_cli = str(Path(sys.executable).parent / "agentgym")
    out = tmp_path / "calc"
    ok = subprocess.run([agentgym_cli, "package-env", "agentgym/Calculator-v0", "--out", str(out), "--no-wheels",
                         "-k", "difficulty=3"], capture_output=True, text=True, timeout=300, check=False)
    assert ok.returncode == 0, ok.stderr
    assert yaml.safe_load((out / "openenv.yaml").read_text())["agentgym"]["env_kwargs"] == {"difficulty": 3}
    again = subprocess.run([agentgym_cli, "package-env", "agentgym/Calculator-v0", "--out", str(out), "--no-wheels"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 2 and "has files" in again.stderr


@pytest.mark.docker
def test_openenv_plays_a_search_episode_in_the_locally_built_image(tmp_path, docker_engine):
    """The done-when, in a container: OpenEnv's client starts the image itself and plays a
    Search-v1 episode to the end, with the host's fingerprint; the running container passes
    OpenEnv's runtime validation; nothing is left running."""
    import docker

    tag = f"openenv-agentgym-search-v1:test-{os.getpid()}"
    package = write_openenv_package("agentgym/Search-v1", tmp_path / "search")
    client = docker.from_env()
    local = gym.make("agentgym/Search-v1")
    try:
        image_id = build_openenv_image(package, tag)
        # Of this package's untagged images only the builder stage is kept (the next build's cache).
        leftovers = client.images.list(filters={"dangling": True, "label": "agentgym.package=agentgym_search_v1"})
        assert len(leftovers) == 1
        config = client.images.get(tag).attrs["Config"]
        assert config["User"] == "1000:1000" and "8000/tcp" in config["ExposedPorts"]
        assert "curl -f http://localhost:8000/health" in " ".join(config["Healthcheck"]["Test"])
        assert config["Labels"]["agentgym.package"] == "agentgym_search_v1"

        text, info = local.reset(seed=11)

        async def play() -> None:
            remote = await GenericEnvClient.from_docker_image(tag)
            async with remote:
                (container,) = [c for c in client.containers.list() if c.image.id == image_id]
                base_url = f"http://127.0.0.1:{container.ports['8000/tcp'][0]['HostPort']}"
                report = await asyncio.to_thread(validate_running_environment, base_url)
                assert report["passed"], report["summary"]
                metadata = (await asyncio.to_thread(requests.get, f"{base_url}/metadata", timeout=10)).json()
                assert (metadata["name"], metadata["version"]) == ("agentgym/Search-v1", info["fingerprint"])
                result = await remote.reset(seed=11)
                assert result.observation["text"] == text
                assert result.observation["info"]["fingerprint"] == info["fingerprint"] == package.fingerprint
                steps = 0
                while not result.done:
                    action = local.unwrapped.oracle_action()
                    expected = local.step(action)
                    result = await remote.step({"text": action})
                    steps += 1
                    assert result.observation["text"] == expected[0]
                final = result.observation["info"]
                assert result.reward == 1.0 and final["success"] is True and final["infra_failed"] is False
                assert steps >= 2 and final["task_id"] == info["task_id"]

        asyncio.run(play())
        assert not [c for c in client.containers.list(all=True) if c.image.id == image_id], "the client's container"
    finally:
        local.close()
        if client.images.list(name=tag):
            client.images.remove(tag, force=True)
        client.images.prune(filters={"dangling": True, "label": "agentgym.package=agentgym_search_v1"})
        client.close()
