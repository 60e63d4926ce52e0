"""The host files a Python interpreter and a set of libraries need, and nothing else.

The process backend builds its sandbox's filesystem from these (see
:func:`sandboxes.process.bwrap_argv`): the interpreter, its standard library, the allowed
site-packages entries, and the shared libraries all of their ELF objects load — found by
reading each object's ``DT_NEEDED``, ``DT_RUNPATH``/``DT_RPATH`` and ``PT_INTERP`` and
resolving names the way the dynamic loader does (its ``ld.so.cache``, then the default
directories). So ``/usr/bin``, ``/usr/local``, the system's ``dist-packages`` and every other
tool on the host are simply absent, not hidden.

Symlinks on the way to a file are kept as symlinks, so a path the loader or the
interpreter remembers (``/lib64/ld-linux-x86-64.so.2``, ``/lib/x86_64-linux-gnu/libz.so.1``)
resolves inside exactly as it does outside.
"""

from __future__ import annotations

import functools
import os
import struct
import subprocess
import sys
import sysconfig
from dataclasses import dataclass

__all__ = ["ElfInfo", "elf_info", "interpreter_paths", "library_closure", "path_ops", "stdlib_dirs"]

_PT_INTERP, _PT_LOAD, _PT_DYNAMIC = 3, 1, 2
_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_RPATH, _DT_RUNPATH = 0, 1, 5, 15, 29


@dataclass(frozen=True)
class ElfInfo:
    """What the dynamic loader reads from one ELF object."""

    machine: tuple[int, int]
    """(ELF class, e_machine): objects of another architecture are never loaded."""
    needed: tuple[str, ...]
    search: tuple[str, ...]
    """RUNPATH (or RPATH) directories, ``$ORIGIN`` expanded."""
    interp: str | None


def elf_info(path: str) -> ElfInfo | None:
    """The loader-relevant parts of ``path``, or None when it is not a dynamic ELF object."""
    try:
        with open(path, "rb") as f:
            return _parse(f, os.path.dirname(path))
    except (OSError, struct.error, ValueError, IndexError):
        return None


def _parse(f, origin: str) -> ElfInfo | None:
    ident = f.read(16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF":
        return None
    is64 = ident[4] == 2
    end = "<" if ident[5] == 1 else ">"
    header = f.read(48 if is64 else 36)
    if is64:
        _, machine, _, _, phoff, _, _, _, phentsize, phnum = struct.unpack(end + "HHIQQQIHHH", header[:42])
        ph_fmt, dyn_fmt = end + "IIQQQQQQ", end + "qQ"
    else:
        _, machine, _, _, phoff, _, _, _, phentsize, phnum = struct.unpack(end + "HHIIIIIHHH", header[:30])
        ph_fmt, dyn_fmt = end + "IIIIIIII", end + "iI"
    loads, dynamic, interp = [], None, None
    for i in range(phnum):
        f.seek(phoff + i * phentsize)
        fields = struct.unpack(ph_fmt, f.read(struct.calcsize(ph_fmt)))
        if is64:
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = fields
        else:
            p_type, p_offset, p_vaddr, _, p_filesz, _, _, _ = fields
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
        elif p_type == _PT_INTERP:
            f.seek(p_offset)
            interp = f.read(p_filesz).split(b"\0")[0].decode()
    if dynamic is None:
        return ElfInfo((ident[4], machine), (), (), interp)
    f.seek(dynamic[0])
    entry_size = struct.calcsize(dyn_fmt)
    raw = f.read(dynamic[1])
    entries = [struct.unpack_from(dyn_fmt, raw, i) for i in range(0, len(raw) - entry_size + 1, entry_size)]
    strtab = next((val for tag, val in entries if tag == _DT_STRTAB), None)
    if strtab is None:
        return ElfInfo((ident[4], machine), (), (), interp)
    base = next((off + strtab - vaddr for vaddr, off, size in loads if vaddr <= strtab < vaddr + size), strtab)

    def string(offset: int) -> str:
        f.seek(base + offset)
        data = b""
        while b"\0" not in data:
            chunk = f.read(256)
            if not chunk:
                break
            data += chunk
        return data.split(b"\0")[0].decode(errors="replace")

    needed, rpath, runpath = [], [], []
    for tag, val in entries:
        if tag == _DT_NULL:
            break
        if tag == _DT_NEEDED:
            needed.append(string(val))
        elif tag == _DT_RPATH:
            rpath += string(val).split(":")
        elif tag == _DT_RUNPATH:
            runpath += string(val).split(":")
    search = tuple(
        os.path.normpath(d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin))
        for d in (runpath or rpath) if d
    )
    return ElfInfo((ident[4], machine), tuple(needed), search, interp)


@functools.lru_cache(maxsize=1)
def _ld_cache() -> dict[str, tuple[str, ...]]:
    """soname -> paths, as ``ldconfig -p`` lists the loader's cache (empty without one)."""
    for ldconfig in ("/sbin/ldconfig", "/usr/sbin/ldconfig"):
        if os.access(ldconfig, os.X_OK):
            try:
                out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30,
                                     env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            cache: dict[str, list[str]] = {}
            for line in out.splitlines()[1:]:
                name, _, path = line.strip().partition(" => ")
                if path:
                    cache.setdefault(name.split(" (")[0], []).append(path)
            return {k: tuple(v) for k, v in cache.items()}
    return {}


