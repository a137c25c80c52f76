"""Dense linear algebra on numpy arrays, with kernels written in the language
(`stdlib/dense.tk`): matrix products, BRGEMM, matrix-vector products, einsum
contractions and permutations.

    import numpy as np, dsl
    a = np.ones((2, 3, 4), np.float32); b = np.ones((4, 5), np.float32)
    c = dsl.ops.matmul(a, b)                        # numpy.matmul's semantics
    y = dsl.ops.matvec(b.T, np.ones(4, np.float32))

float32 and float64 (mixed: float64, as numpy promotes). Views of any strides
work without a copy (transposed, sliced with steps, negative steps, broadcast
with stride 0). A matrix that a whole batch shares is packed once: a batch
whose rows stack (x @ W.T for x of shape (batch, tokens, features)) is one
product, and a small shared A or B is packed once per thread's run of
products. Bad arguments raise numpy's errors before any native code runs.
"""

from __future__ import annotations


import numpy as np

from .arrays import (SUFFIX, as_array, check_float_dtype, check_out, finish, kernel_view,
                     merge_axes, short_path_out, view_as, writable_target)
from .brgemm_matvec import _matvec_short, brgemm, matvec
from .einsum import contract
from .few_rows import MAX_ROWS as MAX_FEW_ROWS, few_rows, few_rows_batch, run_few_rows, run_few_rows_batch
from .library import intel_avx512, stdlib_module, wide_vectors
from .matvec_calls import matvec_calls as _matvec_calls, run_matvec as _matvec
from .permutation import permute

__all__ = ["brgemm", "contract", "matmul", "matvec", "permute"]

_SIGNATURE = "(n?,k),(k,m?)->(n?,m?)"


_library: list = []


def _kernels():
    """stdlib/dense.tk's kernels (looked up once: finding them hashes the sources)."""
    if not _library:
        _library.append(stdlib_module("dense"))
    return _library[0]


def matmul(a, b, *, out=None) -> np.ndarray:
    """The matrix product with numpy.matmul's rules: 1-D operands are promoted
    to a row (a) or column (b) and the axis removed after; N-D operands are
    stacks of matrices whose batch axes broadcast (an axis of 1 repeats).

    >>> dsl.ops.matmul(np.eye(2, dtype=np.float32), np.ones((2, 3), np.float32)).shape
    (2, 3)
    """
    if type(a) is _ND and type(b) is _ND and a.ndim == 2 and b.ndim == 2 and a.dtype is _F32 and b.dtype is _F32:
        # The call met most often, f32 with rows of A and B contiguous, in as
        # few Python steps as possible (each costs 20-45 ns: 17^3 went from
        # 1.38 to 0.7 us with `out`, numpy 1.15); the kernel's door checks
        # `out` and returns not None for anything it does not run.
        if a.strides[1] == 4 and b.shape[1] > 1:
            if b.strides[1] == 4 and a.shape[0] > 1:
                c = _empty((a.shape[0], b.shape[1]), _F32) if out is None else out
                if a.shape[0] > MAX_FEW_ROWS or not few_rows(a, b):
                    if _row_major_f32()(a, b, c) is None:
                        return c
                elif type(c) is _ND and c.ndim == 2:
                    try:
                        run_few_rows(_kernels(), a, b, c)
                        return c
                    except ValueError:
                        pass  # refused (an overlap, ...): the general path says why or copies
            elif b.strides[0] == 4 and (out is None or (type(out) is _ND and out.ndim == 2 and out.strides[1] == 4)):
                # x @ W.T without _plain_2d's questions (32^3, 1 thread: 3.7 -> 3.2 us; numpy 2.1)
                c = _empty((a.shape[0], b.shape[1]), _F32) if out is None else out
                kernel, args = _nt_call(_kernels(), a, b, c)
                if kernel.try_fast(*args) is None:
                    return c
    done = _plain_2d(a, b, out)
    if done is None:
        done = _plain_3d(a, b, out)
    if done is None and type(a) is np.ndarray and type(b) is np.ndarray:
        if b.ndim == 1:
            done = _matvec_short(a, b, out)
        elif a.ndim == 1 and b.ndim == 2:
            done = _matvec_short(b.T, a, out)
    if done is not None:
        return done
    a, b = as_array("matmul", "a", a), as_array("matmul", "b", b)
    dtype = check_float_dtype("matmul", a, b)
    for index, x in enumerate((a, b)):
        if x.ndim == 0:
            raise ValueError(f"matmul: Input operand {index} does not have enough dimensions (has 0, gufunc "
                             f"core with signature {_SIGNATURE} requires 1)")
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    (m, k), (k2, n) = a2.shape[-2:], b2.shape[-2:]
    if k != k2:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
                         f"signature {_SIGNATURE} (size {k2} is different from {k})")
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: operands could not be broadcast together with batch shapes "
                         f"{a2.shape[:-2]} and {b2.shape[:-2]} (shapes {a.shape} and {b.shape})") from None
    result_shape = batch + ((m,) if a.ndim > 1 else ()) + ((n,) if b.ndim > 1 else ())
    if out is None:
        out = np.empty(result_shape, dtype)
    else:
        out = check_out("matmul", out, result_shape, dtype)
    if out.size == 0:
        return out
    target = writable_target(out, a, b)
    c = target
    if a.ndim == 1:
        c = np.expand_dims(c, -1 if b.ndim == 1 else -2)
    if b.ndim == 1:
        c = np.expand_dims(c, -1)
    _product(kernel_view(a2, dtype), kernel_view(b2, dtype), c, batch, b.ndim == 1)
    return finish(target, out)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_ND, _empty = np.ndarray, np.empty


