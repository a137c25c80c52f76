"""dsl.ops.contract against numpy.einsum: batch, permuted and repeated
indices, several summed indices (batch-reduce), one and three operands,
implicit outputs, `...` broadcast as numpy.einsum does, views of any strides, the seeds' tensor-backend
configuration, fused first and last touches, errors, 1 and 2 threads.

Every spec and layout compiles a kernel of its own (seconds each), so the
cases are few and each covers several things."""

from math import erf

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import dsl
from dsl.ops import einsum


def rand(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed + sum((i + 3) * s for i, s in enumerate(shape)))
    return rng.standard_normal(shape).astype(dtype)


def check(got, spec, *operands, rtol=1e-6):
    want = np.einsum(spec, *[np.asarray(x, np.float64) for x in operands])
    scale = 1 + np.einsum(spec, *[np.abs(np.asarray(x, np.float64)) for x in operands])
    terms = spec.split("->")[0].split(",")
    summed = max(1, int(np.prod([s for t, x in zip(terms, operands) for lab, s in zip(t, x.shape)
                                 if lab not in spec.split("->")[-1]]) or 1))
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= rtol * summed ** 0.5 * scale)


CASES = [
    ("bmk,bkn->bmn", [(3, 17, 19), (3, 19, 23)]),
    ("abcd,aecf->bedf", [(5, 6, 7, 9), (5, 10, 7, 11)]),       # two summed indices: batch-reduce
    ("ij,jk->ik", [(33, 1), (1, 65)]),
    ("iij,jk->ki", [(13, 13, 8), (8, 29)]),                    # repeated index: a diagonal
    ("ij,jk,kl->il", [(4, 5), (5, 6), (6, 7)]),                # three operands: plain loops
    ("ij,jk", [(6, 7), (7, 8)]),                               # implicit output
    ("ii->i", [(9, 9)]), ("ij->ji", [(5, 8)]), ("ij,ij->", [(4, 6), (4, 6)]), ("i,j->ij", [(5,), (7,)]),
    ("ik,k->i", [(40, 30), (30,)]), ("bij,bj->bi", [(0, 3, 4), (0, 4)]), ("ij,jk->ik", [(5, 0), (0, 4)]),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spec, shapes", CASES)
def test_against_einsum(spec, shapes, dtype):
    operands = [rand(s, dtype, i) for i, s in enumerate(shapes)]
    got = dsl.ops.contract(spec, *operands)
    assert got.dtype == dtype
    check(got, spec, *operands, rtol=1e-6 if dtype == np.float32 else 1e-14)


def test_views_and_out():
    a = rand((40, 30, 2))[:, ::-2, 0]                           # (40, 15), negative stride
    b = rand((20, 15)).T                                         # transposed
    out = np.full((20, 80), np.nan, np.float32)[:, ::2].T        # strided, transposed
    assert dsl.ops.contract("ij,jk->ik", a, b, out=out) is out
    check(out, "ij,jk->ik", a, b)
    assert np.isnan(np.asarray(out.base)[:, 1::2]).all()


def seed_operands():
    """The seeds' configuration: dims (M, N, K, M, N, K) = (32, 32, 8, 32, 32, 32),
    strides_in0 (8192, 0, 1024, 1, 0, 32), strides_in1 (0, 8192, 1024, 0, 32, 1),
    strides_out (32768, 1024, 0, 1, 32, 0), labelled a b c d e f."""
    f = 4
    a = as_strided(rand((32 * 8192,)), (32, 8, 32, 32), (8192 * f, 1024 * f, 1 * f, 32 * f))     # a c d f
    b = as_strided(rand((32 * 8192,), seed=1), (32, 8, 32, 32), (8192 * f, 1024 * f, 32 * f, f))  # b c e f
    c = as_strided(np.zeros(32 * 32768, np.float32), (32, 32, 32, 32), (32768 * f, 1024 * f, f, 32 * f))  # a b d e
    return a, b, c


SEED = "acdf,bcef->abde"


@pytest.mark.parametrize("threads", [1, 2])
def test_seed_configuration(threads):
    a, b, c = seed_operands()
    c[...] = np.nan
    dsl.set_num_threads(threads)
    dsl.ops.contract(SEED, a, b, out=c, first_touch="zero", last_touch="relu")
    want = np.maximum(np.einsum(SEED, a.astype(np.float64), b.astype(np.float64)), 0)
    assert np.allclose(c, want, rtol=1e-5, atol=1e-4)
    before = rand((32, 32, 32, 32), seed=3)
    c[...] = before
    dsl.ops.contract(SEED, a, b, out=c, first_touch="accumulate")
    dsl.set_num_threads(0)
    want = before + np.einsum(SEED, a.astype(np.float64), b.astype(np.float64))
    assert np.allclose(c, want, rtol=1e-5, atol=1e-4)


def test_bias_and_activations():
    a, b = rand((2, 9, 17)), rand((2, 17, 37))
    bias = rand((37,), seed=5)
    got = dsl.ops.contract("bmk,bkn->bmn", a, b, last_touch=[("bias", bias), "gelu", "silu"])
    x = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64)) + bias
    g = 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    assert np.allclose(got, g / (1 + np.exp(-g)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias_shape", [(), (9, 1), (2, 1, 37)])
def test_bias_broadcast(bias_shape):
    """A bias along any of the output's axes (or a scalar) broadcasts."""
    a, b = rand((2, 9, 17)), rand((2, 17, 37))
    bias = rand(bias_shape, seed=6)
    got = dsl.ops.contract("bmk,bkn->bmn", a, b, last_touch=("bias", bias))
    want = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64)) + bias
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)


