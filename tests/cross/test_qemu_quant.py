"""The fused quantized products of stdlib/quant_dot_arm.tk on AArch64, on real
quantized weights and activations, under qemu: with `sdot` (+dotprod) and with
the plain-arithmetic fallback (Armv8.0 without it), against dsl.ops.qmatmul on
the host."""

from __future__ import annotations

import numpy as np
import pytest
from build import AARCH64, ROOT, dslc_build
from harness import run_case
import toolchain

import dsl
from dsl.ops.quant_formats import FORMATS
from dsl.ops.quant_matmul import ACTIVATIONS, _weight_views

aarch64 = toolchain.aarch64  # the fixture the tests below take
TK = ROOT / "stdlib" / "quant_dot_arm.tk"


@pytest.mark.parametrize("cpu, features", [("neoverse-n1", "+neon,+dotprod"), ("cortex-a72", "+neon")])
def test_quant_dot_arm_under_qemu(cpu, features, aarch64, tmp_path):
    """(Which of the two builds has `sdot` in its loops: test_target_intrinsics.)"""
    kernels, message = dslc_build(TK, tmp_path, "qdot", *AARCH64, "--cpu", cpu, "--features", features)
    assert kernels is not None, message
    rng = np.random.default_rng(11)
    n, k, m = 5, 512, 3
    w = rng.standard_normal((n, k)).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    for qtype, act in ACTIVATIONS.items():
        blocks = k // FORMATS[qtype].block
        wq = dsl.ops.quantize(w, qtype)
        weights = _weight_views(wq.reshape(n, blocks, FORMATS[qtype].nbytes), qtype)
        if act == "q8_k":  # the kernel quantizes x itself, into the fields of q8_K
            x_args = [x.reshape(m, blocks, 256), np.zeros((m, blocks, 292), np.int8),
                      np.zeros((m, blocks, 73), np.float32), np.zeros((m, blocks, 146), np.int16)]
        else:
            xq = dsl.ops.quantize(x, act).reshape(m, blocks, FORMATS[act].nbytes)
            x_args = [xq.view(np.int8), xq.view(np.float16)]
        views = [np.ascontiguousarray(v) for v in (*weights, *x_args)]
        status, outputs, _ = run_case(aarch64, tmp_path, "qdot", kernels[f"qdot_{qtype}"],
                                      [*views, np.zeros((m, n), np.float32)])
        assert status == 0, qtype
        want = dsl.ops.qmatmul(x, wq, qtype, w.shape)
        np.testing.assert_allclose(outputs[-1], want, rtol=0, atol=1e-5 * np.abs(want).max(), err_msg=qtype)
        if act == "q8_k":  # and the activations are q8_K's bytes
            q8 = dsl.ops.quantize(x, "q8_k").reshape(m, blocks, 292)
            np.testing.assert_array_equal(outputs[0][:, :, 4:260], q8[:, :, 4:260].view(np.int8), err_msg=qtype)
