"""dsl.ops.conv2d and conv_transpose2d against torch on random configurations
(sizes 1-40, kernels 1-7, stride 1-3, padding 0-3 and "same", dilation 1-3,
groups 1, 2 and depthwise, batch 1-4, both layouts, f32 and f64), and the
errors for bad arguments, raised before any native code runs.

A configuration torch refuses must be refused with a ValueError too. One
library (stdlib/conv.tk) serves every shape, so the cases are cheap."""

import numpy as np
import pytest

import dsl

torch = pytest.importorskip("torch")
F = torch.nn.functional
TOLERANCE = {np.float32: 1e-4, np.float64: 1e-10}


def random_config(seed: int, transposed: bool) -> dict:
    rng = np.random.default_rng(seed)
    groups_kind = rng.choice(["one", "two", "channels"])
    per_group = int(rng.integers(1, 5))
    groups = {"one": 1, "two": 2, "channels": int(rng.integers(1, 9))}[groups_kind]
    c_in = groups * (1 if groups_kind == "channels" else per_group)
    c_out = groups * int(rng.integers(1, 4))
    kernel = tuple(int(k) for k in rng.integers(1, 8, 2))
    size = tuple(int(s) for s in rng.integers(1, 41, 2))
    config = {
        "x": (int(rng.integers(1, 5)), c_in, *size),
        "w": (c_in, c_out // groups, *kernel) if transposed else (c_out, c_in // groups, *kernel),
        "bias": bool(rng.integers(0, 2)),
        "stride": tuple(int(s) for s in rng.integers(1, 4, 2)),
        "dilation": tuple(int(d) for d in rng.integers(1, 4, 2)),
        "groups": groups,
        "padding": tuple(int(p) for p in rng.integers(0, 4, 2)),
    }
    if transposed:
        config["output_padding"] = tuple(int(rng.integers(0, max(s, d))) for s, d in
                                         zip(config["stride"], config["dilation"]))
    elif rng.random() < 0.2:
        config["padding"] = "same"
        config["stride"] = 1
    return config


def reference_case(config: dict, dtype, transposed: bool, seed: int):
    """Random NCHW operands for `config`, its options, and torch's result (None where torch refuses)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(config["x"]).astype(dtype)
    w = rng.standard_normal(config["w"]).astype(dtype)
    c_out = config["w"][1] * config["groups"] if transposed else config["w"][0]
    b = rng.standard_normal(c_out).astype(dtype) if config["bias"] else None
    options = {k: v for k, v in config.items() if k not in ("x", "w", "bias")}
    reference = F.conv_transpose2d if transposed else F.conv2d
    try:
        want = reference(torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                         **options).numpy()
    except RuntimeError:
        want = None
    return x, w, b, options, want


def run_both(config: dict, dtype, layout: str, transposed: bool, seed: int):
    x, w, b, options, want = reference_case(config, dtype, transposed, seed)
    op = dsl.ops.conv_transpose2d if transposed else dsl.ops.conv2d
    if layout == "NHWC":
        x, w = x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)
    if want is None:
        with pytest.raises(ValueError):
            op(x, w, b, layout=layout, **options)
        return None, None
    got = op(x, w, b, layout=layout, **options)
    return (got.transpose(0, 3, 1, 2) if layout == "NHWC" else got), want


@pytest.mark.filterwarnings("ignore:Using padding=.same.")
@pytest.mark.parametrize("transposed", [False, True], ids=["conv2d", "conv_transpose2d"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_random_configurations_match_torch(transposed, dtype, layout):
    checked = 0
    for seed in range(30):
        config = random_config(seed, transposed)
        got, want = run_both(config, dtype, layout, transposed, seed)
        if want is None:
            continue
        checked += 1
        assert got.shape == want.shape, config
        assert got.dtype == dtype
        error = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30) if want.size else 0.0
        assert error <= TOLERANCE[dtype], (config, error)
    assert checked >= 15


def test_seed_and_depthwise_shapes():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 12, 12, 8)).astype(np.float32)  # the seeds' NHWC / KKIO convention
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)
    want = F.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(w).permute(3, 2, 0, 1)).numpy()
    got = dsl.ops.conv2d(x, w, layout="NHWC")
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), want, rtol=1e-4, atol=1e-4)
    xd = rng.standard_normal((2, 16, 9, 9)).astype(np.float32)
    wd = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    want = F.conv2d(torch.from_numpy(xd), torch.from_numpy(wd), stride=2, padding=1, groups=16).numpy()
    np.testing.assert_allclose(dsl.ops.conv2d(xd, wd, stride=2, padding=1, groups=16), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("width", [3, 8, 11, 16, 29])
@pytest.mark.parametrize("taps, stride, dilation", [((3, 3), 1, 1), ((1, 3), 1, 1), ((5, 3), (2, 1), (3, 1))])
def test_depthwise_three_taps_wide(dtype, width, taps, stride, dilation):
    """Three taps along the row with stride 1 take eight pixels at a time,
    then the row's last pixels one at a time."""
    rng = np.random.default_rng(width)
    x = rng.standard_normal((2, 7, 15, width + 2)).astype(dtype)
    w = rng.standard_normal((7, 1, *taps)).astype(dtype)
    bias = rng.standard_normal(7).astype(dtype)
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias), stride=stride,
                    dilation=dilation, padding=(1, 0), groups=7).numpy()
    got = dsl.ops.conv2d(x, w, bias, stride=stride, dilation=dilation, padding=(1, 0), groups=7)
    np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


