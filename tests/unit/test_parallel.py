"""Parallel loops (`pgrid`, `For.kind == "parallel"`): outlined bodies run by
libgomp, in the .so and in the JIT. Results equal numpy and the serial build for
1, 2 and 3 threads; failed checks inside a team come back as the kernel status.

The thread count is read once per library and process, so runs at a given
DSL_NUM_THREADS happen in subprocesses (`_child`). No test here measures time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import dsl
from dsl.backends.jit import JitLibrary
from dsl.backends.link import link_shared
from dsl.backends.llvm import build_module
from dsl.backends.optimize import emit_object, optimize, verify_llvm
from dsl.backends.target import host_target
from dsl.call import Caller
from dsl.grammar.diagnostics import Source
from dsl.lowering.ir import (Assign, Binary, Cast, Const, For, Kernel, Program, ScalarParam, Shape,
                             Store, Sym, TensorParam, Var)
from dsl.lowering.types import F32, I64
from dsl.metadata import loads, program_metadata
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

HERE = Path(__file__).resolve().parent
WARNING = "dslc: libgomp not found; parallel loops run on one thread"

KERNELS = """
@schedule()  # as written: no automatic schedule
def bmm(a: f32[Na, I, K], b: f32[Nb, K, J], out: f32[N, I, J]):
    for n, i, j in pgrid(N, I, J):
        acc = 0.0
        for k in range(K):
            acc += a[n % Na, i, k] * b[n % Nb, k, j]
        out[n, i, j] = acc

@schedule()  # as written: no automatic schedule
def scale(alpha: f32, x: f32[N], out: f32[N]):
    for n in pgrid(N):
        out[n] = alpha * x[n] + f32(n)

@schedule()  # as written: no automatic schedule
def gather(x: f32[M], idx: i64[N], out: f32[N]):
    for n in pgrid(N):
        out[n] = x[idx[n]]

@schedule()  # as written: no automatic schedule
def shift(x: f32[N], out: f32[N]):
    for n in pgrid(N):
        out[n] = x[n + 1]

@schedule()  # as written: no automatic schedule
def last(x: f32[N], out: f32[1]):
    t = -1.0
    for n in pgrid(N):
        t = x[n]
    out[0] = t

@schedule()  # as written: no automatic schedule
def nested(x: f32[M, N], out: f32[M, N]):
    for m in pgrid(M):
        for n in pgrid(N):
            out[m, n] = x[m, n] * 2.0

@schedule()  # as written: no automatic schedule
def inner(x: f32[T, N], out: f32[T, N]):
    for t in range(T):
        for n in pgrid(N):
            out[t, n] = x[t, n] + f32(t)
