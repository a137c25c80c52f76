"""dsl.ops.qmatvec / qmatmul: within llama.cpp's bounds — NMSE <= 5e-4 against
float64 products with the dequantized weights (test-backend-ops' mul_mat bound),
and test-quantize-fns' dot-product error < 0.02."""

from __future__ import annotations

import numpy as np
import pytest

import dsl

from quant_data import KINDS, rows

PRODUCT_TYPES = ("q8_0", "q4_k", "q5_k", "q6_k")


def nmse(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.sum((got.astype(np.float64) - want) ** 2) / np.sum(want ** 2))


@pytest.mark.parametrize("qtype", PRODUCT_TYPES)
@pytest.mark.parametrize("kind", ("gaussian", "uniform", "heavy"))
@pytest.mark.parametrize("m, n, k", [(1, 7, 512), (3, 33, 768), (5, 16, 256)])
def test_qmatmul_nmse(qtype, kind, m, n, k):
    w = rows(kind, n, k, seed=n)
    x = rows("gaussian", m, k, seed=m + 100)
    wq = dsl.ops.quantize(w, qtype)
    want = x.astype(np.float64) @ dsl.ops.dequantize(wq, qtype, w.shape).astype(np.float64).T
    got = dsl.ops.qmatmul(x, wq, qtype, w.shape)
    assert got.shape == (m, n) and got.dtype == np.float32
    assert nmse(got, want) <= 5e-4
    vec = dsl.ops.qmatvec(wq, x[0], qtype, w.shape)
    assert vec.shape == (n,) and nmse(vec, want[0]) <= 5e-4
    # the same product whichever way it is asked for
    np.testing.assert_array_equal(vec, got[0])


@pytest.mark.parametrize("qtype", PRODUCT_TYPES)
def test_both_instruction_shapes_agree(qtype, monkeypatch):
    """The maddubs (x86) and sdot (AArch64) kernels, whichever this machine
    runs natively (the other in plain arithmetic): the same integer sums per
    block, so the same products up to the float rounding of their sums."""
    from dsl.ops import quant_matmul

    w = rows("heavy", 9, 1024, seed=4)
    x = rows("gaussian", 2, 1024, seed=5)
    wq = dsl.ops.quantize(w, qtype)
    want = x.astype(np.float64) @ dsl.ops.dequantize(wq, qtype, w.shape).astype(np.float64).T
    got = {}
    for module in ("quant_dot", "quant_dot_arm"):
        monkeypatch.setattr(quant_matmul, "dot_module", lambda: module)
        got[module] = dsl.ops.qmatmul(x, wq, qtype, w.shape)
        assert nmse(got[module], want) <= 5e-4
    scale = np.abs(got["quant_dot"]).max()
    np.testing.assert_allclose(got["quant_dot_arm"], got["quant_dot"], rtol=0, atol=1e-5 * scale)


@pytest.mark.parametrize("qtype", PRODUCT_TYPES)
def test_llama_cpp_dot_product_error(qtype):
    # test-quantize-fns: 0.1 + 2 cos(i) and 0.1 + 2 cos(i + 1), n = 4096, |dot - ref| / n < 0.02
    n = 4096
    i = np.arange(n, dtype=np.float64)
    a = (0.1 + 2 * np.cos(i)).astype(np.float32)
    b = (0.1 + 2 * np.cos(i + 1.0)).astype(np.float32)
    got = dsl.ops.qmatvec(dsl.ops.quantize(a[None, :], qtype), b, qtype, (1, n))
    assert abs(float(got[0]) - float(np.dot(a.astype(np.float64), b))) / n < 0.02


def test_zero_rows_and_columns():
    wq = dsl.ops.quantize(np.zeros((0, 256), np.float32), "q4_k")
    assert dsl.ops.qmatvec(wq, np.ones(256, np.float32), "q4_k", (0, 256)).shape == (0,)
    wq = dsl.ops.quantize(np.ones((3, 256), np.float32), "q4_k")
    assert dsl.ops.qmatmul(np.ones((0, 256), np.float32), wq, "q4_k", (3, 256)).shape == (0, 3)


@pytest.mark.parametrize("qtype", PRODUCT_TYPES)
def test_empty_rows_give_zeros(qtype):
    """K = 0: every product is an empty sum."""
    empty = np.zeros(0, np.uint8)
    np.testing.assert_array_equal(dsl.ops.qmatvec(empty, np.zeros(0, np.float32), qtype, (4, 0)), np.zeros(4))
    np.testing.assert_array_equal(dsl.ops.qmatmul(np.zeros((3, 0), np.float32), empty, qtype, (4, 0)),
                                  np.zeros((3, 4)))


