"""dsl.ops.quantize: the bytes of ggml's reference quantizers (quantize_row_*_ref,
no importance matrix) for every type on many kinds of data; llama.cpp's own
error bound; the reference interpreter agrees with the compiled kernels; bad
calls are clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.ops.quant_formats import FORMATS
from dsl.ops.quant_lanes import K_LANES, LANES, to_lanes
from dsl.ops.library import stdlib_library

from quant_data import KINDS, QTYPES, interpret, rows

pytest.importorskip("libggml")  # ggml itself (x86-64 Linux wheel)
import ggml_ref  # noqa: E402


def assert_same_blocks(ours: np.ndarray, theirs: np.ndarray, qtype: str) -> None:
    nbytes = FORMATS[qtype].nbytes
    assert ours.dtype == np.uint8 and ours.shape == theirs.shape
    differ = np.nonzero((ours != theirs).reshape(-1, nbytes).any(axis=1))[0]
    assert differ.size == 0, f"{differ.size} {qtype} blocks differ from ggml's, the first is block {differ[0]}"


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_bytes_equal_ggml(qtype, kind):
    # 5 rows of 1024: 20 k-quant blocks (one group of 16 lanes and a partial one), 160 q8_0 blocks
    x = rows(kind, 5, 1024, seed=len(kind) + 3)
    assert_same_blocks(dsl.ops.quantize(x, qtype), ggml_ref.quantize(x, qtype), qtype)


@pytest.mark.parametrize("qtype", QTYPES)
def test_bytes_equal_ggml_on_edges(qtype):
    rng = np.random.default_rng(11)
    block = FORMATS[qtype].block
    cases = [
        np.arange(-127, 129, dtype=np.float32)[: block] + 0.5,  # halves (roundf away from zero for q8_0)
        np.full(block, -3.0, np.float32),  # one negative value: max == min
        rng.standard_normal(block).astype(np.float32) * 1e-16,  # below ggml's GROUP_MAX_EPS scale
        rng.standard_normal(block).astype(np.float32) * 1e-38,  # near the smallest normal floats
        np.where(rng.random(block) < 0.95, 0.0, 1.0).astype(np.float32),  # sparse
        np.linspace(-1, 1, block, dtype=np.float32) ** 3,
    ]
    x = np.stack(cases)
    assert_same_blocks(dsl.ops.quantize(x, qtype), ggml_ref.quantize(x, qtype), qtype)


@pytest.mark.parametrize("qtype", QTYPES)
def test_one_block_and_views(qtype):
    block = FORMATS[qtype].block
    x = rows("gaussian", 2 * block, block, seed=5)
    assert_same_blocks(dsl.ops.quantize(x[:1], qtype), ggml_ref.quantize(x[:1], qtype), qtype)
    view = x.T  # not contiguous: quantize reads it as the array it is
    assert_same_blocks(dsl.ops.quantize(view, qtype), ggml_ref.quantize(np.ascontiguousarray(view), qtype), qtype)


@pytest.mark.parametrize("qtype", ("q4_k", "q5_k", "q6_k"))
def test_bytes_equal_ggml_across_chunks(qtype, monkeypatch):
    from dsl.ops import quant

    monkeypatch.setattr(quant, "_CHUNK_BLOCKS", 32)  # 74 blocks: chunks of 32, 32 and a padded group of 10
    x = rows("mixed", 37, 512, seed=4)
    assert_same_blocks(dsl.ops.quantize(x, qtype), ggml_ref.quantize(x, qtype), qtype)


@pytest.mark.parametrize("qtype", QTYPES)
def test_llama_cpp_total_error_bound(qtype):
    # llama.cpp's test-quantize-fns: 0.1 + 2 cos(i), n = 4096, sqrt(sum d^2) / n < 0.002
    n = 4096
    x = (0.1 + 2 * np.cos(np.arange(n, dtype=np.float64))).astype(np.float32)
    y = dsl.ops.dequantize(dsl.ops.quantize(x, qtype), qtype, x.shape)
    assert np.sqrt(np.sum((y.astype(np.float64) - x) ** 2)) / n < 0.002


@pytest.mark.parametrize("qtype", ("q8_0", "q8_k"))
def test_bytes_equal_ggml_with_nan_and_inf(qtype):
    # C's comparisons with a NaN depend on the order: q8_0's amax restarts after one
    x = rows("gaussian", 4, 512, seed=3)
    x[0, 3] = np.nan
    x[1, 31] = np.nan  # the last value of a q8_0 block
    x[1, 300] = np.nan
    x[2, 40] = np.inf
    x[3, 100] = -np.inf
    assert_same_blocks(dsl.ops.quantize(x, qtype), ggml_ref.quantize(x, qtype), qtype)


@pytest.mark.parametrize("qtype", ("q8_0", "q8_k"))
def test_interpreter_agrees_q8(qtype):
    from dsl.ops.quant_q8 import quantize_blocks

    x = rows("heavy", 3, 512, seed=2).reshape(-1, FORMATS[qtype].block)  # 48 q8_0 blocks: 3 groups
    x[0, 5] = np.nan
    x[-1, 31] = np.nan  # the last value of the last q8_0 block
    compiled = quantize_blocks(x, qtype, "quantize")
    out = np.zeros_like(compiled)
    if qtype == "q8_k":
        interpret("quant_q8", "quantize_q8_k", x[:, None], out.view(np.int8)[:, None], out.view(np.float32)[:, None],
                  out.view(np.int16)[:, None])
    else:
        groups = x.shape[0] // LANES
        interpret("quant_q8", "quantize_q8_0", x.reshape(groups, LANES, 32),
                  out.view(np.int8).reshape(groups, LANES, 34), out.view(np.float16).reshape(groups, LANES, 17))
    np.testing.assert_array_equal(out, compiled)


def test_empty():
    assert dsl.ops.quantize(np.zeros((0, 256), np.float32), "q6_k").shape == (0, 210)


@pytest.mark.parametrize("call, error, words", [
    (lambda: dsl.ops.quantize(np.zeros((2, 300), np.float32), "q4_k"), ValueError, "whole number of q4_k blocks"),
    (lambda: dsl.ops.quantize(np.zeros(48, np.float32), "q8_0"), ValueError, "32 values each"),
    (lambda: dsl.ops.quantize(np.zeros(256, np.float64), "q4_k"), TypeError, "float32"),
    (lambda: dsl.ops.quantize([0.0] * 256, "q4_k"), TypeError, "numpy"),
    (lambda: dsl.ops.quantize(np.zeros(256, np.float32), "q4_0"), ValueError, "unknown quantized type"),
    (lambda: dsl.ops.quantize(np.zeros(256, np.float32), 4), TypeError, "qtype"),
])
def test_bad_calls(call, error, words):
    with pytest.raises(error, match=words) as info:
        call()
    assert "quantize" in str(info.value)


def _both(module: str, kernel: str, inputs: list, outputs: list) -> list:
    """Run one stage compiled and interpreted on copies of `outputs`; return the compiled outputs."""
    compiled = [o.copy() for o in outputs]
    interpreted = [o.copy() for o in outputs]
    getattr(stdlib_library(module), kernel)(*inputs, *compiled)
    interpret(module, kernel, *inputs, *interpreted)
    for a, b in zip(compiled, interpreted):
        np.testing.assert_array_equal(a, b, err_msg=f"{module}.{kernel}")
    return compiled


@pytest.mark.parametrize("nmax, rmin, nstep, pack", [(15, -1.0, 20, "pack_q4_k"), (31, -0.5, 15, "pack_q5_k")])
def test_interpreter_agrees_k_stages(nmax, rmin, nstep, pack):
    x = rows("mixed", K_LANES, 256, seed=8)
    xl = to_lanes(x, K_LANES)
    levels, scale, the_min = _both("quant_k", "qkx2_search", [xl, nmax, rmin, nstep],
                                   [np.zeros((1, 256, K_LANES), np.uint8), np.zeros((1, 8, K_LANES), np.float32),
                                    np.zeros((1, 8, K_LANES), np.float32)])
    levels, _, _ = _both("quant_k", "final_levels", [xl, nmax, scale, the_min],
                         [levels, np.zeros((1, 2, K_LANES), np.float16), np.zeros((1, 12, K_LANES), np.uint8)])
    nbytes = 144 if nmax == 15 else 176
    _both("quant_k", pack, [levels], [np.zeros((1, K_LANES, nbytes), np.uint8)])


def test_interpreter_agrees_q6_k():
    xl = to_lanes(rows("heavy", LANES, 256, seed=9))
    levels, scale = _both("quant_q6", "qx_search", [xl],
                          [np.zeros((1, 256, LANES), np.uint8), np.zeros((1, 16, LANES), np.float32)])
    _both("quant_q6", "pack_q6_k", [xl, scale],
          [levels, np.zeros((1, 1, LANES), np.float16), np.zeros((1, LANES, 210), np.uint8)])
