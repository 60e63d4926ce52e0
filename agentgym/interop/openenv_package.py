"""An agentgym env packaged as an OpenEnv environment: its directory, lock and a locally built image.

OpenEnv (``openenv-core`` 0.3) packages an environment as a directory that its
``openenv init`` template lays out and ``openenv validate`` checks:

- ``openenv.yaml``: the manifest (``spec_version``, ``name``, ``type``, ``runtime``,
  ``app: server.app:app``, ``port: 8000``);
- ``pyproject.toml`` depending on ``openenv-core`` with a ``server`` script (``...:main``),
  and ``uv.lock`` pinning every package;
- ``server/app.py``: a module-level FastAPI ``app``, ``main()`` and a ``__main__`` guard;
- ``server/Dockerfile``: a builder stage makes ``/app/.venv``, the runtime stage copies it
  and runs ``uvicorn server.app:app`` on port 8000, with a ``HEALTHCHECK`` on ``/health``.

:func:`write_openenv_package` writes that directory for any registered env (its kwargs
baked in), and :func:`build_openenv_image` builds its image. OpenEnv's template builds
``FROM ghcr.io/meta-pytorch/openenv-base`` and installs from PyPI with uv; agentgym's
image needs no registry, and its ``docker build`` no network (the base's Debian packages
come from the apt mirror, once; the wheelhouse from pip's index or cache, on the host):

- ``BASE_IMAGE`` is a Debian rootfs built here by mmdebstrap (python3, venv, curl, tini)
  and ``docker import``-ed, as the sandbox image is (:mod:`sandboxes.image`);
- the packages come from ``wheels/``, a wheelhouse built on the host (``pip wheel`` of
  this agentgym with its ``openenv`` extra), locked by ``uv lock --offline`` against that
  wheelhouse alone and installed with ``pip --no-index`` from ``server/requirements.txt``
  (the lock, exported).

The image runs as an unprivileged user, with the env's caches (dataset, search index)
made at build time by ``python -m server.app --prepare``, so a container answers its first
reset as fast as a warm process. Containers started by OpenEnv's own
``EnvClient.from_docker_image`` (``docker run -p PORT:8000``) serve the same fingerprint as
``gym.make`` on the host: the test checks it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.errors import ConfigError

__all__ = [
    "SERVER_BASE_RECIPE",
    "OpenEnvPackage",
    "PackageBuildError",
    "build_openenv_image",
    "default_tag",
    "package_name",
    "read_openenv_package",
    "write_openenv_package",
]

SERVER_UID = 1000
PORT = 8000  # OpenEnv's providers publish the container's port 8000 (docker run -p HOST:8000)

# The base every served env's image starts FROM: no registry, built by mmdebstrap like the
# sandbox image. python3 here is Debian bookworm's 3.11, the interpreter the wheelhouse
# is built for (the image's Python must match the host's minor version; checked below).
SERVER_BASE_RECIPE: dict[str, Any] = {
    "format": 1,
    "repository": "agentgym-server-base",
    "suite": "bookworm",
    "variant": "minbase",
    "packages": ["python3", "python3-venv", "curl", "ca-certificates", "tini"],
    "user": "0:0",  # the builder stage installs as root; the env's Dockerfile drops to SERVER_UID
    "workdir": "/app",
    "entrypoint": ["/usr/bin/tini", "--"],
    "cmd": ["python3"],
    "env": {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"},
    "customize": [
        'mkdir -p "$1/app/home" "$1/app/cache"',
        f'echo "agentgym:x:{SERVER_UID}:{SERVER_UID}:agentgym:/app/home:/usr/sbin/nologin" >> "$1/etc/passwd"',
        f'echo "agentgym:x:{SERVER_UID}:" >> "$1/etc/group"',
        f'chown {SERVER_UID}:{SERVER_UID} "$1/app/home" "$1/app/cache"',
        'rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
    ],
    "versions_script": "import json, platform; print(json.dumps({'python': platform.python_version()}))",
}  # fmt: skip
SERVER_PYTHON = "3.11"  # bookworm's python3


class PackageBuildError(RuntimeError):
    """Building the wheelhouse or its lock failed (pip or uv said why): not the user's input."""