"""

TRIPS = [0, 1, 2, 3, 7, 100_003]


def compile_text(text: str, stop_after: str = "obj"):
    return compile_source(Source("parallel.tk", text), CompileOptions(use_cache=False), stop_after)


def build_so(text: str, path: Path) -> Path:
    job = compile_text(text)
    return link_shared(job.obj, path, job.target)


@pytest.fixture(scope="module")
def libs(tmp_path_factory) -> tuple[Path, Path]:
    """(parallel .so, the same kernels with grid instead of pgrid)."""
    tmp = tmp_path_factory.mktemp("parallel")
    return build_so(KERNELS, tmp / "par.so"), build_so(KERNELS.replace("pgrid", "grid"), tmp / "ser.so")


def run_child(check: str, *args: str, threads: int | None = 2, env: dict | None = None) -> str:
    """Run `_child(check, *args)` in a fresh interpreter with DSL_NUM_THREADS=threads;
    returns its stderr (the child asserts; a crash or a failed assert fails here)."""
    environ = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    environ.update(env or {})
    if threads is None:
        environ.pop("DSL_NUM_THREADS", None)
    else:
        environ["DSL_NUM_THREADS"] = str(threads)
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import test_parallel as t; t._child(*sys.argv[1:])"
    done = subprocess.run([sys.executable, "-c", code, check, *args], capture_output=True,
                          text=True, env=environ, timeout=300)
    assert done.returncode == 0, f"child {check} failed ({done.returncode}):\n{done.stderr}"
    return done.stderr


# ------------------------------------------------------------- checks run in a child


def _child(check: str, *args: str) -> None:
    CHECKS[check](*args)


def _os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _check_results(par_so: str, ser_so: str, team: str) -> None:
    """`team`: the number of threads the kernels should use."""
    par, ser = dsl.load(par_so), dsl.load(ser_so)
    rng = np.random.default_rng(7)
    before = _os_threads()
    for n in TRIPS:
        x = rng.standard_normal(n, dtype=np.float32)
        got, want = np.full(n, -9, np.float32), np.full(n, -9, np.float32)
        par.scale(1.5, x, got)
        ser.scale(1.5, x, want)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got, 1.5 * x + np.arange(n, dtype=np.float32), rtol=1e-6)
        out = np.zeros(1, np.float32)
        par.last(x, out)
        assert out[0] == (x[-1] if n else -1.0), (n, out)
    for n in [0, 1, 2, 3, 7, 40]:
        _check_bmm(par, ser, rng, n)
    _check_views(par, ser, rng)
    # libgomp keeps its workers: a team of T leaves T - 1 more threads; one thread calls no GOMP.
    assert _os_threads() - before == int(team) - 1, (_os_threads(), before, team)


def _check_bmm(par, ser, rng, n: int, i: int = 5, k: int = 6, j: int = 7) -> None:
    a = rng.standard_normal((n, i, k), dtype=np.float32)
    b = rng.standard_normal((n, k, j), dtype=np.float32)
    got, want = np.zeros((n, i, j), np.float32), np.zeros((n, i, j), np.float32)
    par.bmm(a, b, got)
    ser.bmm(a, b, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-5)


def _check_views(par, ser, rng) -> None:
    """Broadcasting by stride 0, a size-1 batch, a transposed view, 2-D nests."""
    a1 = rng.standard_normal((1, 4, 6), dtype=np.float32)
    b = rng.standard_normal((9, 6, 5), dtype=np.float32)
    for a in (np.broadcast_to(a1, (9, 4, 6)), a1):
        got = np.zeros((9, 4, 5), np.float32)
        par.bmm(a, b, got)
        np.testing.assert_allclose(got, a1 @ b, rtol=1e-4, atol=1e-5)
    bt = rng.standard_normal((9, 5, 6), dtype=np.float32).transpose(0, 2, 1)
    got, want = np.zeros((9, 4, 5), np.float32), np.zeros((9, 4, 5), np.float32)
    par.bmm(a1, bt, got)
    ser.bmm(a1, bt, want)
    np.testing.assert_array_equal(got, want)
    x = rng.standard_normal((7, 33), dtype=np.float32)
    # One row: the outer loop runs on this thread, the inner one on the team.
    row = rng.standard_normal((1, 5000), dtype=np.float32)
    got = np.zeros_like(row)
    par.nested(row, got)
    np.testing.assert_array_equal(got, row * 2)
    for name, want in (("nested", x * 2), ("inner", x + np.arange(7, dtype=np.float32)[:, None])):
        got = np.zeros_like(x)
        getattr(par, name)(x, got)
        np.testing.assert_array_equal(got, want)
        getattr(par, name)(x[:, ::-2], got[:, :17])  # negative strides
        np.testing.assert_array_equal(got[:, :17], want[:, ::-2])


def _check_failures(par_so: str) -> None:
    lib = dsl.load(par_so)
    x = np.arange(50, dtype=np.float32)
    for bad in (0, 1, 24, 48, 49):
        idx = np.arange(50) % 50
        idx[bad] = 50 if bad % 2 else -1
        with pytest.raises(IndexError, match="out of bounds on 'x'"):
            lib.gather(x, idx, np.zeros(50, np.float32))
    with pytest.raises(IndexError, match="out of bounds on 'x'"):
        lib.shift(x, np.zeros(50, np.float32))
    out = np.zeros(50, np.float32)
    lib.gather(x, np.arange(50)[::-1].copy(), out)  # still fine after failures
    np.testing.assert_array_equal(out, x[::-1])


def _check_python_threads(par_so: str) -> None:
    check_python_threads(dsl.load(par_so))


def check_python_threads(lib) -> None:
    """Four Python threads call one kernel at once, each on its own arrays."""
    rng = np.random.default_rng(3)
    cases = [(rng.standard_normal((8, 9, 10), dtype=np.float32),
              rng.standard_normal((8, 10, 11), dtype=np.float32)) for _ in range(4)]
    errors: list[BaseException] = []

    def work(a, b):
        try:
            for _ in range(25):
                out = np.zeros((8, 9, 11), np.float32)
                lib.bmm(a, b, out)
                np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-5)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=case) for case in cases]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors[0]


def _check_serial_fallback(so: str) -> None:
    """A library without libgomp: right results, one warning (checked by the parent)."""
    lib = dsl.load(so)
    for _ in range(2):
        x = np.arange(1000, dtype=np.float32)
        out = np.zeros(1000, np.float32)
        lib.scale(2.0, x, out)
        np.testing.assert_array_equal(out, 3 * x)


def _check_jit_without_gomp() -> None:
    import dsl.backends.jit as jit

    jit._load_gomp = lambda: False  # as on a machine without libgomp
    test_jit_runs_parallel_loops()


CHECKS = {"results": _check_results, "failures": _check_failures,
          "python_threads": _check_python_threads, "serial_fallback": _check_serial_fallback,
          "jit_without_gomp": _check_jit_without_gomp}

# --------------------------------------------------------------------------- tests


needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")


@needs_proc
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_results_equal_numpy_and_serial(libs, threads):
    run_child("results", str(libs[0]), str(libs[1]), str(threads), threads=threads)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_failed_check_in_team_returns_status(libs, threads):
    run_child("failures", str(libs[0]), threads=threads)


def test_python_threads_share_a_kernel(libs):
    run_child("python_threads", str(libs[0]), threads=2)
    check_python_threads(dsl.load(libs[0]))


@needs_proc
def test_thread_count_falls_back_to_omp_num_threads_and_cores(libs):
    run_child("results", str(libs[0]), str(libs[1]), "3", threads=None, env={"OMP_NUM_THREADS": "3"})
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    run_child("results", str(libs[0]), str(libs[1]), str(cores), threads=None)


def test_llvm_ir_outlines_the_parallel_loop():
    text = str(compile_text(KERNELS, "llvm").llvm)
    assert re.search(r"define internal void @bmm__unit__par0\(ptr [^)]*\)", text)
    assert re.search(r"call void @GOMP_parallel\(ptr [a-z ]*@bmm__unit__par0,", text)
    assert "declare extern_weak void @GOMP_parallel(ptr, ptr, i32, i32)" in text
    assert "@omp_get_thread_num" in text and "@omp_get_num_threads" in text
    # A nested parallel loop is outlined inside the outer one's body, once, and
    # forks a team only outside one.
    assert "@nested__unit__par0" in text and "@nested__unit__par1" not in text
    assert re.search(r"define internal [\w ]*@nested__unit__par0__body__par0__body\(", text)
    assert "declare extern_weak i32 @omp_in_parallel()" in text


def test_outlined_bodies_take_no_locals_they_assign_first():
    """A product's tile accumulators are set inside the loop that uses them:
    none is passed to an outlined body (a batch of small products passed
    ~100 vectors a call, which cost more than their work)."""
    text = str(compile_text("""
