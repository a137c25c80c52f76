"""Every example and stdlib kernel, built for AArch64 by `dslc`, driven by a C
program written from its generated header and run under qemu-aarch64; the
outputs against numpy (the examples' references) or, for a stdlib kernel, the
host build of the same kernel (itself checked against numpy by tests/numerical)."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from build import AARCH64, ROOT, assert_close, dslc_build, generic_args
from built_once import file_library
from harness import run_case
import toolchain

from dsl.ops.library import stdlib_module

sys.path.insert(0, str(ROOT / "examples"))
from references import CASES  # noqa: E402

aarch64 = toolchain.aarch64  # the fixture the tests below take

EXAMPLES = sorted((ROOT / "examples").glob("*.tk"))
STDLIB = sorted((ROOT / "stdlib").glob("*.tk"))


@pytest.mark.parametrize("tk", EXAMPLES, ids=lambda p: p.stem)
def test_example_under_qemu(tk, aarch64, tmp_path):
    kernels, message = dslc_build(tk, tmp_path, tk.stem, *AARCH64)
    assert kernels is not None, message
    unchecked = []
    for name, kernel in kernels.items():
        if name not in CASES:
            unchecked += _against_host(tk, tmp_path, kernel, aarch64)
            continue
        args, reference = CASES[name]()
        status, outputs, _ = run_case(aarch64, tmp_path, tk.stem, kernel, list(args))
        assert status == 0, name
        _, want = reference(*args[:-1], outputs[0])
        assert_close(outputs[0], want, name)
    _report(unchecked, len(kernels))


def _against_host(tk: Path, tmp_path: Path, kernel, aarch64, host=None) -> list[str]:
    """Run `kernel` on generic inputs under qemu and in-process (`host`, else
    the host build of `tk`); return why it could not be checked ([] when it was)."""
    args = generic_args(kernel, f"{tk.stem}.{kernel.name}")
    if args is None:
        return [f"{tk.name}: {kernel.name} has a parameter type the C driver does not ship"]
    if host is None:
        host = file_library(tk)
    host_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        getattr(host, kernel.name)(*host_args)
    except (ValueError, IndexError) as exc:
        return [f"{tk.name}: {kernel.name} rejects generic inputs ({exc}); it needs a reference case"]
    status, outputs, _ = run_case(aarch64, tmp_path, tk.stem, kernel, args)
    assert status == 0, kernel.name
    wanted = [a for a, p in zip(host_args, kernel.params) if p.output]
    for got, want in zip(outputs, wanted, strict=True):
        assert_close(got, want, f"{tk.name}: {kernel.name}")
    return []


def _report(unchecked: list[str], total: int) -> None:
    """Skip when no kernel of the file could be checked; else warn for those
    that could not (the summary shows both)."""
    if unchecked and len(unchecked) == total:
        pytest.skip("; ".join(unchecked))
    for reason in unchecked:
        warnings.warn(reason, stacklevel=2)


@pytest.mark.parametrize("tk", STDLIB or [None], ids=lambda p: p.stem if p else "none")
def test_stdlib_under_qemu(tk, aarch64, tmp_path):
    if tk is None:
        pytest.skip("stdlib/ has no .tk kernels yet")
    # The host build is dsl.ops' own, each kernel in a library of its own, from the
    # run's shared compile cache (which the tests of dsl.ops fill): dense.tk
    # alone takes ~100 s to build, which a build of our own here would repeat.
    host = stdlib_module(tk.stem)
    kernels, message = dslc_build(tk, tmp_path, tk.stem, *AARCH64)
    assert kernels is not None, f"{tk.name} compiles for the host but not for AArch64:\n{message}"
    if not kernels:
        pytest.skip(f"{tk.name} exports no kernels (helpers only)")
    unchecked = []
    for kernel in kernels.values():
        unchecked += _against_host(tk, tmp_path, kernel, aarch64, host)
    _report(unchecked, len(kernels))


def test_example_with_host_fallback_path(aarch64, tmp_path):
    """`_against_host` itself: row_sums on generic inputs, qemu against host."""
    tk = ROOT / "examples" / "row_sums.tk"
    kernels, message = dslc_build(tk, tmp_path, tk.stem, *AARCH64)
    assert kernels is not None, message
    assert _against_host(tk, tmp_path, kernels["row_sums"], aarch64) == []


def test_int8_dot_with_dotprod_under_qemu(aarch64, tmp_path):
    """The `sdot` loop (see test_aarch64_asm) gives numpy's int32 dot product."""
    tk = ROOT / "tests" / "cross" / "kernels" / "dot_i8.tk"
    kernels, message = dslc_build(tk, tmp_path, "dot", *AARCH64, "--features", "+neon,+dotprod")
    assert kernels is not None, message
    rng = np.random.default_rng(8)
    for n in (0, 1, 15, 16, 1001):
        a, b = (rng.integers(-128, 128, n).astype(np.int8) for _ in range(2))
        status, (out,), _ = run_case(aarch64, tmp_path, "dot", kernels["dot_i8"], [a, b, np.zeros(1, np.int32)])
        assert status == 0 and out[0] == np.dot(a.astype(np.int32), b.astype(np.int32)), n


METADATA_MAIN = r"""
#include <stdio.h>
#include "lib.h"
void __dsl_set_num_threads(int n);

int main(void) {
    __dsl_set_num_threads(2);
    fputs(__dsl_metadata(), stdout);
    return 0;
}
"""


def test_metadata_and_thread_setter_under_qemu(aarch64, tmp_path):
    """The library's self-description is the host build's, byte for byte."""
    tk = ROOT / "examples" / "matmul_index.tk"
    assert dslc_build(tk, tmp_path, "lib", *AARCH64)[0] is not None
    assert dslc_build(tk, tmp_path / "host", "lib")[0] is not None
    (tmp_path / "main.c").write_text(METADATA_MAIN)
    subprocess.run([*aarch64.cc, "main.c", "./lib.so", "-o", "main", "-Wl,-rpath,$ORIGIN"], cwd=tmp_path,
                   check=True)
    done = subprocess.run([*aarch64.run_prefix, "./main"], cwd=tmp_path, capture_output=True, text=True,
                          check=True)
    host = ctypes.CDLL(str(tmp_path / "host" / "lib.so")).__dsl_metadata
    host.restype = ctypes.c_char_p
    assert json.loads(done.stdout) == json.loads(host().decode())