@dataclass(frozen=True)
class OpenEnvPackage:
    """A written package directory and what it serves."""

    path: Path
    name: str
    env_id: str
    env_kwargs: dict[str, Any]
    fingerprint: str
    """The env's fingerprint as made on the host; the container must serve the same one."""


def package_name(env_id: str) -> str:
    """OpenEnv's name for ``env_id``: lowercase, ``_`` between words (a Python package name).

    >>> package_name("agentgym/Search-v1")
    'agentgym_search_v1'
    >>> package_name("myorg/UnitConversion-v0")
    'myorg_unitconversion_v0'
    """
    return re.sub(r"[^a-z0-9]+", "_", env_id.lower()).strip("_")


def default_tag(env_id: str) -> str:
    """The image tag ``agentgym package-env --build`` gives by default, in OpenEnv's
    ``openenv-<name>`` style (``openenv build`` itself names it after the directory)."""
    return f"openenv-{package_name(env_id).replace('_', '-')}:latest"


def write_openenv_package(env_id: str, out_dir: str | Path, env_kwargs: dict[str, Any] | None = None, *,
                          wheels: bool = True, progress: Callable[[str], None] | None = None) -> OpenEnvPackage:
    """Write OpenEnv's directory for ``env_id`` (with ``env_kwargs``) at ``out_dir``.

    The id and kwargs are checked, and one env is made to read its fingerprint, before
    anything is written. With ``wheels`` (the default) the wheelhouse is built and the
    dependencies are locked (``uv.lock``) and exported (``server/requirements.txt``); without
    it only the source files are written (nothing to build an image from).
    ``out_dir`` must be empty or absent: a package is never written over other files.
    """
    import gymnasium as gym

    import agentgym  # noqa: F401 - registers the envs
    from agentgym.envs import check_env_id, check_env_kwargs
    from agentgym.interop.openenv_server import env_description, jsonable

    say = progress or (lambda _msg: None)
    env_kwargs = dict(env_kwargs or {})
    check_env_id(env_id, multi_agent=False)
    check_env_kwargs(env_id, env_kwargs)
    if json.loads(json.dumps(jsonable(env_kwargs))) != env_kwargs:
        raise ConfigError(f"Expected env kwargs that are plain JSON (they are written into server/app.py), "
                          f"actual value: {env_kwargs!r}")
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"Expected an empty or absent directory for the package, actual value: {out} has files "
                          "(remove it or choose another --out)")
    if wheels:
        _check_tools()
    say(f"making {env_id} once for its fingerprint")
    env = gym.make(env_id, **env_kwargs)
    try:
        fingerprint = str(env.unwrapped.fingerprint)
        runs_agent_code = "sandbox" in env.unwrapped.fingerprint.fields
        description = env_description(env)
    finally:
        env.close()
    if runs_agent_code:
        raise ConfigError(
            f"Expected an env whose tools run in its own process, actual value: {env_id} runs agent code in a "
            "sandbox (Docker or bubblewrap), which its container cannot provide (OpenEnv's from_docker_image "
            f"mounts no Docker engine). Serve it with `agentgym serve-env {env_id}` on a host that runs Docker")

    name = package_name(env_id)
    from agentgym import __version__

    files = {
        "openenv.yaml": _manifest(name, env_id, env_kwargs, fingerprint, __version__),
        "pyproject.toml": _pyproject(name, env_id, __version__),
        "server/__init__.py": "",
        "__init__.py": "",
        "server/app.py": _app(env_id, env_kwargs),
        "server/Dockerfile": _dockerfile(name),
        "README.md": _readme(name, env_id, env_kwargs, description, fingerprint),
        ".dockerignore": ".venv\n**/__pycache__\n**/*.pyc\n",
    }
    # Written beside ``out`` and renamed into place at the end: a failure leaves nothing.
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        for rel, text in files.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_text(text)
        if wheels:
            say("building the wheelhouse (pip wheel agentgym[openenv])")
            _wheelhouse(staging / "wheels")
            say("locking the wheelhouse (uv lock --offline)")
            _lock(staging)
        if out.exists():
            out.rmdir()  # checked empty above
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return OpenEnvPackage(out, name, env_id, env_kwargs, fingerprint)


