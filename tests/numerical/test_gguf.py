"""dsl.gguf.load: a GGUF file written by gguf.GGUFWriter reads back as the same
tensors (memory-mapped), usable by the quantized ops; malformed files are
clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import dsl

from quant_data import rows

gguf = pytest.importorskip("gguf")

GGUF_TYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "q4_k": gguf.GGMLQuantizationType.Q4_K,
              "q5_k": gguf.GGMLQuantizationType.Q5_K, "q6_k": gguf.GGMLQuantizationType.Q6_K}


def write(path, tensors: dict[str, tuple[np.ndarray, str | None]]) -> None:
    writer = gguf.GGUFWriter(str(path), "test")
    for name, (data, qtype) in tensors.items():
        if qtype is None:
            writer.add_tensor(name, data)
        else:
            writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=GGUF_TYPES[qtype])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture
def model(tmp_path):
    w = rows("gaussian", 8, 512, seed=1)
    tensors = {f"w.{t}": (dsl.ops.quantize(w, t), t) for t in GGUF_TYPES}
    tensors["norm"] = (w[0], None)
    path = tmp_path / "m.gguf"
    write(path, tensors)
    return path, w, tensors


def test_round_trip(model):
    path, w, tensors = model
    loaded = dsl.gguf.load(path)
    assert list(loaded) == list(tensors)
    x = rows("uniform", 1, 512, seed=2)[0]
    for qtype in GGUF_TYPES:
        t = loaded[f"w.{qtype}"]
        assert t.qtype == qtype and t.shape == w.shape and t.quantized
        np.testing.assert_array_equal(t.data, tensors[f"w.{qtype}"][0])
        assert isinstance(t.data, np.memmap) and not t.data.flags.writeable  # the file mapping, no copy
        np.testing.assert_array_equal(t.dequantize(), dsl.ops.dequantize(tensors[f"w.{qtype}"][0], qtype, w.shape))
        np.testing.assert_array_equal(dsl.ops.qmatvec(t.data, x, t.qtype, t.shape),
                                      dsl.ops.qmatvec(tensors[f"w.{qtype}"][0], x, qtype, w.shape))
    norm = loaded["norm"]
    assert norm.qtype == "f32" and norm.shape == (512,) and not norm.quantized
    np.testing.assert_array_equal(norm.dequantize(), w[0])


@pytest.mark.parametrize("keep", [0.9, 0.5, 0.1, 20])
def test_truncated_file(model, keep):
    path, _, _ = model
    data = path.read_bytes()
    cut = path.with_name("cut.gguf")
    cut.write_bytes(data[: keep if isinstance(keep, int) else int(len(data) * keep)])
    with pytest.raises(ValueError, match="not a readable GGUF file") as info:
        dsl.gguf.load(cut)
    assert "cut.gguf" in str(info.value)


@pytest.mark.parametrize("tensor, row, words", [
    ("w.q8_0", 500, "not a multiple of Q8_0 block size"),  # rows of 500 q8_0 values
    ("w.q6_k", 1024, "cannot reshape"),  # twice the data the file holds for it
    ("w.q4_k", 768, "'w.q5_k' starts at byte"),  # would read into the next tensor's bytes
    ("w.q4_k", 256, "'w.q5_k' starts at byte"),  # would leave bytes that belong to no tensor
])
def test_bad_tensor_shape(model, tensor, row, words):
    path, _, _ = model
    data = bytearray(path.read_bytes())
    name = tensor.encode()
    at = data.index(name) + len(name) + 4  # after the name: u32 n_dims, then u64 dims (ne[0] first)
    assert int.from_bytes(data[at: at + 8], "little") == 512
    data[at: at + 8] = row.to_bytes(8, "little")
    bad = path.with_name("bad.gguf")
    bad.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=words) as info:
        dsl.gguf.load(bad)
    assert "bad.gguf" in str(info.value)


def _edit_tensor_info(path, tensor: str, field: str, value: int):
    """A copy of the file with one field of a 2-D tensor's entry replaced:
    after its name come u32 n_dims, u64 ne[0], u64 ne[1], u32 type, u64 offset."""
    data = bytearray(path.read_bytes())
    name = tensor.encode()
    at, size = {"type": (20, 4), "offset": (24, 8)}[field]
    at += data.index(name) + len(name)
    data[at: at + size] = value.to_bytes(size, "little")
    bad = path.with_name("bad.gguf")
    bad.write_bytes(bytes(data))
    return bad


@pytest.mark.parametrize("field, value", [("offset", 1), ("offset", 64), ("type", int(gguf.GGMLQuantizationType.Q5_K))])
def test_tensor_data_where_the_layout_puts_it(model, field, value):
    """A moved offset, or a type whose blocks are another size, puts some
    tensor's data where the file's layout does not: a clear error, never a
    tensor that reads another one's bytes or starts off its alignment."""
    path, _, _ = model
    bad = _edit_tensor_info(path, "w.q4_k", field, value)
    with pytest.raises(ValueError, match="starts at byte .* expected") as info:
        dsl.gguf.load(bad)
    assert "bad.gguf" in str(info.value)
