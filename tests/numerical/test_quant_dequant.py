"""dsl.ops.dequantize: bit-exact with ggml's dequantize_row_* and gguf's
dequantize, on blocks ggml wrote and on random block bytes; the reference
interpreter agrees; bad calls are clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.ops.quant import _views
from dsl.ops.quant_formats import FORMATS

from quant_data import KINDS, QTYPES, interpret, rows

gguf = pytest.importorskip("gguf")
pytest.importorskip("libggml")  # ggml itself (x86-64 Linux wheel)
import ggml_ref  # noqa: E402
GGUF_TYPES = {"q8_0": "Q8_0", "q4_k": "Q4_K", "q5_k": "Q5_K", "q6_k": "Q6_K"}


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def random_blocks(qtype: str, count: int, seed: int) -> np.ndarray:
    """Random block bytes with finite scales (every quant and packed-scale bit pattern occurs)."""
    fmt = FORMATS[qtype]
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (count, fmt.nbytes), dtype=np.uint8)
    scales = rng.standard_normal((count, 2)).astype(np.float16)
    if qtype == "q8_k":
        blocks[:, 0:4] = rng.standard_normal((count, 1)).astype(np.float32).view(np.uint8)
    elif qtype == "q6_k":
        blocks[:, 208:210] = scales[:, :1].view(np.uint8)
    else:
        blocks[:, 0:4 if qtype != "q8_0" else 2] = scales[:, : 2 if qtype != "q8_0" else 1].view(np.uint8)
    return blocks


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_dequantize_matches_ggml(qtype, kind):
    x = rows(kind, 3, 512, seed=len(kind))
    blocks = ggml_ref.quantize(x, qtype)
    ours = dsl.ops.dequantize(blocks, qtype, x.shape)
    assert ours.dtype == np.float32 and ours.shape == x.shape
    np.testing.assert_array_equal(bits(ours), bits(ggml_ref.dequantize(blocks, qtype, x.shape)))


@pytest.mark.parametrize("qtype", QTYPES)
def test_dequantize_random_bytes(qtype):
    fmt = FORMATS[qtype]
    blocks = random_blocks(qtype, 40, seed=fmt.nbytes)
    shape = (5, 8 * fmt.block)
    ours = dsl.ops.dequantize(blocks.reshape(5, -1), qtype, shape)
    theirs = ggml_ref.dequantize(blocks, qtype, shape)
    np.testing.assert_array_equal(bits(ours), bits(theirs))
    if qtype in GGUF_TYPES:
        qt = getattr(gguf.GGMLQuantizationType, GGUF_TYPES[qtype])
        ref = gguf.quants.dequantize(blocks.reshape(5, -1), qt)
        np.testing.assert_array_equal(bits(ours), bits(ref))


@pytest.mark.parametrize("qtype", QTYPES)
def test_interpreter_agrees(qtype):
    fmt = FORMATS[qtype]
    blocks = random_blocks(qtype, 2, seed=7)
    compiled = dsl.ops.dequantize(blocks, qtype, (2 * fmt.block,)).reshape(2, fmt.block)
    interpreted = np.empty((2, fmt.block), np.float32)
    interpret("quant_dequant", f"dequantize_{qtype}", *_views(blocks, qtype), interpreted)
    np.testing.assert_array_equal(bits(interpreted), bits(compiled))


def test_into_out():
    x = rows("gaussian", 2, 512)
    blocks = ggml_ref.quantize(x, "q5_k")
    out = np.full(x.shape, np.nan, np.float32)
    assert dsl.ops.dequantize(blocks, "q5_k", x.shape, out=out) is out
    np.testing.assert_array_equal(bits(out), bits(ggml_ref.dequantize(blocks, "q5_k", x.shape)))


@pytest.mark.parametrize("qtype", QTYPES)
def test_blocks_at_an_odd_address(qtype):
    """Blocks in a buffer one byte off: read through an aligned copy, never
    refused by a kernel's check of its typed views."""
    blocks = random_blocks(qtype, 3, seed=8)
    odd = np.frombuffer(bytearray(blocks.nbytes + 1), np.uint8)[1:]
    odd[:] = blocks.reshape(-1)
    shape = (3 * FORMATS[qtype].block,)
    np.testing.assert_array_equal(bits(dsl.ops.dequantize(odd, qtype, shape)),
                                  bits(dsl.ops.dequantize(blocks, qtype, shape)))


def test_empty():
    assert dsl.ops.dequantize(np.zeros(0, np.uint8), "q4_k", (0, 256)).shape == (0, 256)


@pytest.mark.parametrize("call, error, words", [
    (lambda: dsl.ops.dequantize(np.zeros(144, np.uint8), "q4_k", (200,)), ValueError, "whole number"),
    (lambda: dsl.ops.dequantize(np.zeros(143, np.uint8), "q4_k", (256,)), ValueError, "takes 144"),
    (lambda: dsl.ops.dequantize(np.zeros(144, np.int8), "q4_k", (256,)), TypeError, "uint8"),
    (lambda: dsl.ops.dequantize(np.zeros(144, np.uint8), "q3_k", (256,)), ValueError, "unknown quantized type"),
    (lambda: dsl.ops.dequantize([0] * 144, "q4_k", (256,)), TypeError, "numpy"),
    (lambda: dsl.ops.dequantize(np.zeros(144, np.uint8), "q4_k", (256,), out=np.empty(256, np.float64)),
     ValueError, "out must be"),
    (lambda: dsl.ops.dequantize(np.zeros(144, np.uint8), "q4_k", (256.0,)), TypeError, "tuple of ints"),
    (lambda: _overlapping_out(), ValueError, "must not overlap"),
])
def test_bad_calls(call, error, words):
    with pytest.raises(error, match=words) as info:
        call()
    assert "dequantize" in str(info.value)


def _overlapping_out():
    buf = np.zeros(2048, np.uint8)
    return dsl.ops.dequantize(buf[:144], "q4_k", (256,), out=buf[:1024].view(np.float32))