def read_openenv_package(path: str | Path) -> OpenEnvPackage:
    """The package written at ``path`` by :func:`write_openenv_package` (to build it again)."""
    path = Path(path)
    manifest = _read_manifest(path)
    ours = manifest["agentgym"]
    return OpenEnvPackage(path, manifest["name"], ours["env_id"], dict(ours["env_kwargs"]), ours["fingerprint"])


def build_openenv_image(package: str | Path | OpenEnvPackage, tag: str | None = None, *,
                        engine_url: str | None = None,
                        progress: Callable[[str], None] | None = None) -> str:
    """Build the package's image on the local engine (the base first, if missing); its id.

    ``docker build -f server/Dockerfile --build-arg BASE_IMAGE=<local base>`` over the
    package directory, through the Docker SDK. The tag defaults to ``openenv-<name>:latest``.
    """
    import docker.errors

    from sandboxes.engine import connect
    from sandboxes.errors import ImageBuildError
    from sandboxes.image import build_image

    package = package if isinstance(package, OpenEnvPackage) else read_openenv_package(package)
    path = package.path
    if not (path / "wheels").is_dir() or not (path / "server" / "requirements.txt").is_file():
        raise ConfigError(f"Expected a package written with its wheelhouse, actual value: {path} has no wheels/ or "
                          "server/requirements.txt (write it again without --no-wheels)")
    say = progress or (lambda _msg: None)
    say(f"base image {_base_tag()} (built once with mmdebstrap if missing)")
    base = build_image(engine_urls=[engine_url] if engine_url else None, recipe=SERVER_BASE_RECIPE)
    tag = tag or default_tag(package.env_id)
    client = connect(engine_url, timeout=1800)
    log: list[str] = []
    built = False
    try:
        stream = client.api.build(path=str(path), dockerfile="server/Dockerfile", tag=tag, rm=True, forcerm=True,
                                  buildargs={"BASE_IMAGE": base.tag, "PACKAGE": package.name}, decode=True)
        for chunk in stream:
            if "error" in chunk:
                said = [line for line in _plain("".join(log[-20:])).splitlines()
                        if line.strip() and not line.lstrip().startswith(("--->", "Removing intermediate"))]
                raise ImageBuildError(f"docker build of {path} failed: {' '.join(chunk['error'].split())}. "
                                      "The build's last lines:\n" + "\n".join(said[-6:]))
            line = chunk.get("stream", "")
            if line:
                log.append(line)
                if line.startswith("Step "):
                    say(line.strip())
        image = client.images.get(tag)
        built = True
    except docker.errors.APIError as e:
        raise ImageBuildError(f"docker build of {path} failed: {e}") from e
    finally:
        try:
            _remove_leftovers(client, package.name, keep=_builder_id(log) if built else None)
        finally:
            client.close()
    return str(image.id)


def _builder_id(log: list[str]) -> str | None:
    """The builder stage's image (the layer before the runtime stage's ``FROM``): the
    next build of this package starts from it instead of installing the wheelhouse again."""
    text = _plain("".join(log))
    runtime = [m.start() for m in re.finditer(r"^Step \d+/\d+ : FROM ", text, re.MULTILINE)]
    if len(runtime) < 2:
        return None
    ids = re.findall(r"--->\s+([0-9a-f]{12})", text[:runtime[1]])
    return ids[-1] if ids else None


def _remove_leftovers(client: Any, name: str, keep: str | None) -> None:
    """Remove this package's untagged images (the builder stages of earlier or failed builds,
    the image the tag replaced: a gigabyte each), except the builder stage ``keep``."""
    import docker.errors

    for image in client.images.list(filters={"dangling": True, "label": f"agentgym.package={name}"}):
        if keep and image.id.split(":")[-1].startswith(keep):
            continue
        try:
            client.images.remove(image.id)
        except docker.errors.APIError:  # in use by a container or another image: not ours to force
            pass


