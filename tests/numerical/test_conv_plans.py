"""A convolution's steps recorded at its first call and replayed at the next
ones with the same arguments and operand layouts (`conv._planned`,
`call_plans.Trace`): the replay matches torch on new data, skips the
wrapper's Python, keeps none of the first call's arrays, and is not made for
what cannot be replayed."""

import gc
import weakref

import numpy as np
import pytest

import dsl
from dsl.ops import call_plans, conv, conv_border
from test_ops_conv import TOLERANCE, random_config, reference_case

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.fixture(autouse=True)
def fresh_plans(monkeypatch):
    monkeypatch.setattr(conv, "_plans", {})


def operands(config: dict, dtype, layout: str, transposed: bool, seed: int):
    """C-contiguous operands in `layout`, the options, and torch's result; None if torch refuses."""
    x, w, b, options, want = reference_case(config, dtype, transposed, seed)
    if want is None:
        return None
    if layout == "NHWC":
        x, w = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(w.transpose(2, 3, 1, 0))
        want = want.transpose(0, 2, 3, 1)
    return (x, w, b), options, want


@pytest.mark.filterwarnings("ignore:Using padding=.same.")
@pytest.mark.parametrize("transposed", [False, True], ids=["conv2d", "conv_transpose2d"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("small_input_bytes", [conv_border.SMALL_INPUT_BYTES, 0], ids=["copied", "cells"])
def test_a_replay_matches_torch_on_new_data_without_the_wrappers_python(monkeypatch, transposed, layout,
                                                                        small_input_bytes):
    monkeypatch.setattr(conv_border, "SMALL_INPUT_BYTES", small_input_bytes)
    op = dsl.ops.conv_transpose2d if transposed else dsl.ops.conv2d
    body = "_conv_transpose2d" if transposed else "_conv2d"
    traced = []
    original = getattr(conv, body)
    monkeypatch.setattr(conv, body, lambda *args: traced.append(1) or original(*args))
    replayed = 0
    for seed in range(24):
        config = random_config(seed, transposed)
        dtype = np.float64 if seed % 4 == 3 else np.float32
        for call in range(2):
            found = operands(config, dtype, layout, transposed, 1000 * call + seed)
            if found is None:
                break
            args, options, want = found
            traced.clear()
            got = op(*args, layout=layout, **options)
            assert len(traced) == (1 - call), (config, call)  # the second call replays
            error = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30) if want.size else 0.0
            assert got.shape == want.shape and error <= TOLERANCE[dtype], (config, call, error)
            replayed += call
    assert replayed >= 12


def test_depthwise_and_border_cells_replayed():
    """The ResNet-like shapes whose steps are many: nine cells of a padded
    3x3 (bias, no bias), and a depthwise layer's."""
    rng = np.random.default_rng(5)
    for groups, c_in, bias in ((1, 16, True), (1, 16, False), (16, 16, True), (16, 16, False)):
        w = rng.standard_normal((3, 3, c_in // groups, 16)).astype(np.float32)
        b = rng.standard_normal(16).astype(np.float32) if bias else None
        for _ in range(2):
            x = rng.standard_normal((2, 96, 96, c_in)).astype(np.float32)  # over SMALL_INPUT_BYTES: the cells
            want = F.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(w).permute(3, 2, 0, 1),
                            None if b is None else torch.from_numpy(b), padding=1, groups=groups)
            got = dsl.ops.conv2d(x, w, b, padding=1, groups=groups, layout="NHWC")
            np.testing.assert_allclose(got, want.permute(0, 2, 3, 1).numpy(), rtol=1e-4, atol=1e-4)
    assert len(conv._plans) == 4


def test_a_plan_keeps_none_of_the_first_calls_arrays():
    x = np.ones((1, 4, 40, 40), np.float32)
    w, b = np.ones((6, 4, 3, 3), np.float32), np.ones(6, np.float32)
    y = dsl.ops.conv2d(x, w, b, padding=1)
    refs = [weakref.ref(a) for a in (x, w, b, y)]
    del x, w, b, y
    gc.collect()
    assert len(conv._plans) == 1 and all(r() is None for r in refs)


def test_views_are_not_planned_lists_are():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 12, 12)).astype(np.float32)
    w = rng.standard_normal((5, 4, 3, 3)).astype(np.float32)
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1).numpy()
    nhwc = x.transpose(0, 2, 3, 1)  # a view, not C-contiguous: read in place, so no layout to replay
    got = dsl.ops.conv2d(nhwc, w.transpose(2, 3, 1, 0), padding=1, layout="NHWC")
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)
    assert conv._plans == {}
    np.testing.assert_allclose(dsl.ops.conv2d(x, w, padding=[1, 1]), want, rtol=1e-4, atol=1e-4)
    assert len(conv._plans) == 1


def test_arguments_equal_in_value_but_not_in_type_find_no_plan():
    """padding=1.0 == 1 and groups=True == 1, but the checks refuse them: a
    plan made for the ints must not answer for them."""
    x, w = np.ones((1, 2, 8, 8), np.float32), np.ones((3, 2, 3, 3), np.float32)
    dsl.ops.conv2d(x, w, padding=1, groups=1, stride=(1, 1))
    for bad in (dict(padding=1.0), dict(groups=True), dict(stride=(1.0, 1))):
        with pytest.raises(TypeError):
            dsl.ops.conv2d(x, w, **{"padding": 1, "groups": 1, "stride": (1, 1), **bad})


def test_a_trace_with_an_array_it_did_not_make_has_no_plan():
    class Library:
        def copy(self, src, dst):
            dst[...] = src

    x = np.arange(8.0)
    trace = call_plans.Trace(Library, (x,))
    y = trace.make(np.empty_like, x)
    trace.call("copy", x[::2], y[:4])
    assert trace.plan(y) is not None
    trace.call("copy", x.copy()[:4], y[4:])  # a temporary: a replay could not find it
    assert trace.plan(y) is None
    np.testing.assert_array_equal(y, [0, 2, 4, 6, 0, 1, 2, 3])
