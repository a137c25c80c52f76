"""Link an object file into a shared library with the system C compiler."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from .errors import BackendError
from .target import Target


def linker_command(target: Target) -> list[str]:
    """The compiler driver used to link for `target` ($CC, else cc or a cross gcc)."""
    if "CC" in os.environ:
        return shlex.split(os.environ["CC"])
    if target.arch in ("aarch64", "arm64") and os.uname().machine not in ("aarch64", "arm64"):
        return ["aarch64-linux-gnu-gcc"]
    return ["cc"]


def link_shared(obj: bytes, out_path: str | os.PathLike, target: Target) -> Path:
    """Write `obj` and link it into the shared library `out_path` (with -lm).

    The library appears atomically: it is linked under a temporary name in the
    same directory and renamed, so a concurrent loader never sees half a file.
    """
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dslc-link-") as tmp:
        obj_path = Path(tmp) / "kernels.o"
        obj_path.write_bytes(obj)
        fd, partial = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
        os.close(fd)
        try:
            _run_linker(linker_command(target) + ["-shared", "-o", partial, str(obj_path), "-lm"])
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