def _plain(line: str) -> str:
    """Build log text without its terminal colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", line)


def _base_tag() -> str:
    from sandboxes.image import image_tag

    return image_tag(SERVER_BASE_RECIPE)


def _read_manifest(path: Path) -> dict[str, Any]:
    import yaml

    try:
        manifest = yaml.safe_load((path / "openenv.yaml").read_text())
        manifest["agentgym"]["env_id"]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
        raise ConfigError(f"Expected a package written by `agentgym package-env` (openenv.yaml with an agentgym "
                          f"section), actual value: {path} ({e})") from e
    return manifest


def _manifest(name: str, env_id: str, env_kwargs: dict[str, Any], fingerprint: str, version: str) -> str:
    import yaml

    spec = {"spec_version": 1, "name": name, "type": "space", "runtime": "fastapi", "app": "server.app:app",
            "port": PORT}
    # agentgym's own section: what this package serves, so a client can check it (OpenEnv
    # reads only the keys above).
    ours = {"agentgym": {"env_id": env_id, "env_kwargs": env_kwargs, "fingerprint": fingerprint,
                         "agentgym_version": version, "source": _source_revision()}}
    # JSON is YAML's flow style: every string quoted, so no YAML reader takes a hex
    # fingerprint such as 1234567e12345678 for a number.
    return yaml.safe_dump(spec, sort_keys=False) + "\nagentgym: " + json.dumps(ours["agentgym"], indent=2) + "\n"


def _source_revision() -> str:
    """The git commit of the agentgym tree the wheel is built from (``+dirty`` with local
    changes), or ``unknown`` outside a checkout."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _pyproject(name: str, env_id: str, version: str) -> str:
    return textwrap.dedent(f'''\
        # Written by `agentgym package-env {env_id}`. OpenEnv's layout; the dependencies are
        # resolved from ./wheels only (no index), for the image's platform and Python.
        [build-system]
        requires = ["setuptools>=68", "wheel"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "openenv-{name}"
        version = "{version}"
        description = "agentgym's {env_id}, served over OpenEnv's protocol"
        requires-python = "=={SERVER_PYTHON}.*"
        dependencies = [
            "agentgym[openenv]=={version}",
            "openenv-core>=0.3,<0.4",
        ]

        [project.scripts]
        server = "{name}.server.app:main"

        [tool.setuptools]
        packages = ["{name}", "{name}.server"]
        package-dir = {{ "{name}" = ".", "{name}.server" = "server" }}

        [tool.uv]
        no-index = true
        find-links = ["wheels"]
        environments = ["sys_platform == 'linux' and platform_machine == 'x86_64' and python_version == '{SERVER_PYTHON}'"]
        ''')


