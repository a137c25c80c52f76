"""The builtin-function door: plain calls reach native code without ctypes,
and every other call still gets the checks and messages of the general path."""

import subprocess
import sys

import numpy as np
import pytest

import dsl
from dsl import f32, i64, N  # noqa: F401  (annotations)
from dsl.fastcall import LAYOUT_OK

pytestmark = pytest.mark.skipif(not LAYOUT_OK, reason="object layout differs from CPython's: no fastcall here")


@dsl.kernel
def fc_saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]


@dsl.kernel
def fc_shift(k: i64, x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = x[(i + k) % N]


def _args(n=5):
    x = np.arange(n, dtype=np.float32)
    return x, np.ones(n, np.float32), np.empty(n, np.float32)


def test_plain_kernels_get_a_builtin_function():
    x, y, out = _args()
    fc_saxpy(2.0, x, y, out)
    fast = fc_saxpy._caller._fastcall
    assert type(fast).__name__ == "builtin_function_or_method"
    np.testing.assert_array_equal(out, 2 * x + 1)
    assert fast(3.0, x, y, out) is None
    np.testing.assert_array_equal(out, 3 * x + 1)


def test_integer_scalars_take_the_general_path():
    x, _, out = _args()
    fc_shift(2, x, out)
    assert fc_shift._caller._fastcall is None
    np.testing.assert_array_equal(out, np.roll(x, -2))


def test_try_fast_runs_plain_calls_and_says_when_it_did_not():
    """`Caller.try_fast`: None when the kernel ran; otherwise nothing was
    written, and the Caller itself runs the call or raises its error."""
    x, y, out = _args()
    fc_saxpy(2.0, x, y, out)
    assert fc_saxpy._caller.try_fast(3.0, x, y, out) is None
    np.testing.assert_array_equal(out, 3 * x + 1)
    out[:] = -1
    assert fc_saxpy._caller.try_fast(3.0, x, y[:3], out) not in (None, 0)  # the kernel's size check
    assert fc_saxpy._caller.try_fast(3, x, y, out) is not None  # an int: not a plain call
    np.testing.assert_array_equal(out, -1)
    fc_shift(2, x, out)
    assert fc_shift._caller.try_fast(2, x, out) == 0  # no builtin door: always "not done"


@pytest.mark.parametrize("call, error, message", [
    (lambda x, y, o: fc_saxpy(2.0, x, y[:3], o), ValueError, "'y' axis 0 must equal N"),
    (lambda x, y, o: fc_saxpy(2.0, x.astype(np.float64), y, o), TypeError, "expects an array of float32"),
    (lambda x, y, o: fc_saxpy(2.0, x, y), TypeError, "missing 1 required argument"),
    (lambda x, y, o: fc_saxpy("2", x, y, o), TypeError, "parameter 'alpha' expects a number"),
    (lambda x, y, o: fc_saxpy(2.0, x, y, _readonly(o)), ValueError, "read-only"),
    (lambda x, y, o: fc_saxpy(2.0, x, y, x), ValueError, "shares memory"),
])
def test_errors_are_the_general_paths(call, error, message):
    x, y, out = _args()
    with pytest.raises(error, match=message):
        call(x, y, out)


def _readonly(a):
    a.setflags(write=False)
    return a


@pytest.mark.parametrize("alpha, convert", [
    (np.float32(2.0), lambda a: a),   # a numpy scalar, not a Python float
    (2, lambda a: a),                  # an int for a float parameter
    (2.0, memoryview),                 # the buffer protocol, not an ndarray
    (2.0, lambda a: a[::2][:3]),       # a strided view
])
def test_other_argument_kinds_still_work(alpha, convert):
    x, y, out = _args(6)
    xv = convert(x)
    n = len(np.asarray(xv))
    fc_saxpy(alpha, xv, y[:n], out=out[:n])
    np.testing.assert_array_equal(out[:n], 2 * np.asarray(xv) + 1)


def test_no_reference_leaks():
    x, y, out = _args()
    fc_saxpy(2.0, x, y, out)
    before = sys.getrefcount(None), sys.getrefcount(x)
    for _ in range(2000):
        fc_saxpy(2.0, x, y, out)
    after = sys.getrefcount(None), sys.getrefcount(x)
    assert abs(after[0] - before[0]) < 50 and after[1] == before[1]


def test_library_needs_no_python_symbols(tmp_path):
    src = tmp_path / "s.tk"
    src.write_text("def s(a: f32, x: f32[N], y: f32[N]):\n    for i in range(N):\n        y[i] = a * x[i]\n")
    so = tmp_path / "s.so"
    subprocess.run([sys.executable, "-m", "dsl.cli", str(src), "-o", str(so)], check=True)
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(so)], capture_output=True, text=True).stdout
    assert "Py" not in undefined
    assert "__fastcall" in subprocess.run(["nm", "-D", str(so)], capture_output=True, text=True).stdout


@dsl.kernel
def fc_heavy(x: f32[N], out: f32[N]):
    for i in range(N):
        v = x[i]
        for k in range(256):
            v = v * 0.999 + 0.001
        out[i] = v


def test_kernel_runs_without_the_gil():
    """Another Python thread keeps running while a kernel runs (ctypes released
    the GIL too): the longest pause it sees is far shorter than one call."""
    import threading
    import time

    x = np.ones(1 << 20, np.float32)
    out = np.empty_like(x)
    fc_heavy(x, out)
    start = time.perf_counter()
    fc_heavy(x, out)
    call = time.perf_counter() - start
    if call < 0.005:
        pytest.skip(f"the kernel is too fast here ({call * 1e3:.1f} ms) to see a pause")
    stamps = []
    running = threading.Event()

    def spin():
        running.set()
        while len(stamps) < 10_000_000 and not done.is_set():
            stamps.append(time.perf_counter())

    done = threading.Event()
    spinner = threading.Thread(target=spin)
    spinner.start()
    running.wait()
    for _ in range(3):
        fc_heavy(x, out)
    done.set()
    spinner.join()
    gaps = np.diff(np.array(stamps))
    assert gaps.max() < call / 2, f"a pause of {gaps.max() * 1e3:.1f} ms (one call: {call * 1e3:.1f} ms)"
