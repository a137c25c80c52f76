"""Every example and standard-library kernel, through `dsl.load`, with each
array placed against an inaccessible (PROT_NONE) page: its last byte the last
of a page, or, read through a reversed view, its first byte the first of a
page. Odd sizes; any read or write past an array faults the child process.
Results must equal those of the same call on ordinary arrays (floats within
rounding: a reversed view takes the general code, whose sums may be ordered
differently)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsl.ops.library import stdlib_module
from built_once import file_library, in_worker_order
from kernel_calls import kernel_files

HERE = Path(__file__).resolve().parent

CHILD = r"""
import ctypes, mmap, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import dsl
from kernel_calls import calls

PAGE = mmap.PAGESIZE
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
keep = []


def guarded(values, at_end):
    # A copy of `values` between two PROT_NONE pages, touching one of them.
    size = max(values.nbytes, 1)
    pages = (size + PAGE - 1) // PAGE
    mm = mmap.mmap(-1, (pages + 2) * PAGE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    for page in (0, pages + 1):
        assert libc.mprotect(base + page * PAGE, PAGE, 0) == 0
    keep.append(mm)
    start = (pages + 1) * PAGE - values.nbytes if at_end else PAGE
    out = np.frombuffer(mm, np.uint8, count=values.nbytes, offset=start).view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


def at_end(values, output):
    return guarded(values, True)


def reversed_after_page(values, output):
    if values.ndim == 0:
        return guarded(values, True)
    flipped = guarded(np.ascontiguousarray(values[..., ::-1]), False)
    return flipped[..., ::-1]  # the same values; the lowest address starts a page


checked = 0
for path in sys.argv[2:]:
    lib = dsl.load(path)
    for place in (at_end, reversed_after_page):
        plain = list(calls(lib, sizes=(1, 7, 17, 33), seed=1))
        placed = list(calls(lib, sizes=(1, 7, 17, 33), seed=1, place=place))
        for (name, want), (_, got) in zip(plain, placed):
            try:
                getattr(lib, name)(*want)
            except (ValueError, TypeError, IndexError, MemoryError) as refused:
                # Random sizes a kernel does not accept (a conv's window past its
                # input): refused before any access; the placed call must agree.
                try:
                    getattr(lib, name)(*got)
                except type(refused):
                    continue
                raise AssertionError((path, name, "refused only on plain arrays"))
            getattr(lib, name)(*got)
            for w, g in zip(want, got):
                if isinstance(w, np.ndarray) and w.dtype.kind == "f":
                    # A reversed view runs the general (not unit-stride) code, whose
                    # sums may be ordered differently under reassociate: not bit for bit.
                    assert np.allclose(w, g, rtol=1e-5, atol=1e-5, equal_nan=True), (path, name, place.__name__)
                elif isinstance(w, np.ndarray):
                    assert np.array_equal(w, g), (path, name, place.__name__)
            checked += 1
print("ok", checked)
"""


@pytest.fixture(scope="module")
def libraries():
    """The examples and the standard library's kernels as the other tests
    build them, from the run's shared cache: compiled once for every test
    (building them again here cost one worker 295 s of a 20-minute run).
    A standard-library kernel comes in a library of its own, as dsl.ops
    builds it."""
    paths = []
    for path in in_worker_order(kernel_files()):
        if path.parent.name != "stdlib":
            paths.append(str(file_library(path).path))
            continue
        module = stdlib_module(path.stem)
        paths += sorted({str(module.library_of(k).path) for k in module.kernel_names()})
    return paths


def test_kernels_never_touch_the_page_beyond_their_arrays(libraries):
    child = subprocess.run([sys.executable, "-c", CHILD, str(HERE), *libraries], capture_output=True, text=True,
                           timeout=600)
    assert child.returncode == 0, (child.returncode, child.stderr[-3000:])
    words = child.stdout.split()
    assert words[0] == "ok" and int(words[1]) >= 2 * 4 * len(libraries), child.stdout