def _app(env_id: str, env_kwargs: dict[str, Any]) -> str:
    return textwrap.dedent(f'''\
        """agentgym's {env_id} over OpenEnv's protocol (written by `agentgym package-env`).

        Endpoints (OpenEnv's): WebSocket /ws (one env per session), POST /reset, /step,
        GET /state, /schema, /metadata, /health.

            uvicorn server.app:app --host 0.0.0.0 --port 8000   # what the image runs
            python -m server.app --port 8001
            python -m server.app --prepare                      # make the env's caches
        """

        import json

        from agentgym.interop.openenv_server import openenv_app

        ENV_ID = {env_id!r}
        ENV_KWARGS = json.loads({json.dumps(json.dumps(env_kwargs, sort_keys=True))})

        app = openenv_app(ENV_ID, ENV_KWARGS)


        def prepare() -> None:
            """Play one reset, so the env's caches (dataset, index) are made now rather than by
            the first session, and check that the env made here is the one packaged: the same
            fingerprint as openenv.yaml records from the host. Exits 1 otherwise, which fails
            the image's build (an env that cannot reset here, e.g. one whose tools need a
            sandbox engine the container cannot reach, would fail every session instead)."""
            import pathlib
            import sys

            import gymnasium as gym
            import yaml

            manifest = yaml.safe_load((pathlib.Path(__file__).resolve().parents[1] / "openenv.yaml").read_text())
            packaged = manifest["agentgym"]["fingerprint"]
            env = None
            try:
                env = gym.make(ENV_ID, **ENV_KWARGS)
                env.reset(seed=0)
                here = str(env.unwrapped.fingerprint)
            except Exception as e:  # noqa: BLE001 - any failure here is the build's failure, said in one line
                sys.exit(f"{{ENV_ID}} cannot reset in this image: {{type(e).__name__}}: {{e}}")
            finally:
                if env is not None:
                    env.close()
            if here != packaged:
                sys.exit(f"{{ENV_ID}} made in this image has fingerprint {{here}}, not the packaged {{packaged}}: "
                         "the image would serve a different env than the host trains on")
            print(f"prepared {{ENV_ID}}: fingerprint {{here}}, as packaged")


        def main(host: str = "0.0.0.0", port: int = {PORT}) -> None:
            """Serve the env (the ``server`` script of pyproject.toml)."""
            import uvicorn

            uvicorn.run(app, host=host, port=port)


        if __name__ == "__main__":
            import argparse

            parser = argparse.ArgumentParser(description=__doc__.split("\\n")[0])
            parser.add_argument("--host", default="0.0.0.0")
            parser.add_argument("--port", type=int, default={PORT})
            parser.add_argument("--prepare", action="store_true", help="make the env's caches and exit")
            args = parser.parse_args()
            if args.prepare:
                prepare()
            else:
                main(host=args.host, port=args.port)
        ''')


def _dockerfile(name: str) -> str:
    return textwrap.dedent(f'''\
        # Written by `agentgym package-env`. OpenEnv's two-stage layout (builder makes
        # /app/.venv; the runtime copies it and serves server.app:app on port {PORT}), built
        # without a registry or a network: BASE_IMAGE is agentgym's mmdebstrap-built base
        # (`agentgym package-env --build` passes it), the packages come from ./wheels.
        ARG BASE_IMAGE={_base_tag()}
        FROM ${{BASE_IMAGE}} AS builder

        WORKDIR /app/env
        COPY wheels /app/env/wheels
        COPY server/requirements.txt /app/env/server/requirements.txt
        RUN python3 -m venv /app/.venv \\
            && /app/.venv/bin/pip install --quiet --no-cache-dir --no-index --find-links /app/env/wheels \\
               -r /app/env/server/requirements.txt
        # Labelled after the install, so packages of one agentgym tree share the layers above.
        ARG PACKAGE={name}
        LABEL agentgym.package=${{PACKAGE}}

        FROM ${{BASE_IMAGE}}
        ARG PACKAGE={name}
        LABEL agentgym.package=${{PACKAGE}}

        WORKDIR /app/env
        COPY --from=builder /app/.venv /app/.venv
        COPY openenv.yaml pyproject.toml README.md __init__.py /app/env/
        COPY server /app/env/server
        ENV PATH="/app/.venv/bin:/usr/local/bin:/usr/bin:/bin" \\
            PYTHONPATH="/app/env" \\
            HOME=/app/home \\
            AGENTGYM_CACHE_DIR=/app/cache
        USER {SERVER_UID}:{SERVER_UID}
        # The env's caches (dataset, index) are made now, as the user that serves.
        RUN python -m server.app --prepare

        EXPOSE {PORT}
        HEALTHCHECK --interval=30s --timeout=3s --start-period=5s --retries=3 \\
            CMD curl -f http://localhost:{PORT}/health || exit 1
        ENTRYPOINT ["/usr/bin/tini", "--"]
        CMD ["sh", "-c", "cd /app/env && uvicorn server.app:app --host 0.0.0.0 --port {PORT}"]
        ''')