def test_accumulate_with_relu_is_the_seeds_last_touch():
    """Without a zero first touch, relu applies to out + the sum."""
    a, b = rand((7, 5)), rand((5, 9))
    out = rand((7, 9), seed=2)
    want = np.maximum(out + a.astype(np.float64) @ b, 0)
    dsl.ops.contract("mk,kn->mn", a, b, out=out, first_touch="accumulate", last_touch="relu")
    assert np.allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call, error, text", [
    (lambda: dsl.ops.contract("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5))), ValueError,
     "size of label 'j' for operand 1 (4) does not match previous terms (3)"),
    (lambda: dsl.ops.contract("ij,jk->ik", np.ones((2, 3))), ValueError, "2 operand terms, 1 operands"),
    (lambda: dsl.ops.contract("ijk->i", np.ones((2, 3))), ValueError, "operand 0 has 2 dimensions"),
    (lambda: dsl.ops.contract("ij->iz", np.ones((2, 3))), ValueError, "output subscript 'z'"),
    (lambda: dsl.ops.contract("ij->ii", np.ones((2, 2))), ValueError, "appears more than once"),
    (lambda: dsl.ops.contract("...i->i", np.ones((2, 2))), ValueError, "no '...' ellipsis provided"),
    (lambda: dsl.ops.contract("...ij,...jk", np.ones((2, 3, 4)), np.ones((3, 4, 5))), ValueError,
     "could not be broadcast together along '...'"),
    (lambda: dsl.ops.contract("i.j->i", np.ones((2, 2))), ValueError, "invalid ellipsis"),
    (lambda: dsl.ops.contract("ij->i", np.ones((2, 2), np.int8)), TypeError, "unsupported dtype int8"),
    (lambda: dsl.ops.contract("ij->i", np.ones((2, 2)), last_touch="tanh"), ValueError, "unknown last_touch"),
    (lambda: dsl.ops.contract("ij->i", np.ones((2, 2)), first_touch="one"), ValueError, "first_touch must be"),
    (lambda: dsl.ops.contract("ij->i", np.ones((2, 2)), first_touch="accumulate"), ValueError, "must be given"),
    (lambda: dsl.ops.contract("ij->i", np.ones((2, 2)), out=np.ones(3)), ValueError, "out has shape (3,)"),
    (lambda: dsl.ops.contract("ij->i", np.ones((2, 2)), last_touch=("bias", np.ones(3))), ValueError,
     "does not broadcast"),
])
def test_errors(call, error, text):
    with pytest.raises(error) as info:
        call()
    assert text in str(info.value) and str(info.value).startswith("contract: ")