def _default_dirs() -> tuple[str, ...]:
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = []
    for d in ("/lib", "/usr/lib"):
        if multiarch:
            dirs.append(f"{d}/{multiarch}")
        dirs += [f"{d}64", d]
    return tuple(dirs)


def library_closure(roots: list[str]) -> list[str]:
    """Host paths of every shared object (and loader) that ``roots`` load, transitively.

    Paths are as the loader finds them (not symlink-resolved); ``roots`` themselves are not
    included unless something else loads them.
    """
    cache, defaults = _ld_cache(), _default_dirs()
    seen: set[str] = set()
    found: dict[str, None] = {}
    todo = [(path, None) for path in roots]
    while todo:
        path, machine = todo.pop()
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        info = elf_info(path)
        if info is None or (machine is not None and info.machine != machine):
            continue
        if info.interp:
            found.setdefault(info.interp)
            todo.append((info.interp, info.machine))
        for name in info.needed:
            lib = _resolve(name, info, cache, defaults)
            if lib is not None:
                found.setdefault(lib)
                todo.append((lib, info.machine))
    return list(found)


def _resolve(name: str, info: ElfInfo, cache: dict[str, tuple[str, ...]], defaults: tuple[str, ...]) -> str | None:
    if "/" in name:
        return name if os.path.exists(name) else None
    candidates = [os.path.join(d, name) for d in info.search]
    candidates += list(cache.get(name, ()))
    candidates += [os.path.join(d, name) for d in defaults]
    for candidate in candidates:
        if os.path.isfile(candidate):
            other = elf_info(candidate)
            if other is not None and other.machine == info.machine:
                return candidate
    return None


def path_ops(path: str) -> list[tuple[str, str, str]]:
    """How to make ``path`` exist inside as it does outside: ``("symlink", target, link)``
    for every symlink met on the way (leading components included), then
    ``("bind", real_path, "")`` for the file or directory it ends at."""
    ops: list[tuple[str, str, str]] = []
    path = os.path.normpath(os.path.abspath(path))
    for _ in range(64):  # the kernel's own symlink budget is 40
        parts = path.strip("/").split("/")
        current = ""
        for i, part in enumerate(parts):
            current += "/" + part
            if os.path.islink(current):
                target = os.readlink(current)
                ops.append(("symlink", target, current))
                resolved = os.path.normpath(os.path.join(os.path.dirname(current), target))
                path = os.path.join(resolved, *parts[i + 1:])
                break
        else:
            ops.append(("bind", path, ""))
            return ops
    raise OSError(f"too many levels of symbolic links resolving {path}")


def stdlib_dirs() -> list[str]:
    """The base interpreter's standard library directories (not a venv's)."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
            "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    paths = sysconfig.get_paths(vars=base)
    dirs = [paths["stdlib"], paths["platstdlib"]]
    dynload = sysconfig.get_config_var("DESTSHARED")
    if dynload:
        dirs.append(dynload)
    out: list[str] = []
    for d in dirs:
        d = os.path.realpath(d)
        if os.path.isdir(d) and not any(d == o or d.startswith(o + "/") for o in out):
            out.append(d)
    return out


def site_dirs_of_the_interpreter() -> list[str]:
    """The base interpreter's own site-packages, where they lie inside its standard library
    directories (a source build's ``lib/python3.X/site-packages``): hidden inside."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
            "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    paths = sysconfig.get_paths(vars=base)
    stdlib = stdlib_dirs()
    out = []
    for key in ("purelib", "platlib"):
        d = os.path.realpath(paths[key])
        if os.path.isdir(d) and d not in out and any(d.startswith(s + "/") for s in stdlib):
            out.append(d)
    return out


def _shared_objects(directory: str) -> list[str]:
    found = []
    for root, _, files in os.walk(directory):
        found += [os.path.join(root, name) for name in files if ".so" in name]
    return found


def interpreter_paths(executable: str, site_entries: list[str]) -> tuple[list[str], list[str]]:
    """(paths to show, each with its symlinks; directories to cover with an empty one).

    ``site_entries`` are the allowed site-packages entries (mounted elsewhere by the caller);
    their ELF objects count for the libraries, their own files are not listed.
    """
    stdlib = stdlib_dirs()
    roots = [executable]
    dynload = sysconfig.get_config_var("DESTSHARED")
    if dynload and os.path.isdir(dynload):  # the stdlib's only ELF objects
        roots += [os.path.join(dynload, name) for name in os.listdir(dynload) if ".so" in name]
    for tree in site_entries:
        if os.path.isdir(tree):
            roots += _shared_objects(tree)
        elif ".so" in os.path.basename(tree):
            roots.append(tree)
    inside = [os.path.realpath(t) for t in [*stdlib, *site_entries]]
    show = [executable, *stdlib]
    for lib in library_closure(roots):
        real = os.path.realpath(lib)
        if not any(real == t or real.startswith(t + "/") for t in inside):
            show.append(lib)
    return show, site_dirs_of_the_interpreter()
