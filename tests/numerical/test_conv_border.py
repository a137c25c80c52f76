"""Padding without a padded copy of the whole input (`dsl.ops.conv_border`):
the interior's bounds, and convolutions whose four border bands all exist,
against torch."""

import numpy as np
import pytest

import dsl
from dsl.ops.conv_border import _interior

torch = pytest.importorskip("torch")
F = torch.nn.functional


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


@pytest.mark.parametrize("groups, c_in, c_out", [(1, 5, 7), (2, 4, 6), (6, 6, 6)])
@pytest.mark.parametrize("stride, dilation, padding", [((1, 1), (1, 1), (1, 1)), ((2, 1), (1, 2), (3, 2)),
                                                        ((1, 3), (2, 1), "same")])
def test_every_band(groups, c_in, c_out, stride, dilation, padding):
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
