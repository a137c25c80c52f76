"""dsl.ops.matmul against numpy.matmul: shapes with 0, 1, primes, tall and
skinny; views (transposed, stepped, negative steps, broadcast); 1-D and N-D
operands with broadcast batch axes; float32, float64 and mixed; `out`;
errors raised before any kernel runs; 1 and 2 threads.

Tolerance: |got - want| <= rtol * sqrt(K) * (1 + |a| @ |b|), from a float64
reference; rtol 1e-6 for float32 (the issue's 1e-5 relative bound, tighter),
1e-14 for float64.
"""

import numpy as np
import pytest

import dsl
from dsl.ops.library import wide_vectors

RTOL = {np.float32: 1e-6, np.float64: 1e-14}


def close(got, a, b):
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    want = np.matmul(a64, b64)
    scale = 1.0 + np.matmul(np.abs(a64), np.abs(b64))
    k = a64.shape[-1]
    assert got.shape == want.shape
    assert got.dtype == np.result_type(a, b)
    assert np.all(np.abs(got - want) <= RTOL[got.dtype.type] * max(1, k) ** 0.5 * scale)


def rand(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed + sum((i + 3) * s for i, s in enumerate(shape)))
    return rng.standard_normal(shape).astype(dtype)


SIZES = [(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (1, 7, 1), (2, 3, 5), (7, 11, 13), (17, 1, 19),
         (31, 37, 41), (64, 64, 64), (1, 257, 3), (300, 2, 5), (3, 5, 300), (127, 131, 137), (260, 600, 70)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", SIZES)
def test_2d(size, dtype):
    m, k, n = size
    a, b = rand((m, k), dtype), rand((k, n), dtype, 1)
    close(dsl.ops.matmul(a, b), a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_edge_of_the_unpacked_tiles(dtype):
    """Small products read A and B in place with one of several tiles (wide,
    narrow, half or a quarter as tall, fewer vectors wide, one vector of half
    the lanes), chosen by M and N: every column count up to three vectors of
    AVX-512 and row counts around each tile's height, its half and quarter."""
    for m in (1, 3, 4, 5, 6, 7, 8, 14, 15, 16, 18, 19, 29, 30, 31, 32, 38, 39, 45, 77):
        for n in range(1, 50):
            a, b = rand((m, 9), dtype), rand((9, n), dtype, 1)
            close(dsl.ops.matmul(a, b), a, b)


@pytest.mark.parametrize("size", [(7, 11, 13), (64, 65, 66), (200, 150, 170)])
def test_views(size):
    m, k, n = size
    big_a, big_b = rand((2 * k, 3 * m)), rand((2 * n + 1, 2 * k))
    views = [
        (big_a[::2, ::3].T, big_b[1::2, ::2].T),        # transposed and stepped
        (big_a[::-2, ::-3].T, big_b[::-2, :k].T[:, :n]),  # negative steps
        (np.asfortranarray(rand((m, k))), rand((n, k)).T),
    ]
    for a, b in views:
        assert a.shape == (m, k) and b.shape == (k, n)
        close(dsl.ops.matmul(a, b), a, b)


def test_an_operand_stepped_both_ways_is_copied_to_rows(monkeypatch):
    """Neither rows nor columns contiguous: the kernel gets a C-ordered copy
    (its general-stride code would gather every vector), a broadcast batch
    copied once (its kernel takes the one matrix); the result is the same."""
    from dsl.ops import dense

    passed = []
    lib = dense._kernels()

    class Spy:
        def __init__(self, kernel):
            self.kernel = kernel

        def __call__(self, *args):
            passed.append(args)
            return self.kernel(*args)

        def try_fast(self, *args):
            passed.append(args)
            return self.kernel.try_fast(*args)

    monkeypatch.setattr(dense, "_kernels", lambda: type("L", (), {"__getattr__": lambda _, name: Spy(getattr(lib, name))})())
    a, b = rand((40, 60))[::2, ::3], rand((20, 30))
    close(dsl.ops.matmul(a, b), a, b)
    batched = np.broadcast_to(rand((34, 40))[::2, ::2], (3, 17, 20))
    close(dsl.ops.matmul(batched, b[:, :7]), batched, b[:, :7])
    for args in passed:
        for x in args[:2]:
            assert x.strides[-1] == 4 or x.strides[-2] == 4, x.strides
    assert passed[-1][0].shape == (17, 20)  # the batch's one matrix, copied once (not thrice)


@pytest.mark.parametrize("shapes", [
    ((5,), (5,)), ((5,), (5, 3)), ((4, 5), (5,)), ((2, 3, 4, 5), (5,)), ((5,), (2, 5, 3)),
    ((2, 1, 4, 5), (3, 5, 6)), ((1, 7, 9), (6, 9, 2)), ((6, 7, 9), (9, 2)), ((3, 1, 2, 4, 5), (2, 1, 5, 3)),
    ((0, 4, 5), (5, 2)), ((2, 3, 0), (0, 4)), ((1, 128, 256), (64, 256, 128)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_and_vectors(shapes, dtype):
    a, b = rand(shapes[0], dtype), rand(shapes[1], dtype, 1)
    got = dsl.ops.matmul(a, b)
    close(got, a, b)


def test_batch_axes_that_do_not_merge():
    """Batch views no stride can merge (so the op loops over the outer axis)."""
    a = rand((4, 3, 5, 6))[:, ::2].transpose(1, 0, 2, 3)  # (2, 4, 5, 6), strides of no single batch axis
    b = rand((4, 6, 7))[::-1]
    close(dsl.ops.matmul(a, b), a, b)
    c = dsl.ops.matmul(a[..., ::-1, :], np.broadcast_to(b[:1], (4, 6, 7)))
    close(c, a[..., ::-1, :], np.broadcast_to(b[:1], (4, 6, 7)))


def test_mixed_dtypes_promote():
    a, b = rand((5, 6), np.float32), rand((6, 7), np.float64)
    close(dsl.ops.matmul(a, b), a, b)
    close(dsl.ops.matmul(a, b.astype(">f8")), a, b)  # foreign byte order


def test_out():
    a, b = rand((3, 4, 5)), rand((5, 6))
    out = np.full((3, 4, 6), np.nan, np.float32)
    assert dsl.ops.matmul(a, b, out=out) is out
    close(out, a, b)
    wide = np.full((3, 4, 12), np.nan, np.float32)
    dsl.ops.matmul(a, b, out=wide[..., ::2])  # a strided out: only its elements written
    close(wide[..., ::2], a, b)
    assert np.all(np.isnan(wide[..., 1::2]))


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("m", [1, 5, 20])  # kernels called through their builtin door (5 rows of W.T: dot products)
def test_plain_matrices_the_kernel_refuses(m, transposed):
    """Two matrices take a short path straight to the kernel; what its entry
    refuses (memory not aligned to the element, an out that overlaps) goes
    the general way, and a strided out gets only its own elements."""
    a, b = rand((m, 6)), (rand((7, 6)).T if transposed else rand((6, 7)))
    raw = np.zeros(m * 6 * 4 + 1, np.uint8)
    unaligned = np.frombuffer(raw[1:].data, np.float32).reshape(m, 6)
    unaligned[...] = a
    assert not unaligned.flags.aligned
    close(dsl.ops.matmul(unaligned, b), a, b)
    wide = np.full((m, 14), np.nan, np.float32)
    assert dsl.ops.matmul(a, b, out=wide[:, ::2]).base is wide
    close(wide[:, ::2], a, b)
    assert np.all(np.isnan(wide[:, 1::2]))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m, k, n", [(2, 512, 512), (3, 300, 700), (8, 250, 1000), (5, 33, 1031), (2, 520, 512)])
def test_few_rows_read_b_in_place_while_it_is_in_cache(m, k, n, threads):
    """At most 8 rows of A and B within 1 MiB: the GEMM's unpacked path (the
    last case, just past 1 MiB, packs B), with every edge of its tiles; called
    directly, as dsl.ops gives 2 rows to the rows kernel."""
    from dsl.ops import dense

    a, b = rand((m, k)), rand((k, n))
    dsl.set_num_threads(threads)
    try:
        for bb in (b, b[:, 1:]):  # and rows of B that start inside a line
            c = np.empty((m, bb.shape[1]), np.float32)
            dense._kernels().matmul_f32(a, bb, c)
            close(c, a, bb)
            close(dsl.ops.matmul(a, bb), a, bb)
    finally:
        dsl.set_num_threads(0)


@pytest.mark.parametrize("n", [3, 6, 20])
def test_out_overlapping_an_input(n):
    a = rand((n, n))
    want = a.astype(np.float64) @ a.astype(np.float64)
    got = dsl.ops.matmul(a, a, out=a)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
    b = rand((n, n), seed=1)
    want = b.astype(np.float64) @ b.T.astype(np.float64)
    assert np.allclose(dsl.ops.matmul(b, b.T, out=b), want, rtol=1e-5, atol=1e-5)


def test_threads_agree():
    a, b = rand((300, 170)), rand((170, 190))
    results = []
    for threads in (1, 2):
        dsl.set_num_threads(threads)
        results.append(dsl.ops.matmul(a, b))
        results.append(dsl.ops.matmul(np.broadcast_to(a, (4, 300, 170)), b))
    dsl.set_num_threads(0)
    assert np.array_equal(results[0], results[2])  # each element's sum runs in the same order
    assert np.allclose(results[1], results[3], rtol=1e-6, atol=1e-5)
    close(results[0], a, b)


@pytest.mark.parametrize("args, error, text", [
    ((np.float32(1), np.ones(2, np.float32)), ValueError, "Input operand 0 does not have enough dimensions"),
    ((np.ones((2, 3), np.float32), np.ones((4, 2), np.float32)), ValueError,
     "mismatch in its core dimension 0, with gufunc signature (n?,k),(k,m?)->(n?,m?) (size 4 is different from 3)"),
    ((np.ones((20, 3), np.float64), np.ones((4, 2), np.float64)), ValueError,
     "mismatch in its core dimension 0, with gufunc signature (n?,k),(k,m?)->(n?,m?) (size 4 is different from 3)"),
    ((np.ones((20, 3), np.float32), np.ones((4, 2), np.float32)), ValueError,
     "mismatch in its core dimension 0, with gufunc signature (n?,k),(k,m?)->(n?,m?) (size 4 is different from 3)"),
    ((np.ones((20, 3), np.float32), np.ones((2, 4), np.float32).T), ValueError,
     "mismatch in its core dimension 0, with gufunc signature (n?,k),(k,m?)->(n?,m?) (size 4 is different from 3)"),
    ((np.ones((2, 2, 3), np.float32), np.ones((3, 3, 4), np.float32)), ValueError, "could not be broadcast"),
    ((np.ones((2, 3), np.int32), np.ones((3, 4), np.int32)), TypeError, "unsupported dtype int32"),
    (("ab", np.ones(2)), TypeError, "unsupported dtype <U2"),
])
def test_errors(args, error, text):
    with pytest.raises(error) as info:
        dsl.ops.matmul(*args)
    assert text in str(info.value) and str(info.value).startswith("matmul: ")


@pytest.mark.parametrize("transposed", [False, True])  # b = W.T: x @ W.T's short path
@pytest.mark.parametrize("m", [2, 20])
def test_bad_out(m, transposed):
    a, b = np.ones((m, 3), np.float32), (np.ones((4, 3), np.float32).T if transposed else np.ones((3, 4), np.float32))
    with pytest.raises(ValueError, match=rf"matmul: out has shape \(4, {m}\), the result has shape \({m}, 4\)"):
        dsl.ops.matmul(a, b, out=np.empty((4, m), np.float32))
    with pytest.raises(TypeError, match="matmul: out has dtype float64, the result is float32"):
        dsl.ops.matmul(a, b, out=np.empty((m, 4)))
    frozen = np.empty((m, 4), np.float32)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="matmul: out is read-only"):
        dsl.ops.matmul(a, b, out=frozen)
    with pytest.raises(TypeError, match="matmul: out must be"):
        dsl.ops.matmul(a, b, out=np.empty((m, 4), np.float32).tolist())


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("batch", [2, 3, 5])
def test_one_matrix_for_the_whole_batch(batch, threads, monkeypatch):
    """A (or B, when one panel holds it) broadcast over the batch goes to the
    kernel that packs it once per thread's run of products: runs shared out
    unevenly (3 or 5 products on 2 threads), fewer products than threads
    (each product's M blocks take the team), one panel and several (K > 512,
    N > 1024: B's products then stack into one)."""
    from dsl.ops import dense

    called = []
    lib = dense._kernels()
    monkeypatch.setattr(dense, "_kernels", lambda: type("L", (), {
        "__getattr__": lambda _, name: (called.append(name), getattr(lib, name))[1]})())
    dsl.set_num_threads(threads)
    try:
        for m, k, n in ((7, 9, 20), (150, 70, 40), (20, 600, 50), (13, 40, 1030)):
            a, b = rand((1, m, k)), rand((batch, k, n), seed=1)
            close(dsl.ops.matmul(a, b), a, b)
            a, b = rand((batch, m, k)), rand((k, n), seed=1)
            close(dsl.ops.matmul(a, b), a, b)
    finally:
        dsl.set_num_threads(0)
    assert called.count("matmul_shared_a_f32") == 4 and called.count("matmul_shared_b_f32") == 2, called


@pytest.mark.parametrize("layout", ["nn", "nt"])
def test_a_shared_b_stacks_the_batch_into_one_product(layout, monkeypatch):
    """x @ w (or x @ w.T, a Linear layer) with x a batch of matrices: one
    product of the batch's rows stacked, when the batch steps by whole
    matrices (else a batch of products: x's rows taken with a step)."""
    from dsl.ops import dense

    passed = []
    lib = dense._kernels()
    monkeypatch.setattr(dense, "_kernels", lambda: type("L", (), {"__getattr__": lambda _, name: (
        lambda *args: (passed.append((name, args[0].shape)), getattr(lib, name)(*args))[1])})())
    w = rand((600, 70), seed=1) if layout == "nn" else rand((70, 600), seed=1).T
    for x in (rand((3, 5, 600)), rand((3, 10, 600))[:, ::2], rand((4, 1, 600))):
        close(dsl.ops.matmul(x, w), x, w)
        stacks = x.strides[0] == x.shape[1] * x.strides[1] or x.shape[1] == 1
        name, shape = passed[-1]  # A's shape, as the kernel got it: rows last but one
        one = len(shape) == 2 or shape[0] == 1
        assert name.startswith("matmul_") and (one and shape[-2] == x.shape[0] * x.shape[1]) == stacks, passed


@pytest.mark.parametrize("size", [(1, 1, 1), (7, 11, 13), (30, 72, 16), (140, 300, 200)])
@pytest.mark.parametrize("layout", ["nt", "tn", "tt"])
def test_transposed_operands_take_their_layout_kernel(size, layout, monkeypatch):
    """x @ w.T and friends: the f32 kernel written for that layout runs (all
    inner strides 1), on plain and batched (broadcast) operands."""
    from dsl.ops import dense

    m, k, n = size
    a = rand((m, k)) if layout[0] == "n" else rand((k, m)).T
    b = rand((k, n), seed=1) if layout[1] == "n" else rand((n, k), seed=1).T
    called = []
    lib = dense._kernels()
    monkeypatch.setattr(dense, "_kernels", lambda: type("L", (), {
        "__getattr__": lambda _, name: (called.append(name), getattr(lib, name))[1]})())
    close(dsl.ops.matmul(a, b), a, b)
    batched = np.broadcast_to(a, (3, m, k))
    close(dsl.ops.matmul(batched, b), batched, b)
    few_rows = layout == "nt" and dense._dot_kernel(dense._kernels(), m, k) is not None  # dot products (below)
    runs = called.count(f"matmul_{layout}_f32")
    assert runs == (1 if few_rows else 2) or (m <= 1 or k <= 1 or n <= 1), called


@pytest.mark.parametrize("shapes", [((1, 300), (300, 40)), ((1, 300), (40, 300)), ((40, 300), (300, 1))])
def test_one_row_or_column_is_a_matrix_vector_product(shapes, monkeypatch):
    """A single row of a (or column of b) takes the matrix-vector kernels:
    a GEMM would pack the whole matrix to use it once. b given transposed
    (x @ W.T, one token through a Linear layer) reads W by rows."""
    from dsl.ops import dense

    (m, k), (p, q) = shapes
    a = rand((m, k))
    b = rand((p, q), seed=1) if p == k else rand((p, q), seed=1).T
    called = []
    lib = dense._kernels()
    monkeypatch.setattr(dense, "_kernels", lambda: type("L", (), {
        "__getattr__": lambda _, name: (called.append(name), getattr(lib, name))[1]})())
    close(dsl.ops.matmul(a, b), a, b)
    assert called and all(name.startswith("matvec_") for name in called), called
    out = np.empty((m, b.shape[1]), np.float32)
    dsl.ops.matmul(a, b, out=out)
    close(out, a, b)


@pytest.mark.parametrize("vector_first", [False, True])
def test_a_vector_operand_takes_the_matrix_vector_short_path(vector_first, monkeypatch):
    """W @ v and v @ W go straight to the matrix-vector kernels, `out` too;
    an out that overlaps an operand, or unaligned memory, goes the general way."""
    from dsl.ops import dense

    w, v = rand((70, 70)), rand((70,), seed=1)
    args = (v, w) if vector_first else (w, v)
    seen = []
    monkeypatch.setattr(dense, "_product", lambda *a: seen.append(a))
    close(dsl.ops.matmul(*args), *args)
    out = np.full(70, np.nan, np.float32)
    assert dsl.ops.matmul(*args, out=out) is out
    close(out, *args)
    assert not seen
    monkeypatch.undo()
    want = args[0].astype(np.float64) @ args[1].astype(np.float64)
    inside = w.copy()
    inside_args = (inside[0], inside) if vector_first else (inside, inside[:, 0])
    want_inside = inside_args[0].astype(np.float64) @ inside_args[1].astype(np.float64)
    assert np.allclose(dsl.ops.matmul(*inside_args, out=inside[:, 3]), want_inside, rtol=1e-5, atol=1e-5)
    raw = np.zeros(70 * 4 + 1, np.uint8)
    unaligned = np.frombuffer(raw[1:].data, np.float32)
    unaligned[...] = v
    got = dsl.ops.matmul(unaligned, w) if vector_first else dsl.ops.matmul(w, unaligned)
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m, k, n", [(2, 300, 41), (8, 33, 7), (5, 2, 9), (3, 4096, 8), (13, 300, 41), (4, 17, 4),
                                     (64, 200, 7), (18, 64, 33), (11, 40, 2), (256, 520, 6)])
def test_few_rows_times_w_t_are_dot_products(m, k, n, monkeypatch):
    """x @ W.T for rows of x few beside K (up to 8; with 512-bit vectors up
    to 256, 32 on Intel's cores, and K / 2) runs as dot products over rows of W, without packing
    it: blocks of 4 rows of x by 4 of W, then the rows of x left over, then
    the rows of W left over; any K, plain and as a batch of one."""
    from dsl.ops import dense

    if dense._dot_kernel(dense._kernels(), m, k) is None:
        pytest.skip("this machine's vectors take the packed GEMM for these sizes")
    name = "matmul_nt_blocks_f32" if wide_vectors() else "matmul_nt_rows_f32"

    x, w = rand((m, k)), rand((n, k), seed=1)
    called = []
    lib = dense._kernels()
    monkeypatch.setattr(dense, "_kernels", lambda: type("L", (), {
        "__getattr__": lambda _, name: (called.append(name), getattr(lib, name))[1]})())
    close(dsl.ops.matmul(x, w.T), x, w.T)
    close(dsl.ops.matmul(x[None], w.T[None])[0], x, w.T)
    assert called == [name] * 2, called


def test_dot_products_up_to_the_cores_rows(monkeypatch):
    """The rows of x that x @ W.T takes as dot products: 8 with AVX2's
    registers; with AVX-512 up to K / 2 and 256 rows, 32 on Intel's cores."""
    from dsl.ops import dense

    lib = dense._kernels()
    for wide, intel, rows in ((False, False, 8), (True, False, 256), (True, True, 32)):
        monkeypatch.setattr(dense, "wide_vectors", lambda wide=wide: wide)
        monkeypatch.setattr(dense, "intel_avx512", lambda intel=intel: intel)
        assert dense._dot_kernel(lib, rows, 4096) is not None and dense._dot_kernel(lib, rows + 1, 4096) is None
    assert dense._dot_kernel(lib, 40, 64) is None  # more rows than K / 2


@pytest.mark.parametrize("kernel", ["matmul_nt_rows_f32", "matmul_nt_blocks_f32"])
@pytest.mark.parametrize("m, k, n", [(1, 5, 3), (4, 16, 4), (7, 33, 13), (13, 300, 41), (9, 0, 6)])
def test_both_dot_product_kernels_on_any_machine(kernel, m, k, n):
    """Each machine calls one of the two (by its vector width): both are
    checked here, whatever this machine is."""
    from dsl.ops import dense

    x, w = rand((m, k)), rand((n, k), seed=1)
    c = np.full((m, n), np.nan, np.float32)
    getattr(dense._kernels(), kernel)(x, w, c)
    close(c, x, w.T)
