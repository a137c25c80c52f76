"""Padding without a padded copy of the input (`dsl.ops.conv_border`): the
interior's bounds, the taps each border output reads, convolutions whose
border rows, columns and corners all exist, and the interior computed as one
long row per image, against torch."""

import numpy as np
import pytest

import dsl
from dsl.ops import conv, conv_border
from dsl.ops.conv_border import _interior, _tap_groups

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.fixture(autouse=True)
def no_remembered_plans(monkeypatch):
    """The tests change module constants and count calls: no plan of another test's may stand in."""
    monkeypatch.setattr(conv, "_plans", {})


@pytest.mark.parametrize("seed", range(200))
def test_interior_is_exactly_the_outputs_whose_windows_fit(seed):
    rng = np.random.default_rng(seed)
    size, pad, stride, dilation, kernel = (int(v) for v in rng.integers(1, [20, 5, 4, 4, 6]))
    extent = dilation * (kernel - 1) + 1
    outputs = (size + 2 * pad - extent) // stride + 1
    if outputs <= 0:
        return
    lo, hi = _interior(size, pad, extent, stride, outputs)
    inside = [o for o in range(outputs) if o * stride - pad >= 0 and o * stride - pad + extent <= size]
    assert list(range(lo, hi)) == inside


@pytest.mark.parametrize("seed", range(200))
def test_tap_groups_cover_each_output_once_with_exactly_its_taps_inside(seed):
    rng = np.random.default_rng(seed)
    size, pad, stride, dilation, kernel = (int(v) for v in rng.integers(1, [20, 5, 4, 4, 6]))
    outputs = (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    if outputs <= 0:
        return
    groups = _tap_groups(size, pad, stride, dilation, kernel, outputs)
    assert [o for o0, o1, _, _ in groups for o in range(o0, o1)] == list(range(outputs))
    for o0, o1, t0, t1 in groups:
        for o in range(o0, o1):
            inside = [t for t in range(kernel) if 0 <= o * stride - pad + t * dilation < size]
            assert list(range(t0, t1)) == inside
    assert all(a[2:] != b[2:] for a, b in zip(groups, groups[1:]))  # neighbours with equal taps are merged


@pytest.mark.parametrize("groups, c_in, c_out", [(1, 5, 7), (2, 4, 6), (6, 6, 6)])
@pytest.mark.parametrize("stride, dilation, padding", [((1, 1), (1, 1), (1, 1)), ((2, 1), (1, 2), (3, 2)),
                                                        ((1, 3), (2, 1), "same")])
def test_every_band(monkeypatch, groups, c_in, c_out, stride, dilation, padding):
    monkeypatch.setattr(conv_border, "SMALL_INPUT_BYTES", 0)  # the cells, not the padded copy of a small input
    if padding == "same" and stride != (1, 1):
        stride = (1, 1)
    rng = np.random.default_rng(groups + c_in)
    x = rng.standard_normal((2, 13, 17, c_in)).astype(np.float32)
    w = rng.standard_normal((c_out, c_in // groups, 3, 5)).astype(np.float32)
    bias = rng.standard_normal(c_out).astype(np.float32)
    want = F.conv2d(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), torch.from_numpy(w), torch.from_numpy(bias),
                    stride=stride, padding=padding, dilation=dilation, groups=groups).numpy().transpose(0, 2, 3, 1)
    got = dsl.ops.conv2d(x, w.transpose(2, 3, 1, 0).copy(), bias, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, layout="NHWC")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # A strided view of the input (its channels still contiguous) is read in place too.
    wide = np.zeros((2, 13, 34, c_in), np.float32)
    wide[:, :, ::2] = x
    got = dsl.ops.conv2d(wide[:, :, ::2], w.transpose(2, 3, 1, 0).copy(), bias, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, layout="NHWC")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size, kernel, dilation, groups", [((9, 13), (3, 3), (1, 1), 1), ((12, 7), (5, 3), (2, 1), 1),
                                                            ((10, 20), (3, 5), (1, 2), 2), ((16, 16), (3, 3), (1, 1), 6)])
def test_same_padding_interior_as_one_row_per_image(monkeypatch, dtype, size, kernel, dilation, groups):
    """Stride 1 and "same" padding keep the width, so the interior wraps from
    row to row; the border cells, computed afterwards, overwrite the wrapped
    pixels (a depthwise layer keeps its rows: they are its threads' work)."""
    calls = []
    original = conv._convolve

    def record(*args, **kwargs):
        calls.append(kwargs.get("wrap", args[10] if len(args) > 10 else False))
        return original(*args, **kwargs)

    monkeypatch.setattr(conv, "_convolve", record)
    monkeypatch.setattr(conv_border, "SMALL_INPUT_BYTES", 0)
    rng = np.random.default_rng(sum(size))
    x = rng.standard_normal((3, *size, 6)).astype(dtype)
    w = rng.standard_normal((6, 6 // groups, *kernel)).astype(dtype)
    bias = rng.standard_normal(6).astype(dtype)
    want = F.conv2d(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), torch.from_numpy(w), torch.from_numpy(bias),
                    padding="same", dilation=dilation, groups=groups).numpy().transpose(0, 2, 3, 1)
    got = dsl.ops.conv2d(x, w.transpose(2, 3, 1, 0).copy(), bias, padding="same", dilation=dilation, groups=groups,
                         layout="NHWC")
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-4)
    assert calls[0] is True and not any(calls[1:])


def test_a_small_input_is_copied_padded_in_one_call(monkeypatch):
    """Up to SMALL_INPUT_BYTES the input is copied into a padded buffer and
    convolved in one call (nine cells were nine calls' Python); above, the
    cells run where the input is."""
    calls = []
    original = conv._convolve

    def record(*args, **kwargs):
        calls.append(args[1].shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(conv, "_convolve", record)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 13, 17, 4)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    want = F.conv2d(torch.from_numpy(x.transpose(0, 3, 1, 2).copy()), torch.from_numpy(w),
                    padding=1).numpy().transpose(0, 2, 3, 1)
    for limit, count in ((x.nbytes, 1), (x.nbytes - 1, 9)):
        calls.clear()
        conv._plans.clear()  # a new limit, the same arguments: not the plan of the first
        monkeypatch.setattr(conv_border, "SMALL_INPUT_BYTES", limit)
        got = dsl.ops.conv2d(x, w.transpose(2, 3, 1, 0).copy(), padding=1, layout="NHWC")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        assert len(calls) == count, calls
    assert calls[0] == x.shape  # the interior, read in place
