"""`dsl.ops.matvec` and `dsl.ops.brgemm`: the matrix-vector product in
whichever order the matrix's layout makes contiguous, and the batch-reduce
GEMM, on stdlib/dense.tk's kernels (`dsl.ops.dense` re-exports both)."""

from __future__ import annotations

import numpy as np

from .arrays import (SUFFIX, as_array, as_view, check_float_dtype, check_out, finish, kernel_view,
                     short_path_out, writable_target)
from .matvec_calls import run_matvec as _matvec

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


_dense: list = []  # dsl.ops.dense, which imports this module: imported on first use


def _kernels():
    """stdlib/dense.tk's kernels, as `dsl.ops.dense` holds them (asked at each
    call, so that a test's stand-in for them is seen; the module is imported
    once: an import in here cost ~0.5 us of each 3 us call)."""
    if not _dense:
        from . import dense

        _dense.append(dense)
    return _dense[0]._kernels()


def matvec(a, x, *, out=None) -> np.ndarray:
    """y = a @ x for a matrix `a` (M x K) and a vector `x` (K): memory-bound,
    one pass over `a` in whichever order its layout makes contiguous.

    >>> dsl.ops.matvec(np.ones((3, 4), np.float32), np.ones(4, np.float32))
    array([4., 4., 4.], dtype=float32)
    """
    done = _matvec_short(a, x, out)
    if done is not None:
        return done
    a, x = as_array("matvec", "a", a), as_array("matvec", "x", x)
    dtype = check_float_dtype("matvec", a, x)
    if a.ndim != 2 or x.ndim != 1:
        raise ValueError(f"matvec: expects a matrix and a vector, got shapes {a.shape} and {x.shape}")
    if a.shape[1] != x.shape[0]:
        raise ValueError(f"matvec: shapes {a.shape} and {x.shape} not aligned: {a.shape[1]} (dim 1) != "
                         f"{x.shape[0]} (dim 0)")
    if out is None:
        out = np.empty(a.shape[0], dtype)
    else:
        out = check_out("matvec", out, (a.shape[0],), dtype)
    if out.size == 0:
        return out
    target = writable_target(out, a, x)
    _matvec(_kernels(), SUFFIX[dtype], kernel_view(a, dtype), kernel_view(x, dtype), target)
    return finish(target, out)


def _matvec_short(a, x, out) -> np.ndarray | None:
    """y = a @ x for a matrix and a vector of one native float dtype, `out`
    absent or a vector of theirs that overlaps neither, in as few steps as
    possible (matmul's general path took 15 us more than the 512^2 product).
    None for the general path to check and handle (also when the kernel
    refuses the arguments: unaligned memory)."""
    if type(a) is not np.ndarray or type(x) is not np.ndarray or a.ndim != 2 or x.ndim != 1:
        return None
    dtype = a.dtype
    if x.dtype is not dtype or (dtype is not _F32 and dtype is not _F64) or a.shape[1] != x.shape[0] or not a.size:
        return None
    y = short_path_out(out, a.shape[:1], dtype, a, x)
    if y is None:
        return None
    try:
        _matvec(_kernels(), "f32" if dtype is _F32 else "f64", a, x, y)
    except ValueError:
        return None
    return y


def brgemm(a_blocks, b_blocks, c, *, beta: float = 1.0) -> np.ndarray:
    """The batch-reduce GEMM, in place: c = beta * c + sum over r of
    a_blocks[r] @ b_blocks[r]. beta = 0 ignores c's old contents (NaN too).

    >>> c = np.zeros((2, 3), np.float32)
    >>> dsl.ops.brgemm(np.ones((4, 2, 5), np.float32), np.ones((4, 5, 3), np.float32), c)[0, 0]
    20.0
    """
    a = as_array("brgemm", "a_blocks", a_blocks)
    b = as_array("brgemm", "b_blocks", b_blocks)
    c = as_view("brgemm", "c", c)
    if not isinstance(c, np.ndarray):
        raise TypeError(f"brgemm: c must be a numpy array (it is updated in place), got {type(c).__name__}")
    dtype = check_float_dtype("brgemm", a, b, c)
    if c.dtype != dtype:
        raise TypeError(f"brgemm: c has dtype {c.dtype}, the operands make {dtype} (no casting)")
    if a.ndim != 3 or b.ndim != 3 or c.ndim != 2:
        raise ValueError(f"brgemm: expects a_blocks (R, M, K), b_blocks (R, K, N) and c (M, N), got shapes "
                         f"{a.shape}, {b.shape} and {c.shape}")
    (r, m, k), (r2, k2, n) = a.shape, b.shape
    if r != r2 or k != k2 or c.shape != (m, n):
        raise ValueError(f"brgemm: shapes do not agree: a_blocks {a.shape} (R, M, K), b_blocks {b.shape} "
                         f"(R, K, N), c {c.shape} (M, N)")
    if not c.flags.writeable:
        raise ValueError("brgemm: c is read-only")
    if isinstance(beta, (bool, np.bool_)) or not isinstance(beta, (int, float, np.integer, np.floating)):
        raise TypeError(f"brgemm: beta must be a number, got {type(beta).__name__}")
    if c.size == 0:
        return c
    lib, t = _kernels(), SUFFIX[dtype]
    target = writable_target(c, a, b)
    if target is not c and beta != 0:
        np.copyto(target, c)
    a, b = kernel_view(a, dtype), kernel_view(b, dtype)
    if beta == 0:
        getattr(lib, f"fill_{t}")(0.0, target)
    elif beta != 1:
        getattr(lib, f"scale_{t}")(float(beta), target)
    getattr(lib, f"brgemm_acc_{t}")(a, b, target)
    return finish(target, c)