def mm(A: f32[P, M, K], B: f32[P, K, N], C: f32[P, M, N]):
    C[p, m, n] = sum(A[p, m, k] * B[p, k, n])
""", "llvm").llvm)
    bodies = re.findall(r"define internal [\w ]*@(mm__unit__\w*__body)\(([^)]*)\)", text)
    assert len(bodies) >= 3, [name for name, _ in bodies]
    for name, params in bodies:
        assert " x float>" not in params and params.count(",") < 40, (name, params)


def test_each_thread_calls_the_outlined_body():
    """The team's threads run the very function a serial run calls, not a
    copy inlined into GOMP's wrapper (compiled there on its own, q6_K's
    matrix-vector dots ran ~20% slower on both threads of a team)."""
    text = str(compile_text(KERNELS, "llvm").llvm)
    wrapper = text[text.index("define internal void @bmm__unit__par0("):]
    wrapper = wrapper[: wrapper.index("\n}\n")]
    assert "@bmm__unit__par0__body(" in wrapper


def test_llvm_ir_of_serial_kernel_has_no_gomp():
    text = str(compile_text(KERNELS.replace("pgrid", "grid"), "llvm").llvm)
    assert "GOMP" not in text and "omp_get" not in text and "__dsl_num_threads" not in text


def test_nm_lists_gomp_as_undefined_and_library_loads(libs):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm is not installed")
    symbols = subprocess.run([nm, "-D", str(libs[0])], capture_output=True, text=True, check=True).stdout
    assert re.search(r"^\s+[Uw] GOMP_parallel\b", symbols, re.M), symbols
    assert "scale" in dir(dsl.load(libs[0]))
    serial = subprocess.run([nm, "-D", str(libs[1])], capture_output=True, text=True, check=True).stdout
    assert "GOMP" not in serial


def test_library_without_libgomp_runs_serially_and_warns_once(tmp_path):
    """Linked without -lgomp, the weak GOMP_parallel is null at run time."""
    job = compile_text(KERNELS)
    obj = tmp_path / "k.o"
    obj.write_bytes(job.obj)
    so = tmp_path / "nogomp.so"
    cc = os.environ.get("CC", "cc").split()
    subprocess.run([*cc, "-shared", "-o", str(so), str(obj), "-lm"], check=True)
    stderr = run_child("serial_fallback", str(so), threads=2)
    assert stderr.count(WARNING) == 1, stderr


# -------------------------------------------------------------- the JIT, hand-built IR


def stepped_kernel(step: int) -> Kernel:
    """`for i in range(lo, hi, step) parallel: out[i] = f32(i) * 2`."""
    lo, hi, i = Sym("lo", I64, "scalar"), Sym("hi", I64, "scalar"), Sym("i", I64, "loop")
    m = Sym("M", I64, "dim")
    out = TensorParam("out", F32, (m,), True)
    value = Binary("*", Cast(Var(i), F32), Const(2.0, F32), F32)
    loop = For(i, Var(lo), Var(hi), step, (Store(out, (Var(i),), value),), "i", kind="parallel")
    body = (Assign(m, Shape(out, 0)), loop)
    return Kernel(f"stepped{abs(step)}{'n' if step < 0 else ''}", (ScalarParam(lo), ScalarParam(hi), out),
                  (m,), body)


def jit_callers(kernels: list[Kernel]) -> dict[str, Caller]:
    t = host_target()
    metadata = program_metadata(Program(tuple(kernels)))
    ref = verify_llvm(build_module(kernels, t, metadata, module_name="par"))
    optimize(ref, t, 3)
    lib = JitLibrary.from_object(emit_object(ref, t, 3), t)
    return {spec.name: Caller(spec, lib.address(f"{spec.name}__packed"), owner=lib)
            for spec in loads(metadata)}


STEPPED = {1: [(0, 50), (3, 4), (7, 7), (9, 2)], 7: [(3, 50), (0, 1), (0, 8)],
           -1: [(49, -1), (5, 4), (5, 5)], -5: [(49, 2), (49, 0), (4, -1)]}


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_jit_parallel_loops_with_steps(monkeypatch, threads):
    # A fresh JIT module reads the thread count at its first call.
    monkeypatch.setenv("DSL_NUM_THREADS", threads)
    callers = jit_callers([stepped_kernel(s) for s in STEPPED])
    for step, ranges in STEPPED.items():
        caller = callers[stepped_kernel(step).name]
        for lo, hi in ranges:
            out = np.full(50, -7, np.float32)
            caller(lo, hi, out)
            want = np.full(50, -7, np.float32)
            span = np.arange(lo, hi, step)
            want[span] = span * 2
            np.testing.assert_array_equal(out, want, err_msg=f"range({lo}, {hi}, {step})")


def test_jit_runs_parallel_loops():
    job = compile_text(KERNELS)
    lib = JitLibrary.from_object(job.obj, job.target)
    spec = next(s for s in loads(job.metadata) if s.name == "bmm")
    bmm = Caller(spec, lib.address("bmm__packed"), owner=lib)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 3, 4), dtype=np.float32)
    b = rng.standard_normal((6, 4, 5), dtype=np.float32)
    out = np.zeros((6, 3, 5), np.float32)
    bmm(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-5)


def test_jit_without_libgomp_uses_a_serial_team():
    stderr = run_child("jit_without_gomp", threads=2)
    assert stderr.count(WARNING) == 1, stderr
