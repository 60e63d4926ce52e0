"""What the process backend shows of the host: the interpreter and what it loads, and how
paths with symlinks on the way are reproduced inside."""

from __future__ import annotations

import os
import sys

from sandboxes import interpreter_files
from sandboxes.process import _interpreter, allowed_site_entries


def test_the_interpreters_libraries_are_found_as_the_loader_would():
    python, _ = _interpreter()
    info = interpreter_files.elf_info(python)
    assert info is not None and info.interp
    libs = interpreter_files.library_closure([python])
    assert info.interp in libs
    assert any(os.path.basename(lib).startswith("libc.so") for lib in libs), libs
    assert all(os.path.exists(lib) for lib in libs)


def test_only_the_interpreter_its_stdlib_and_loaded_libraries_are_shown():
    python, _ = _interpreter()
    entries = allowed_site_entries(("numpy", "pandas", "scipy"))
    show, hide = interpreter_files.interpreter_paths(python, list(entries.values()))
    stdlib = interpreter_files.stdlib_dirs()
    assert show[0] == python and set(stdlib) <= set(show)
    for path in show[1 + len(stdlib):]:  # the rest are shared objects
        assert ".so" in os.path.basename(path) or os.path.basename(path).startswith("ld-"), path
    assert not any(p.startswith(("/usr/bin/", "/usr/local/bin/", "/usr/lib/python3/")) for p in show[1:])
    for site in hide:
        assert any(site.startswith(d + "/") for d in stdlib)
    assert not interpreter_files.elf_info(__file__)  # a text file is not an ELF object


def test_symlinks_on_the_way_are_reproduced(tmp_path):
    (tmp_path / "real" / "lib").mkdir(parents=True)
    (tmp_path / "real" / "lib" / "libx.so.1.2").write_bytes(b"")
    os.symlink("real", tmp_path / "alias")
    os.symlink("libx.so.1.2", tmp_path / "real" / "lib" / "libx.so.1")
    ops = interpreter_files.path_ops(str(tmp_path / "alias" / "lib" / "libx.so.1"))
    assert ops == [
        ("symlink", "real", str(tmp_path / "alias")),
        ("symlink", "libx.so.1.2", str(tmp_path / "real" / "lib" / "libx.so.1")),
        ("bind", str(tmp_path / "real" / "lib" / "libx.so.1.2"), ""),
    ]
    assert interpreter_files.path_ops(sys.prefix)[-1][0] == "bind"
