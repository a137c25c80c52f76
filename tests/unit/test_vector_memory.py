"""Vector memory access: gathers and scatters at computed indices, and masked
tails that never touch the page after the array."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.lowering import ir
from dsl.lowering.rewrite import map_stmts
from dsl.lowering.types import I64
from dsl.pipeline import STAGES, compile_source
from vector_kernels import views


PERMUTE = """@schedule(vectorize(i, 8, tail=mask))
def permute(x: f32[N], out: f32[N], back: f32[N]):
    for i in range(N):
        out[i] = x[i]
        back[i] = x[i]
"""


def _square_mod_n(index: ir.Expr, n: ir.Sym) -> ir.Expr:
    """(index * index) % N: a vector index that is no ramp (the bounds prover
    cannot show it in bounds, so this is built by hand)."""
    return ir.Binary("%", ir.Binary("*", index, index, I64), ir.Var(n), I64)


def test_gather_and_scatter_at_computed_indices(tmp_path):
    """out[i] = x[(i*i) % N] and back[(i*i) % N] = x[i]: the scatter's collisions
    leave the value of the last iteration, as a serial loop does."""
    job = compile_source(Source("permute.tk", PERMUTE), CompileOptions(), stop_after="guard")
    kernel = job.program.kernels[0]
    n = kernel.dims[0]

    def permuted(st):  # in the full-vector loop and the masked last step alike
        if isinstance(st, ir.Store) and st.tensor.name == "out":
            return replace(st, value=replace(st.value, indices=(_square_mod_n(st.value.indices[0], n),)))
        if isinstance(st, ir.Store) and st.tensor.name == "back":
            return replace(st, indices=(_square_mod_n(st.indices[0], n),))
        return None

    kernel = replace(kernel, body=map_stmts(kernel.body, None, permuted))
    job.program = replace(job.program, kernels=(kernel,))
    for stage in STAGES:
        if stage.name in ("llvm", "obj"):
            stage.run(job)
    text = str(job.llvm)
    assert "@llvm.masked.gather.v8f32" in text and "@llvm.masked.scatter.v8f32" in text
    lib = dsl.load(link_shared(job.obj, tmp_path / "permute.so", job.target))
    for size in (1, 7, 8, 9, 63, 64, 1000):
        x = np.arange(1, size + 1, dtype=np.float32)
        for xv in views(x):
            out, back = np.zeros(size, np.float32), np.zeros(size, np.float32)
            lib.permute(xv, out, back)
            squares = np.arange(size) ** 2 % size
            assert np.array_equal(out, x[squares])
            expect = np.zeros(size, np.float32)
            for i, j in enumerate(squares):
                expect[j] = x[i]
            assert np.array_equal(back, expect)


# ------------------------------------------------------------------ masked tails at a page end

PAGE_CHILD = r"""
import ctypes, mmap, sys
import numpy as np
import dsl

PAGE = mmap.PAGESIZE
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
keep = []


def guarded(values, at_end=True):
    # A copy of `values` against an inaccessible page: its last byte the last of
    # a page (at_end), else its first byte the first of a page.
    mm = mmap.mmap(-1, 3 * PAGE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    for page in (0, 2):
        assert libc.mprotect(base + page * PAGE, PAGE, 0) == 0
    keep.append(mm)
    size = values.size * values.itemsize
    start = 2 * PAGE - size if at_end else PAGE
    out = np.frombuffer(mm, np.uint8)[start: start + size].view(values.dtype).reshape(values.shape)
    out[:] = values
    return out


lib = dsl.load(sys.argv[1])
rng = np.random.default_rng(0)
for n in (1, 7, 9, 15, 17, 63, 64, 1000):
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    gx, gy, out = guarded(x), guarded(y), guarded(np.zeros(n, np.float32))
    lib.saxpy_f32_mask(np.float32(2), gx, gy, out)  # masked loads and a masked store
    assert np.array_equal(out, np.float32(2) * x + y)
    rx, ry, rout = guarded(x, False)[::-1], guarded(y, False)[::-1], guarded(np.zeros(n, np.float32), False)[::-1]
    lib.saxpy_f32_mask(np.float32(2), rx, ry, rout)  # the same through masked gathers and scatters
    assert np.array_equal(rout, np.float32(2) * x[::-1] + y[::-1])
    res = guarded(np.zeros(1, np.float32))
    lib.dot(gx, gy, res)
    assert abs(res[0] - np.dot(x.astype(np.float64), y)) < 1e-3 * (1 + n)
    a, b = rng.integers(0, 256, n, dtype=np.uint8), rng.integers(0, 256, n, dtype=np.uint8)
    ga, gb, gout = guarded(a), guarded(b), guarded(np.zeros(n, np.uint8))
    lib.bytes_masked(ga, gb, gout)
    assert np.array_equal(gout, a * np.uint8(3) + b)
    h, hout = guarded(x.astype(np.float16)), guarded(np.zeros(n, np.float16))
    lib.half(np.float32(2), h, gy, hout)
    assert np.array_equal(hout, (np.float32(2) * x.astype(np.float16).astype(np.float32) + y).astype(np.float16))
    flags, bools, sel = guarded(x > 0), guarded(np.zeros((2, n), bool)), guarded(np.zeros(n, np.float32))
    lib.logic(flags, gx, np.float32(0.1), bools, sel)
    assert np.array_equal(sel, np.where(x > 0, x, -x))
print("ok")
"""


def test_masked_tails_never_touch_the_next_page(built):
    """Arrays end exactly at a page followed by a PROT_NONE page (or start right
    after one, read backwards): reading or writing a masked-off lane would fault."""
    child = subprocess.run([sys.executable, "-c", PAGE_CHILD, built["vec"]], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0 and child.stdout.strip() == "ok", (child.returncode, child.stderr[-2000:])


# ------------------------------------------------------------------ IR and assembly patterns