def _row_major_f32():
    """matmul_f32's builtin door (`Caller.try_fast`)."""
    if not _door:
        _door.append(_kernels().matmul_f32.try_fast)
    return _door[0]


_door: list = []
# A @ B.T with B stored by rows of K runs as dot products for few rows of A:
# B streams through once, where the GEMM packs it first. Up to 8 rows,
# matmul_nt_rows_f32, 1 x 4 sums at a time (1 thread of Zen 4: 8 x 1024 x
# 1024 331 us against 677 packed). With 512-bit vectors (32 registers),
# matmul_nt_blocks_f32's 4 x 4 sums, up to 256 rows and K / 2 (a short K
# pays a horizontal add per sum): 1 thread, GFLOP/s, packed in brackets,
# 16 x 1024 x 1024 96 (21), 64 x 1024 x 1024 99 (54), 256 x 1024 x 1024 97
# (87), 128 x 256 x 256 93 (95), 512^3 94 (105), 64 x 64 x 1024 57 (80).
# With AVX2's 16 registers, 4 x 4 sums of 8 lanes spill (Zen 4 running AVX2
# code, 64 x 1024 x 1024: 43 GFLOP/s against 54 for 1 x 4).
# On an Intel Xeon (2 MiB of L2 a core), whose shared L3 feeds a core more
# slowly, the dot products, which read all of A again for every four rows of
# B, fall behind the packed GEMM (its pack of B transposed in registers)
# past 32 rows: GFLOP/s, dots (packed), W 4096 x 4096, 1 thread: 16 rows 77
# (52), 32 70 (81), 48 76 (108), 64 75 (107); 2 threads: 16 136 (104), 32
# 154 (169), 48 144 (208); W 1024 x 1024, 1 thread: 32 rows 101 (93), 64 122
# (115); 2 threads: 32 218 (157), 64 169 (210).
_DOT_ROWS = 8
_WIDE_DOT_ROWS = 256
_INTEL_DOT_ROWS = 32