@pytest.mark.parametrize("spec, shapes", [
    ("...mk,...kn->...mn", [(5, 1, 3, 4), (2, 4, 6)]),   # batch axes broadcast: a 1 repeats, a missing axis too
    ("...mk,...kn", [(2, 3, 4), (4, 5)]),                # implicit output: the broadcast axes first
    ("i...,i...->...", [(3, 2), (3, 1)]),
    ("...", [(2, 3)]),
    ("b...k,bkn->b...n", [(2, 3, 5, 4), (2, 4, 6)]),     # in the middle of a term
])
def test_ellipsis(spec, shapes):
    operands = [rand(s, seed=i) for i, s in enumerate(shapes)]
    check(dsl.ops.contract(spec, *operands), spec, *operands)


def test_a_layout_seen_before_replays_its_kernel():
    """A second call with the spec, operand layouts and options of an earlier
    one skips the checks and planning and runs the kernel found then, on the
    new arrays: transposed and rank-0 operands, a fused last touch, and the
    dtype kept apart where the strides coincide (all 0 in a broadcast view)."""
    for dtype in (np.float32, np.float64):
        for seed in range(2):
            a = rand((5, 6), dtype, seed)
            b = rand((7, 6), dtype, seed).T
            s = np.array(1.5 + seed, dtype)
            got = dsl.ops.contract("ik,kj,->ji", a, b, s, last_touch="relu")
            assert got.dtype == dtype
            want = np.maximum(np.einsum("ik,kj,->ji", *[x.astype(np.float64) for x in (a, b, s)]), 0)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
            x = np.broadcast_to(np.array(1.0 + seed, dtype), (3, 4))
            y = np.broadcast_to(np.array(-2.0, dtype), (4, 2))
            got = dsl.ops.contract("ij,jk->ik", x, y)
            assert got.dtype == dtype
            check(got, "ij,jk->ik", x, y)


def test_a_rank0_result_replays():
    """A full contraction to a scalar, called twice with one layout: the
    second call replays the kernel and passes the result as one element."""
    v = rand((257,))
    for seed in range(3):
        w = rand((257,), seed=seed)
        got = dsl.ops.contract("i,i->", v, w)
        assert got.shape == ()
        check(got, "i,i->", v, w)


@pytest.mark.parametrize("spec, shapes", [
    ("ij,ij->i", [(37, 515), (37, 515)]), ("ij,j->i", [(37, 515), (515,)]), ("bij,bj->bi", [(3, 5, 130), (3, 130)]),
])
def test_sums_along_contiguous_rows_are_dot_products(spec, shapes):
    """With no M index and B contiguous along the sum, the kernel sums along
    rows (vectorized, reordered as einsum may) instead of gathering columns."""
    operands = [rand(s, seed=i) for i, s in enumerate(shapes)]
    inputs, output = einsum.parse_spec(spec, operands)
    plan = einsum.loop_order(inputs, output, operands, None)
    assert plan.summed == "j" and plan.output.endswith("i")
    text = einsum.kernel_text(plan, inputs, output, "f32", [], False, None)
    assert "@options(reassociate=True)" in text and "D_i, D_j]" in text
    check(dsl.ops.contract(spec, *operands), spec, *operands)


