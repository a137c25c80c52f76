"""Link an object file into a shared library with the system C compiler."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from .errors import BackendError
from .llvm.runtime import GOMP_PARALLEL
from .target import Target


def linker_command(target: Target) -> list[str]:
    """The compiler driver used to link for `target` ($CC, else cc or a cross gcc)."""
    if "CC" in os.environ:
        return shlex.split(os.environ["CC"])
    host = {"arm64": "aarch64", "amd64": "x86_64"}.get(os.uname().machine, os.uname().machine)
    arch = "aarch64" if target.arch == "arm64" else target.arch
    if arch != host and "linux" in target.triple:
        return [f"{arch}-linux-gnu-gcc"]  # Debian's cross compilers, e.g. gcc-aarch64-linux-gnu
    return ["cc"]


@functools.cache
def _find_gomp(driver: tuple[str, ...]) -> bool:
    """True when `driver` can link libgomp: it names an existing absolute path
    for it (an unknown library is echoed back as a bare name)."""
    try:
        done = subprocess.run([*driver, "-print-file-name=libgomp.so"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    path = done.stdout.strip()
    return done.returncode == 0 and os.path.isabs(path) and os.path.exists(path)


def runtime_libraries(obj: bytes, target: Target) -> list[str]:
    """Libraries a kernel library links: libm, and libgomp when `obj` has
    parallel loops and the compiler has it. Without it the weak GOMP symbols
    stay null and parallel loops run serially (with a warning at run time)."""
    libs = ["-lm"]
    if GOMP_PARALLEL.encode() not in obj or not _find_gomp(tuple(linker_command(target))):
        return libs
    if "darwin" in target.triple or "apple" in target.triple:
        return libs + ["-lgomp"]
    # The references are weak, which --as-needed (the default of some
    # distributions) does not count as a use: it would drop libgomp.
    return libs + ["-Wl,--no-as-needed", "-lgomp"]


def link_shared(obj: bytes | list[bytes], out_path: str | os.PathLike, target: Target) -> Path:
    """Write `obj` (one object file, or several: a multi-ISA library) and link
    it into the shared library `out_path` (with `runtime_libraries`: -lm, and
    -lgomp for parallel loops when available).

    The library appears atomically: it is linked under a temporary name in the
    same directory and renamed, so a concurrent loader never sees half a file.
    """
    objs = [obj] if isinstance(obj, bytes) else list(obj)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dslc-link-") as tmp:
        obj_paths = [Path(tmp) / f"kernels{k}.o" for k in range(len(objs))]
        for path, data in zip(obj_paths, objs):
            path.write_bytes(data)
        fd, partial = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        os.close(fd)
        try:
            cmd = linker_command(target) + ["-shared", "-o", partial, *map(str, obj_paths)]
            _run_linker(cmd + runtime_libraries(b"".join(objs), target))
            os.replace(partial, out)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    return out


def _run_linker(cmd: list[str]) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as err:
        raise BackendError(f"cannot run linker {cmd[0]!r}: {err}") from None
    if done.returncode != 0:
        raise BackendError(f"linking failed ({shlex.join(cmd)}):\n{done.stderr.strip()}")