def _dot_kernel(lib, m: int, k: int):
    """The kernel of A @ B.T as dot products for m rows of A and a sum of
    length k, or None when the packed GEMM does better."""
    wide = wide_vectors()
    rows = _INTEL_DOT_ROWS if intel_avx512() else _WIDE_DOT_ROWS
    if m <= _DOT_ROWS or (wide and m <= min(rows, k // 2)):
        return lib.matmul_nt_blocks_f32 if wide else lib.matmul_nt_rows_f32
    return None


def _plain_2d(a, b, out) -> np.ndarray | None:
    """The common call in as few steps as possible: two matrices of one native
    float dtype (any layout: `_matmul` picks the kernel for it, as for the
    general path), `out` absent or a matrix of theirs that overlaps neither.
    None when anything else is asked, for the general path (~8 us) to
    handle; also when the kernel refuses the arguments (sizes that disagree,
    memory not aligned to the element, a read-only `out`: its entry checks
    all that before it touches memory), so the general path raises numpy's
    error or works around it. A 17^3 call costs ~1.1 us here with `out`
    (numpy: 1.1; 2.1 before the builtin door and the 2-D kernel); 10 us for
    a transposed operand before this path took them too."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 2 or b.ndim != 2:
        return None
    dtype = a.dtype
    if b.dtype is not dtype or (dtype is not _F32 and dtype is not _F64):
        return None
    c = short_path_out(out, (a.shape[0], b.shape[1]), dtype, a, b)
    if c is None:
        return None
    lib = _kernels()
    isz, sa, sb = dtype.itemsize, a.strides, b.strides
    if (sa[0] != isz and sa[1] != isz) or (sb[0] != isz and sb[1] != isz):  # cheap to ask: 17^3 takes ~1.3 us
        a, b = _some_way_contiguous(a), _some_way_contiguous(b)
    try:
        if few_rows(a, b):
            run_few_rows(lib, a, b, c)
            return c
        call = _plain_call(lib, a, b, c)
        if call is None:
            _matmul(lib, "f32" if dtype is _F32 else "f64", a[None], b[None], c[None])
        elif call[0].try_fast(*call[1]) is not None:
            call[0](*call[1])
    except ValueError:
        return None
    return c


def _plain_3d(a, b, out) -> np.ndarray | None:
    """A batch of products without broadcasting, in as few steps as possible:
    two stacks of matrices of one native float dtype with one batch axis of
    one length, `out` absent or a stack of theirs that overlaps neither. None
    for the general path to check and handle, also when a kernel refuses the
    arguments (unaligned memory, a read-only `out`: refused before it
    writes). The general path's questions took ~13-20 us of a (2,1,4) @
    (2,4,128) call, ~4 here (numpy: 1.8 in all)."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.ndim != 3 or b.ndim != 3:
        return None
    dtype = a.dtype
    if b.dtype is not dtype or (dtype is not _F32 and dtype is not _F64):
        return None
    (p, m, k), (p2, k2, n) = a.shape, b.shape
    if p != p2 or k != k2 or not (p and m and n):
        return None
    c = short_path_out(out, (p, m, n), dtype, a, b)
    if c is None:
        return None
    try:
        _matmul(_kernels(), "f32" if dtype is _F32 else "f64", a, b, c)
    except ValueError:
        return None
    return c


def _plain_call(lib, a: np.ndarray, b: np.ndarray, c: np.ndarray):
    """(kernel, arguments) for c = a @ b in the layouts met most often, to
    call through the kernel's builtin door without `_matmul`'s questions
    (with the views of a batch of one, ~1 us of a 17^3 call): both row-major;
    x @ W.T (f32); one row times a matrix. None for the rest."""
    isz = a.itemsize
    m, n = a.shape[0], b.shape[1]
    if n > 1 and a.strides[1] == isz:
        if m > 1 and b.strides[1] == isz:
            return (lib.matmul_f32 if a.dtype is _F32 else lib.matmul_f64), (a, b, c)
        if b.strides[0] == isz and a.dtype is _F32 and c.strides[1] == isz:
            return _nt_call(lib, a, b, c)
    if m == 1 and n > 1:
        calls = _matvec_calls(lib, "f32" if a.dtype is _F32 else "f64", b.T, a[0], c[0])
        if len(calls) == 1:
            return calls[0]
    return None


def _nt_call(lib, a: np.ndarray, b: np.ndarray, c: np.ndarray):
    """(kernel, arguments) of the f32 c = a @ b when b is W.T, W's rows
    contiguous (x @ W.T): for one row of a, W times it; dot products; or the
    GEMM written for that layout from 9 rows of a on."""
    m = a.shape[0]
    if m == 1:
        return lib.matvec_rows_f32, (b.T, a[0], c[0])
    dots = _dot_kernel(lib, m, a.shape[1])
    if dots is not None:
        return dots, (a, b.T, c)
    return lib.matmul_nt_f32, (a[None], b.T[None], c[None])


def _product(a: np.ndarray, b: np.ndarray, c: np.ndarray, batch: tuple, column: bool) -> None:
    """c[..., m, n] = a[..., m, :] @ b[..., :, n] with batch axes broadcast."""
    lib, t = _kernels(), SUFFIX[c.dtype]
    if column and a.ndim >= 2 and b.ndim == 2:  # matrices times a vector: all rows at once
        rows, y = merge_axes([_broadcast(a, batch), c[..., 0]], len(batch) + 1)
        if rows.ndim == 2:
            _matvec(lib, t, rows, b[:, 0], y)
            return
    if not batch:
        _matmul(lib, t, a[None], b[None], c[None])
        return
    views = merge_axes([_broadcast(a, batch), _broadcast(b, batch), c],
                       len(batch))
    _batched(lib, t, *views)


def _broadcast(x: np.ndarray, batch: tuple) -> np.ndarray:
    """x's matrices over the batch axes `batch` (a view; x itself when they are its own)."""
    return x if x.shape[:-2] == batch else np.broadcast_to(x, batch + x.shape[-2:])


def _batched(lib, t: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """One batch axis in one call; more (layouts no view merges) loop here."""
    if a.ndim == 3:
        _matmul(lib, t, a, b, c)
    else:
        for i in range(a.shape[0]):
            _batched(lib, t, a[i], b[i], c[i])


def _matmul(lib, t: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """c[p] = a[p] @ b[p] on 3-D views. A transposed f32 operand (its columns
    contiguous, as `x @ w.T` passes a Linear layer's weights) goes to the
    kernel written for that layout, where every inner stride is 1: the
    general-stride version of the plain kernel is 20-40% slower."""
    if a.shape[0] == 1 and (a.shape[1] == 1 or b.shape[2] == 1) and _as_matvec(lib, t, a[0], b[0], c[0]):
        return
    if a.shape[0] > 1 and b.strides[0] == 0 and not _one_panel(t, a, b):
        stacked_a, stacked_c = _stacked_rows(a), _stacked_rows(c)
        if stacked_a is not None and stacked_c is not None:
            _matmul(lib, t, stacked_a[None], b[:1], stacked_c[None])
            return
    a, b = _some_way_contiguous(a), _some_way_contiguous(b)
    if a.shape[0] == 1 and few_rows(a[0], b[0]) and _rows_contiguous(c):
        run_few_rows(lib, a[0], b[0], c[0])
        return
    if a.shape[0] > 1 and few_rows_batch(a, b) and _rows_contiguous(c):
        run_few_rows_batch(lib, a, b, c)
        return
    dots = _dot_kernel(lib, a.shape[1], a.shape[2]) if t == "f32" and a.shape[0] == 1 else None
    if dots is not None and _rows_contiguous(a) and _columns_contiguous(b) and _rows_contiguous(c):
        dots(a[0], b[0].T, c[0])
        return
    if t == "f32" and not (_rows_contiguous(a) and _rows_contiguous(b)):  # the common layout skips this
        ta, tb = _columns_contiguous(a), _columns_contiguous(b)
        if (ta or tb) and _rows_contiguous(c):
            name = f"matmul_{'t' if ta else 'n'}{'t' if tb else 'n'}_f32"
            getattr(lib, name)(a.swapaxes(1, 2) if ta else a, b.swapaxes(1, 2) if tb else b, c)
            return
    if t == "f32" and a.shape[0] > 1 and 0 in (a.strides[0], b.strides[0]):
        # One matrix for the whole batch: packed once per thread's run of products.
        if a.strides[0] == 0:
            lib.matmul_shared_a_f32(a[0], b, c)
        else:
            lib.matmul_shared_b_f32(a, b[0], c)
        return
    (lib.matmul_batch_f32 if t == "f32" else lib.matmul_batch_f64)(a, b, c)


def _one_panel(t: str, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a B shared by the whole batch goes to matmul_shared_b_f32: f32
    rows, within one of the contract pass's panels (kc = 512 rows, nc = 1024
    columns), which it packs once per thread's run of products and asks
    ahead for each next one's A and C (1 thread of Zen 4, (64,128,256) @
    (256,128): 105 GFLOP/s, against 90 as one 8192-row product). Any other
    shared B is one product of the batch's rows stacked (`_stacked_rows`),
    packed once, not once per product: (8,16,4096) @ (4096,4096) 48 -> 95,
    with W.T 20 -> 83; (16,64,512) @ W.T of 2048 rows 66 -> 104."""
    return t == "f32" and _rows_contiguous(a) and _rows_contiguous(b) and b.shape[1] <= 512 and b.shape[2] <= 1024


def _stacked_rows(x: np.ndarray) -> np.ndarray | None:
    """The matrices of x (P x M x cols) stacked as one (P*M) x cols view; None
    when the batch's step is not M rows."""
    p, m, cols = x.shape
    if m != 1 and x.strides[0] != m * x.strides[1]:
        return None
    return view_as(x, (p * m, cols))


def _some_way_contiguous(x: np.ndarray) -> np.ndarray:
    """x, or a C-ordered copy of its matrices when neither their rows nor their
    columns are contiguous (a[::2, ::2]): the kernels' general-stride code
    gathers every vector (64^3 with A stepped both ways, 1 thread: 20.5 us
    against 9.5 with the copy, numpy 7.1; numpy copies too). A broadcast batch (or row) is
    copied once."""
    if _rows_contiguous(x) or _columns_contiguous(x) or x.shape[-2] <= 1:
        return x
    if x.strides[0] == 0:
        return np.broadcast_to(np.ascontiguousarray(x[:1]), x.shape)
    return np.ascontiguousarray(x)


def _as_matvec(lib, t: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
    """c = a @ b as a matrix-vector product when a is one row or b one column
    (a GEMM would pack the matrix to use it once): whether it was. One row
    times a 256 x 256 W.T took 63 us packed (numpy: 4.4)."""
    if a.shape[0] == 1 and b.shape[1] > 1:
        _matvec(lib, t, b.T, a[0], c[0])
        return True
    if b.shape[1] == 1 and a.shape[0] > 1:
        _matvec(lib, t, a, b[:, 0], c[:, 0])
        return True
    return False


def _rows_contiguous(x: np.ndarray) -> bool:
    return x.shape[-1] <= 1 or x.strides[-1] == x.itemsize


def _columns_contiguous(x: np.ndarray) -> bool:
    return not _rows_contiguous(x) and (x.shape[-2] <= 1 or x.strides[-2] == x.itemsize)