def test_a_permutation_is_a_blocked_copy(monkeypatch):
    """One operand, no sum: the result is dsl.ops.permute's, into `out` too."""
    calls = []
    real = einsum.permute
    monkeypatch.setattr(einsum, "permute", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    x = rand((4, 5, 6), np.float64)[:, ::-1]
    got = dsl.ops.contract("ijk->kij", x)
    np.testing.assert_array_equal(got, np.einsum("ijk->kij", x))
    out = np.zeros((6, 4, 5), np.float32)[::-1]
    y = rand((4, 5, 6))
    assert dsl.ops.contract("ijk->kij", y, out=out) is out
    np.testing.assert_array_equal(out, np.einsum("ijk->kij", y))
    assert calls == [(2, 0, 1), (2, 0, 1)]
    with pytest.raises(TypeError, match="contract: unsupported dtype int32"):
        dsl.ops.contract("ij->ji", np.ones((2, 2), np.int32))


@pytest.mark.parametrize("spec", ["bij->bj", "bij->ij", "bij->jb", "bij->j"])
def test_a_sum_keeping_the_contiguous_axis_is_dsl_ops_sum(spec, monkeypatch):
    """One float32 operand summed over axes other than its contiguous one:
    dsl.ops.sum reads it in memory order (the kernel's sum would run down
    columns); the result in the spec's order, into `out` too."""
    from dsl.ops import reduce as reduce_ops

    calls = []
    real = reduce_ops.sum
    monkeypatch.setattr(reduce_ops, "sum", lambda x, axis, out=None: calls.append(axis) or real(x, axis=axis, out=out))
    x = rand((6, 7, 37))
    check(dsl.ops.contract(spec, x), spec, x)
    out = np.full(np.einsum(spec, x).shape + (2,), np.nan, np.float32)[..., 0]
    assert dsl.ops.contract(spec, x, out=out) is out
    check(out, spec, x)
    summed = tuple(i for i, label in enumerate("bij") if label not in spec.split("->")[1])
    assert calls == [summed, summed]
    dsl.ops.contract("bij->bi", x)  # the sum along the contiguous axis stays the kernel's
    dsl.ops.contract("bij->bj", x.astype(np.float64))  # float64: the kernel's
    assert len(calls) == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("spec, shapes", [
    ("bij,bij->bj", [(3, 5, 37), (3, 5, 37)]), ("bij,bij->j", [(3, 5, 37), (3, 5, 37)]),
    ("bij,i->bj", [(3, 5, 37), (5,)]), ("bij,b->ji", [(3, 5, 37), (3,)]), (",bij->ij", [(), (4, 3, 33)]),
    ("ji,j->i", [(6, 40), (6,)]),
])
def test_sums_across_rows_add_into_c(spec, shapes, dtype):
    """The largest operand contiguous along an axis C keeps: plain loops add
    each product into C along that axis, the sums around it (a sum innermost
    would run down columns); zeroed first, or added to `out` when accumulating."""
    operands = [rand(s, dtype, i) for i, s in enumerate(shapes)]
    inputs, output = einsum.parse_spec(spec, operands)
    plan = einsum.loop_order(inputs, output, operands, None)
    text = einsum.kernel_text(plan, inputs, output, "f32", [], False, None)
    assert plan.loops and "C[" in text and "] += " in text and "] = 0.0" in text, text
    assert "= 0.0" not in einsum.kernel_text(plan, inputs, output, "f32", [], True, None)
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    check(dsl.ops.contract(spec, *operands), spec, *operands, rtol=rtol)
    start = rand(np.einsum(spec, *operands).shape, dtype, 7)
    out = start.copy()
    dsl.ops.contract(spec, *operands, out=out, first_touch="accumulate")
    np.testing.assert_allclose(out - start, np.einsum(spec, *operands), rtol=1e-4, atol=1e-4)
    relu = dsl.ops.contract(spec, *operands, last_touch="relu")  # with a last touch: the sum form
    np.testing.assert_allclose(relu, np.maximum(np.einsum(spec, *operands), 0), rtol=1e-4, atol=1e-4)
    assert not einsum.loop_order(inputs, output, operands, None, loops=False).loops