def test_unbatched_input_and_mixed_dtypes():
    """Unbatched input works; a mix of float32 and float64 is refused, as
    torch refuses it (no silent promotion)."""
    x = np.ones((2, 5, 5), np.float64)
    w = np.ones((3, 2, 3, 3), np.float64)
    y = dsl.ops.conv2d(x, w, padding=1)
    assert y.shape == (3, 5, 5) and y.dtype == np.float64 and y[0, 2, 2] == 18.0
    with pytest.raises(TypeError, match=r"Input type \(float32\) and weight type \(float64\) should be the same"):
        dsl.ops.conv2d(x.astype(np.float32), w)
    with pytest.raises(TypeError, match=r"Input type \(float32\) and bias type \(float64\) should be the same"):
        dsl.ops.conv_transpose2d(x.astype(np.float32)[:, None], np.ones((2, 3, 3, 3), np.float32), np.ones(3))


def test_input_in_the_other_byte_order():
    """Big-endian float32 is float32: not refused as a mix of dtypes."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 4, 8, 8)).astype(np.float32), rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    want = dsl.ops.conv2d(x, w, padding=1)
    np.testing.assert_allclose(dsl.ops.conv2d(x.astype(">f4"), w, padding=1), want, rtol=1e-6, atol=1e-6)


BAD = [
    (dict(x=(1, 4, 8, 8), w=(6, 3, 3, 3)), "expected input[1, 4, 8, 8] to have 3 channels, but got 4"),
    (dict(x=(1, 4, 8, 8), w=(4, 2, 3, 3), groups=3), "expected weight to be divisible by 3 at dimension 0"),
    (dict(x=(1, 4, 2, 8), w=(6, 4, 3, 3)), "Kernel size can't be greater than actual input size"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3)), "weight should have 4 dimensions"),
    (dict(x=(4, 8, 8, 1, 1), w=(6, 4, 3, 3)), "Expected 3D (unbatched) or 4D (batched) input"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3, 3), stride=0), "non-positive stride"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3, 3), padding=-1), "negative padding"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3, 3), dilation=0), "dilation should be greater than zero"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3, 3), padding="same", stride=2), "not supported for strided"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3, 3), padding="full"), "Invalid padding string 'full'"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3, 3), layout="NWHC"), "layout must be one of"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3, 3), bias=(5,)), "expected bias to be 1-dimensional with 6 elements"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 0, 3)), "no kernel taps or no output channels"),
    (dict(x=(1, 4, 8, 8), w=(0, 4, 3, 3)), "no kernel taps or no output channels"),
    (dict(x=(1, 4, 0, 8), w=(6, 4, 3, 3), padding=2), "Only zero batch or zero channel inputs are supported"),
    (dict(x=(1, 4, 8, 8), w=(6, 4, 3, 3), padding="same", stride=0), "non-positive stride"),
    (dict(x=(1, 8, 8, 4), w=(3, 3, 4, 6), groups=4, layout="NHWC"),
     "expected weight to be divisible by 4 at dimension 3, but got weight of size [3, 3, 4, 6]"),
]


@pytest.mark.parametrize("case, message", BAD, ids=[m[:30] for _, m in BAD])
def test_bad_arguments_raise_before_native_code(case, message, monkeypatch):
    import dsl.ops.conv as conv

    monkeypatch.setattr(conv, "_kernels", lambda: pytest.fail("native code ran"))
    case = dict(case)
    x, w = np.zeros(case.pop("x"), np.float32), np.zeros(case.pop("w"), np.float32)
    bias = np.zeros(case.pop("bias"), np.float32) if "bias" in case else None
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        dsl.ops.conv2d(x, w, bias, **case)


def test_transposed_bad_arguments():
    x, w = np.zeros((1, 4, 5, 5), np.float32), np.zeros((4, 2, 3, 3), np.float32)
    with pytest.raises(ValueError, match="output padding must be smaller than either stride or dilation"):
        dsl.ops.conv_transpose2d(x, w, stride=2, output_padding=2)
    with pytest.raises(ValueError, match="expected input.* to have 4 channels, but got 3"):
        dsl.ops.conv_transpose2d(x[:, :3], w)
    with pytest.raises(ValueError, match="Output size is too small"):
        dsl.ops.conv_transpose2d(x[:, :, :1, :1], w[:, :, :1, :1], padding=1)
    with pytest.raises(TypeError, match="unsupported dtype int32"):
        dsl.ops.conv2d(x.astype(np.int32), w)
    with pytest.raises(ValueError, match="no kernel taps or no output channels"):
        dsl.ops.conv_transpose2d(x, np.zeros((4, 0, 3, 3), np.float32))
