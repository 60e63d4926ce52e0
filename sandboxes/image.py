"""The sandbox image, built locally because no image registry can be assumed.

``mmdebstrap`` builds a minimal Debian rootfs (python3, numpy, pandas, scipy, tini) from
the apt mirror this machine already uses; ``docker import`` turns it into an image,
restating entrypoint, user, workdir and environment with ``--change`` (an imported
tarball has no config of its own). No ``docker pull``, no ``FROM``.

The tag carries a hash of the recipe, so an unchanged recipe is never rebuilt. The image
id and the library versions found inside are recorded as image labels and in a JSON file
under ``~/.cache/agentgym/images/`` so environment fingerprints can include them.

Command line (what ``make`` runs when Docker is reachable)::

    python -m sandboxes.image build [--force] [--engine URL ...]
    python -m sandboxes.image info
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import glob
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from sandboxes.engine import connect, default_engine_url
from sandboxes.errors import ImageBuildError

__all__ = ["ImageInfo", "RECIPE", "default_image", "build_image", "recipe_hash", "image_tag"]

REPOSITORY = "agentgym-sandbox"
SANDBOX_UID = 1000

RECIPE: dict[str, Any] = {
    "format": 1,
    "suite": "bookworm",
    "variant": "minbase",
    "packages": ["python3", "python3-numpy", "python3-pandas", "python3-scipy", "tini"],
    "user": f"{SANDBOX_UID}:{SANDBOX_UID}",
    "workdir": "/workspace",
    "entrypoint": ["/usr/bin/tini", "--"],
    # What `docker run IMAGE` does; sandboxes pass their own entrypoint with every option.
    "cmd": ["python3", "-E", "-s", "/opt/agentgym/supervisor.py", "--workdir", "/workspace"],
    "env": {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": "/workspace",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
    },
    # Shell run on the host with the rootfs as $1, after packages are installed.
    "customize": [
        'mkdir -p "$1/workspace" "$1/opt/agentgym"',
        'chown 1000:1000 "$1/workspace"',
        'echo "sandbox:x:1000:1000:sandbox:/workspace:/usr/sbin/nologin" >> "$1/etc/passwd"',
        'echo "sandbox:x:1000:" >> "$1/etc/group"',
        'rm -rf "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/usr/share/locale/* '
        '"$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* '
        '"$1"/usr/lib/python3/dist-packages/*/tests "$1"/usr/lib/python3/dist-packages/*/*/tests',
    ],
}  # fmt: skip

_VERSIONS_SCRIPT = (
    "import json, platform, numpy, pandas, scipy; "
    "print(json.dumps({'python': platform.python_version(), 'numpy': numpy.__version__, "
    "'pandas': pandas.__version__, 'scipy': scipy.__version__}))"
)


@dataclass(frozen=True)
class ImageInfo:
    """What fingerprints need to know about the sandbox image."""

    tag: str
    image_id: str
    recipe_hash: str
    versions: dict[str, str]
    built: bool = False
    """True when this call built the image (False: it already existed)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the image, without how this call found it (``built``)."""
        return {k: v for k, v in self.to_dict().items() if k != "built"}


def recipe_hash(recipe: dict[str, Any] | None = None) -> str:
    text = json.dumps(recipe or RECIPE, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def image_tag(recipe: dict[str, Any] | None = None) -> str:
    """``repository:hash``; a recipe may name its own repository (the sandbox's is the default)."""
    return f"{(recipe or RECIPE).get('repository', REPOSITORY)}:{recipe_hash(recipe)}"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "agentgym" / "images"
    path.mkdir(parents=True, exist_ok=True)
    return path


def debian_mirror() -> str:
    """The Debian mirror apt is configured with (``AGENTGYM_DEBIAN_MIRROR`` overrides)."""
    if os.environ.get("AGENTGYM_DEBIAN_MIRROR"):
        return os.environ["AGENTGYM_DEBIAN_MIRROR"]
    files = ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*"))]
    pattern = re.compile(r"(?:^deb\s+(?:\[[^\]]*\]\s+)?|^URIs:\s*)(\S+)", re.MULTILINE)
    for path in files:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for uri in pattern.findall(text):
            if re.search(r"/debian/?$", uri):
                return uri.rstrip("/")
    return "http://deb.debian.org/debian"


def _changes(recipe: dict[str, Any], labels: dict[str, str]) -> list[str]:
    changes = [
        f"ENTRYPOINT {json.dumps(recipe['entrypoint'])}",
        f"CMD {json.dumps(recipe['cmd'])}",
        f"USER {recipe['user']}",
        f"WORKDIR {recipe['workdir']}",
    ]
    changes += [f"ENV {k}={v}" for k, v in recipe["env"].items()]
    changes += [f"LABEL {k}={json.dumps(v)}" for k, v in labels.items()]
    return changes


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    with open(cache_dir() / "build.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _record_path(tag: str) -> Path:
    return cache_dir() / (tag.replace(":", "_").replace("/", "_") + ".json")


def _info_from_image(image: Any, tag: str) -> ImageInfo:
    labels = image.labels or {}
    return ImageInfo(
        tag=tag,
        image_id=image.id,
        recipe_hash=labels.get("agentgym.recipe", ""),
        versions=json.loads(labels.get("agentgym.versions", "{}")),
    )


def _mmdebstrap(recipe: dict[str, Any], out_tar: Path, versions_file: Path, log: Path) -> None:
    hooks = list(recipe["customize"])
    script = recipe.get("versions_script", _VERSIONS_SCRIPT)  # prints the JSON the image is labelled with
    hooks.append(f'chroot "$1" python3 -c {shlex.quote(script)} > {shlex.quote(str(versions_file))}')
    argv = [
        "mmdebstrap",
        f"--variant={recipe['variant']}",
        "--include=" + ",".join(recipe["packages"]),
        "--aptopt=Acquire::Retries \"3\"",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        *[f"--customize-hook={hook}" for hook in hooks],
        recipe["suite"],
        str(out_tar),
        debian_mirror(),
    ]
    try:
        with open(log, "wb") as f:
            proc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, timeout=1800)
    except FileNotFoundError as e:
        raise ImageBuildError(
            "Expected the `mmdebstrap` program to build the sandbox rootfs, but it is not "
            "installed. Install it with `apt-get install mmdebstrap`."
        ) from e
    except subprocess.TimeoutExpired as e:
        raise ImageBuildError(f"mmdebstrap took over 30 min; see {log}") from e
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise ImageBuildError(f"mmdebstrap failed (exit {proc.returncode}); log {log}:\n{tail}")


def build_image(
    *, force: bool = False, engine_urls: list[str] | None = None, recipe: dict[str, Any] | None = None
) -> ImageInfo:
    """Build the image if its tag is missing on any engine (or ``force``); return its info.

    The rootfs is built once; engines that lack the image get it by ``docker save`` from
    the first engine, so all engines run the same image id.
    """
    recipe = recipe or RECIPE
    tag, digest = image_tag(recipe), recipe_hash(recipe)
    urls = list(dict.fromkeys(engine_urls or [default_engine_url()]))
    clients = [connect(url, timeout=600) for url in urls]
    with _build_lock():
        first = clients[0]
        existing = _get_image(first, tag)
        built = False
        if existing is None or force:
            _import_new(first, recipe, tag, digest)
            built = True
        info = dataclasses.replace(_info_from_image(first.images.get(tag), tag), built=built)
        for client in clients[1:]:
            if force or _get_image(client, tag) is None:
                client.images.load(first.images.get(tag).save(named=True))
        _record_path(tag).write_text(json.dumps({**info.to_dict(), "engines": urls}, indent=2))
    for client in clients:
        client.close()
    return info


def _get_image(client: Any, tag: str) -> Any:
    import docker.errors

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def _import_new(client: Any, recipe: dict[str, Any], tag: str, digest: str) -> None:
    with tempfile.TemporaryDirectory(prefix="agentgym-image-") as tmp:
        out_tar, versions_file = Path(tmp) / "rootfs.tar", Path(tmp) / "versions.json"
        log = cache_dir() / f"build-{digest}.log"
        _mmdebstrap(recipe, out_tar, versions_file, log)
        try:
            versions = json.loads(versions_file.read_text())
        except (OSError, ValueError) as e:
            raise ImageBuildError(f"could not read library versions from the rootfs; see {log}") from e
        labels = {
            "agentgym.recipe": digest,
            "agentgym.versions": json.dumps(versions, sort_keys=True),
            "agentgym.built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        repository, _, version = tag.partition(":")
        with open(out_tar, "rb") as f:
            client.api.import_image(
                src=f, repository=repository, tag=version, changes=_changes(recipe, labels)
            )
    if _get_image(client, tag) is None:
        raise ImageBuildError(f"docker import finished but {tag} is not on the engine")


def default_image(
    *, build: bool = True, engine_url: str | None = None, force: bool = False
) -> ImageInfo:
    """The sandbox image's tag, id and library versions, building it if it is missing.

    With ``build=False`` a missing image raises :class:`ImageBuildError` telling the user
    to run ``agentgym build-image``.
    """
    tag = image_tag()
    client = connect(engine_url)
    try:
        image = _get_image(client, tag)
    finally:
        client.close()
    if image is not None and not force:
        return _info_from_image(image, tag)
    if not build:
        raise ImageBuildError(
            f"Expected the sandbox image {tag} on the engine, but it is missing. "
            "Build it with `agentgym build-image` (or `python -m sandboxes.image build`)."
        )
    return build_image(force=force, engine_urls=[engine_url] if engine_url else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandboxes.image", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the image unless it exists")
    build.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    build.add_argument("--engine", action="append", help="engine URL (repeatable)")
    sub.add_parser("info", help="print the image record without building")
    sub.add_parser("tag", help="print the tag the current recipe builds")
    args = parser.parse_args(argv)
    if args.command == "tag":
        print(image_tag())
        return 0
    try:
        if args.command == "build":
            info = build_image(force=args.force, engine_urls=args.engine)
        else:
            info = default_image(build=False)
    except (ImageBuildError, ConnectionError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(info.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