@pytest.mark.parametrize("qtype", PRODUCT_TYPES)
def test_weights_at_an_odd_address(qtype):
    """Weights in a buffer one byte off take the quick path's checks and
    still give the product (through an aligned copy)."""
    w = rows("gaussian", 4, 512, seed=5)
    wq = dsl.ops.quantize(w, qtype)
    odd = np.frombuffer(bytearray(wq.nbytes + 1), np.uint8)[1:].reshape(wq.shape)
    odd[:] = wq
    x = rows("uniform", 1, 512, seed=6)[0]
    np.testing.assert_array_equal(dsl.ops.qmatvec(odd, x, qtype, w.shape), dsl.ops.qmatvec(wq, x, qtype, w.shape))


def test_every_form_of_the_arguments_gives_the_same_product():
    """The quick path (a tuple shape, a contiguous uint8 block array, a
    contiguous float32 x) and the general one agree: a list shape, numpy ints,
    a flat block buffer, an x with steps."""
    w = rows("gaussian", 5, 512, seed=3)
    wq = dsl.ops.quantize(w, "q4_k")
    x = rows("gaussian", 1, 1024, seed=4)[0]
    want = dsl.ops.qmatvec(wq, np.ascontiguousarray(x[::2]), "q4_k", (5, 512))
    for form in (lambda: dsl.ops.qmatvec(wq, x[::2], "q4_k", (5, 512)),
                 lambda: dsl.ops.qmatvec(wq.reshape(-1), x[::2], "q4_k", [5, 512]),
                 lambda: dsl.ops.qmatvec(wq, x[::2].copy(), "Q4_K", (np.int64(5), np.int64(512))),
                 lambda: dsl.ops.qmatmul(x[None, ::2], wq, "q4_k", (5, 512))[0]):
        np.testing.assert_array_equal(form(), want)


@pytest.mark.parametrize("call, error, words", [
    (lambda wq: dsl.ops.qmatvec(wq, np.ones(300, np.float32), "q4_k", (2, 256)), ValueError, "K = 256"),
    (lambda wq: dsl.ops.qmatvec(wq, np.ones(256, np.float64), "q4_k", (2, 256)), TypeError, "float32"),
    (lambda wq: dsl.ops.qmatmul(np.ones(256, np.float32), wq, "q4_k", (2, 256)), ValueError, r"\[M, K\]"),
    (lambda wq: dsl.ops.qmatvec(wq, np.ones(256, np.float32), "q4_k", (3, 256)), ValueError, "takes 432"),
    (lambda wq: dsl.ops.qmatvec(wq, np.ones(256, np.float32), "q8_k", (2, 256)), ValueError, "no fused product"),
    (lambda wq: dsl.ops.qmatvec(wq, np.ones(200, np.float32), "q4_k", (2, 200)), ValueError, "whole number"),
    (lambda wq: dsl.ops.qmatvec(wq, np.ones(256, np.float32), "q4_k", [2, [256]]), TypeError, "tuple of ints"),
    (lambda wq: dsl.ops.qmatvec(wq.view(np.int8), np.ones(256, np.float32), "q4_k", (2, 256)), TypeError, "uint8"),
])
def test_bad_calls(call, error, words):
    wq = dsl.ops.quantize(np.ones((2, 256), np.float32), "q4_k")
    with pytest.raises(error, match=words) as info:
        call(wq)
    assert "qmat" in str(info.value)


@pytest.mark.parametrize("kind", KINDS)
def test_activation_bytes_are_quantize_bytes(kind):
    """The products' own activation quantizers write dsl.ops.quantize's bytes:
    q8_0's call, and the q8_K fields a k-quant product's kernel fills."""
    from dsl.ops.quant_formats import quant_library
    from dsl.ops.quant_matmul import _weight_views, dot_module, quantize_activations

    x = rows(kind, 3, 512, seed=7)
    np.testing.assert_array_equal(quantize_activations(x), dsl.ops.quantize(x, "q8_0"))
    want = dsl.ops.quantize(x, "q8_k").reshape(3, 2, 292)
    w = dsl.ops.quantize(rows("gaussian", 2, 512, seed=8), "q6_k").reshape(2, 2, 210)
    xs, xd, xb = np.zeros((3, 2, 292), np.int8), np.zeros((3, 2, 73), np.float32), np.zeros((3, 2, 146), np.int16)
    quant_library(dot_module()).qdot_q6_k(*_weight_views(w, "q6_k"), x.reshape(3, 2, 256), xs, xd, xb,
                                         np.empty((3, 2), np.float32))
    np.testing.assert_array_equal(xs[:, :, 4:260], want[:, :, 4:260].view(np.int8))
    np.testing.assert_array_equal(xd[:, :, :1].view(np.uint8), want[:, :, :4])
    np.testing.assert_array_equal(xb[:, :, 130:].view(np.uint8), want[:, :, 260:])