def _readme(name: str, env_id: str, env_kwargs: dict[str, Any], description: str, fingerprint: str) -> str:
    kwargs = " ".join(f"-k {shlex.quote(f'{k}={json.dumps(v)}')}" for k, v in sorted(env_kwargs.items()))
    return textwrap.dedent(f'''\
        # {name}: agentgym's {env_id} as an OpenEnv environment

        {description}

        Written by `agentgym package-env {env_id}{(" " + kwargs) if kwargs else ""}`. Served with
        env kwargs `{json.dumps(env_kwargs, sort_keys=True)}`; fingerprint `{fingerprint}`
        (the same as `gym.make` gives; every observation's `info["fingerprint"]` carries it).

        Build the image locally (no registry) and play it with OpenEnv's client. The base image
        is built with mmdebstrap by the first `agentgym package-env --build`; once it is on the
        engine, OpenEnv's own build tool builds this directory too:

        ```bash
        agentgym package-env {env_id}{(" " + kwargs) if kwargs else ""} --out . --build   # in this directory
        openenv build --tag {default_tag(env_id)} --build-arg BASE_IMAGE={_base_tag()}   # in this directory
        ```

        ```python
        from openenv.core import GenericEnvClient
        client = await GenericEnvClient.from_docker_image("{default_tag(env_id)}")
        result = await client.reset(seed=0)          # result.observation["text"], ["info"]
        result = await client.step({{"text": "<the model's message>"}})
        ```

        Or run it without Docker: `python -m server.app --port 8000` (agentgym[openenv] installed).
        ''')


def _source_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _uv() -> str:
    return shutil.which("uv") or str(Path(sys.executable).parent / "uv")


def _check_tools() -> None:
    """What building the wheelhouse and its lock needs, checked before anything is written."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if here != SERVER_PYTHON:
        raise ConfigError(f"Expected Python {SERVER_PYTHON} to build the wheelhouse (the image's Python, Debian "
                          f"bookworm's), actual value: {here} ({sys.executable})")
    if not (_source_root() / "pyproject.toml").is_file():
        raise ConfigError(f"Expected agentgym's source tree (pyproject.toml) at {_source_root()} to build its wheel; "
                          "package-env runs from a checkout (pip install -e .)")
    if not Path(_uv()).exists():
        raise ConfigError("Expected the `uv` program to lock the package (OpenEnv's packages carry a uv.lock), "
                          "actual value: not installed. Install it with: pip install 'agentgym[openenv]'")


def _wheelhouse(wheels: Path) -> None:
    """``pip wheel`` this agentgym with its ``openenv`` extra (and everything they need)
    into ``wheels``: the only package source the image's build sees. pip reads its index
    or cache here, on the host; the image's build needs no network."""
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="agentgym-wheel-") as build:
        # A copy of the tree without its venvs and caches, so the wheel is built from source alone.
        src = Path(build) / "src"
        shutil.copytree(_source_root(), src, ignore=shutil.ignore_patterns(
            ".git", ".venv*", "__pycache__", "*.egg-info", "build", "dist", ".benchmarks", "benchmarks", ".cache",
            ".hypothesis", "runs", "tests", "docs", "examples"))
        # SOURCE_DATE_EPOCH: the same source gives the same wheel bytes, so Docker's layer
        # cache holds across packages of one tree (wheel dates its zip entries by it).
        _check_call([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels),
                     f"{src}[openenv]"], "pip wheel", env={**os.environ, "SOURCE_DATE_EPOCH": "315532800"})


def _lock(out: Path) -> None:
    uv = _uv()
    _check_call([uv, "lock", "--offline", "--quiet", "--python", sys.executable, "--directory", str(out)], "uv lock")
    requirements = subprocess.run(
        [uv, "export", "--frozen", "--offline", "--no-hashes", "--no-emit-project", "--no-header", "--no-annotate",
         "--format", "requirements-txt", "--directory", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    if requirements.returncode != 0:
        raise PackageBuildError(f"uv export failed: {requirements.stderr.strip()[-2000:]}")
    # No package name or lock hash in it: packages of one tree install from the same layer.
    (out / "server" / "requirements.txt").write_text(
        "# uv export of uv.lock: what the image installs from ./wheels\n" + requirements.stdout)


def _check_call(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, env=env, check=False)
    if proc.returncode != 0:
        raise PackageBuildError(
            f"{what} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-2000:]}")
