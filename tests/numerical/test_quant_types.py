"""Quantized tensor types in kernels (`w: q4_k[N, K]`): element access is
dsl.ops.dequantize bit for bit (compiled and interpreted), the block-level
fields are the block bytes, a user's matvec matches numpy, and every way of
passing block bytes from Python is checked before native code runs."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
import quant_type_kernels as qk
from dsl.lowering.quant import FORMATS

RNG = np.random.default_rng(8)


def _weights(n, k, scale=3.0):
    w = (RNG.standard_normal((n, k)) * scale).astype(np.float32)
    w[0, :32] = 0.0  # an all-zero group: scale 0, and -0.0 products
    return w


DEQUANTIZE = """
def deq_{q}(w: {q}[N, K], y: f32[N, K]):
    for n in range(N):
        for k in range(K):
            y[n, k] = w[n, k]
"""


@pytest.fixture(scope="module")
def deq_library(tmp_path_factory):
    """One .so (dslc's path: compile_file, link_shared, dsl.load) with a kernel per format."""
    from dsl.backends.link import link_shared
    from dsl.pipeline import compile_file

    folder = tmp_path_factory.mktemp("quant_types")
    source = folder / "deq.tk"
    source.write_text("".join(DEQUANTIZE.format(q=q) for q in FORMATS))
    job = compile_file(source)
    return dsl.load(link_shared(job.obj, folder / "deq.so", job.target))


@pytest.mark.parametrize("qtype", list(FORMATS))
def test_elements_are_dequantize_bit_for_bit(deq_library, qtype):
    n, k = 5, 2 * FORMATS[qtype].block
    blocks = dsl.ops.quantize(_weights(n, k), qtype)
    want = dsl.ops.dequantize(blocks, qtype, (n, k))
    got = np.full((n, k), np.nan, np.float32)
    getattr(deq_library, f"deq_{qtype}")(blocks, got)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_interpreter_is_dequantize_bit_for_bit():
    blocks = dsl.ops.quantize(_weights(2, 256), "q6_k")
    got = np.full((2, 256), np.nan, np.float32)
    qk.deq_q6_k_interpreted(blocks, got)
    np.testing.assert_array_equal(got.view(np.uint32), dsl.ops.dequantize(blocks, "q6_k", (2, 256)).view(np.uint32))


def test_groups_give_the_values():
    """value = scale * q (q6_k) and scale * q - min (q5_k), group by group."""
    n, k = 3, 512
    for qtype, kernel, group in (("q6_k", qk.groups_q6_k, 16), ("q5_k", qk.groups_q5_k, 32)):
        blocks = dsl.ops.quantize(_weights(n, k), qtype)
        q = np.zeros((n, k // group, group), np.int32)
        scale = np.zeros((n, k // group), np.float32)
        extra = [np.zeros((n, k // group), np.float32)] if qtype == "q5_k" else []
        kernel(blocks, q, scale, *extra)
        value = scale[..., None] * q.astype(np.float32)
        if extra:
            value = value - extra[0][..., None]
        np.testing.assert_array_equal(value.reshape(n, k), dsl.ops.dequantize(blocks, qtype, (n, k)))


def test_raw_fields_are_the_block_bytes():
    blocks = dsl.ops.quantize(_weights(2, 512), "q4_k")
    d = np.zeros((2, 2), np.float32)
    qs = np.zeros((2, 2, 128), np.int32)
    qk.raw_q4_k(blocks, d, qs)
    raw = blocks.reshape(2, 2, 144)
    np.testing.assert_array_equal(d, raw[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32))
    np.testing.assert_array_equal(qs, raw[..., 16:])


@pytest.mark.parametrize("kernel,qtype", [(qk.matvec_q4_k, "q4_k"), (qk.matvec_loops_q8_0, "q8_0"),
                                          (qk.via_helper, "q8_0"), (qk.matvec_specialized_q6_k, "q6_k")])
def test_user_matvec_matches_numpy(kernel, qtype):
    n, k = 37, 1024
    blocks = dsl.ops.quantize(_weights(n, k), qtype)
    x = RNG.standard_normal(k).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    kernel(blocks, x, y)
    w = dsl.ops.dequantize(blocks, qtype, (n, k)).astype(np.float64)
    want = w @ x
    bound = k * np.finfo(np.float32).eps * (np.abs(w) @ np.abs(x))
    assert np.all(np.abs(y - want) <= bound)


def test_the_forms_of_block_bytes():
    """[N, bytes], [N, blocks, bytes], a 1-D buffer (sizes from x and y), a GGUF tensor."""
    from dsl.gguf import GGUFTensor

    n, k = 4, 512
    blocks = dsl.ops.quantize(_weights(n, k), "q8_0")
    x = RNG.standard_normal(k).astype(np.float32)
    want = np.zeros(n, np.float32)
    qk.matvec_loops_q8_0(blocks, x, want)
    forms = [blocks.reshape(n, -1, 34), blocks.reshape(-1), GGUFTensor("w", "q8_0", (n, k), blocks.reshape(-1))]
    for form in forms:
        y = np.zeros(n, np.float32)
        qk.matvec_loops_q8_0(form, x, y)
        np.testing.assert_array_equal(y, want)
    rows = np.zeros((2 * n, blocks.shape[1]), np.uint8)
    rows[::2] = blocks  # every other row: a row stride of two rows of blocks
    y = np.zeros(n, np.float32)
    qk.matvec_loops_q8_0(rows[::2], x, y)
    np.testing.assert_array_equal(y, want)


def test_bad_block_bytes_are_refused_before_native_code():
    blocks = dsl.ops.quantize(_weights(4, 512), "q8_0")
    x, y = np.zeros(512, np.float32), np.zeros(4, np.float32)
    kernel = qk.matvec_loops_q8_0
    with pytest.raises(ValueError, match=r"matvec_loops_q8_0\(\): parameter 'w': rows of 33 bytes"):
        kernel(blocks[:, :33], x, y)
    with pytest.raises(ValueError, match=r"parameter 'w': the last dim K = 300 is not a multiple of 32 \(q8_0 block\)"):
        kernel(np.zeros(4 * 300 // 32 * 34, np.uint8), np.zeros(300, np.float32), y)
    with pytest.raises(TypeError, match="parameter 'w' expects q8_0 blocks as a uint8 array, got an array of float32"):
        kernel(np.zeros((4, 34), np.float32), x, y)
    from dsl.gguf import GGUFTensor

    with pytest.raises(TypeError, match="expects a q8_0 tensor, got a q4_k one"):
        kernel(GGUFTensor("w", "q4_k", (4, 512), np.zeros(4 * 2 * 144, np.uint8)), x, y)
    with pytest.raises(ValueError, match="'x' axis 0 must equal K"):
        kernel(blocks, np.zeros(256, np.float32), y)
    with pytest.raises(ValueError, match="blocks of a row must be contiguous"):
        kernel(blocks.reshape(4, -1, 34)[:, ::-1], np.zeros(512, np.float32), y)


def test_out_of_bounds_element_is_a_check_not_a_read():
    blocks = dsl.ops.quantize(_weights(1, 256), "q4_k").reshape(-1)
    y = np.zeros(1, np.float32)
    qk.first_value(blocks, 255, y)
    assert y[0] == dsl.ops.dequantize(blocks, "q4_k", (256,))[255]
    with pytest.raises(IndexError, match="first_value"):
        qk.first_value(blocks, 256, y)
    with pytest.raises(IndexError, match="first_value"):
        qk.first_value(blocks, -1, y)


def test_a_gguf_file_tensor_goes_straight_in(tmp_path):
    """dsl.gguf.load's tensors (read-only file mappings) are kernel arguments as they are."""
    gguf = pytest.importorskip("gguf")
    n, k = 6, 512
    blocks = dsl.ops.quantize(_weights(n, k), "q8_0")
    writer = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "test")
    writer.add_tensor("w", blocks, raw_shape=blocks.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    w = dsl.gguf.load(tmp_path / "m.gguf")["w"]
    x = RNG.standard_normal(k).astype(np.float32)
    got, want = np.zeros(n, np.float32), np.zeros(n, np.float32)
    qk.matvec_loops_q8_0(w, x, got)
    qk.matvec_loops_q8_0(blocks, x, want)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError, match="expects a q4_k tensor, got a q8_0 one"):
        qk.matvec_q4_k(w, x, got)
