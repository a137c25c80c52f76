"""The LLVM back-end's output: IR flags, asm, targets, the JIT, shared
libraries and the C header."""


import ctypes
import subprocess

import llvmlite.binding as llvm
import numpy as np
import pytest

from dsl.backends.errors import BackendError
from dsl.backends.header import header_text
from dsl.backends.jit import JitLibrary
from dsl.backends.link import link_shared
from dsl.backends.llvm import build_module
from dsl.backends.optimize import emit_asm, emit_object, optimize, verify_llvm
from dsl.backends.target import host_target, make_target, target_machine
from dsl.lowering.ir import (Binary, Const, KernelOptions, Unary)
from dsl.lowering.types import (F32, F64, I32)

OPTS = [0, 3]
from backend_kernels import call, elementwise, rowsum_kernel, saxpy_kernel

# ------------------------------------------------------------------ IR, asm and targets


def checked_ir(kernels, target=None) -> str:
    text = str(build_module(kernels, target or host_target(), "{}", module_name="m"))
    llvm.parse_assembly(text).verify()
    return text


def test_float_flags_contract_only_by_default():
    text = checked_ir([saxpy_kernel()])
    assert "fmul contract float" in text and "fadd contract float" in text
    assert " fast " not in text and "reassoc" not in text
    assert "noalias" in text and "align 4" in text
    reassoc = checked_ir([saxpy_kernel(KernelOptions(reassociate=True, inplace=True))])
    assert "fadd contract reassoc float" in reassoc or "fadd reassoc contract float" in reassoc
    assert "noalias" not in reassoc


def test_contract_false_drops_the_contract_flag():
    # @options(contract=False): every float op rounds on its own, as C built without FMA does
    text = checked_ir([saxpy_kernel(KernelOptions(contract=False))])
    assert "fmul float" in text and "fadd float" in text and "contract" not in text


def test_divisor_guards_only_when_needed():
    t = I32
    by_var = elementwise("dv", [("a", t), ("b", t)], t, lambda a, b: Binary("//", a, b, t))
    by_const = elementwise("dc", [("a", t)], t, lambda a: Binary("//", a, Const(7, t), t))
    guard = "i32 1, i32"  # the divisor replaced by 1 when it is 0 or -1
    assert guard in checked_ir([by_var])
    const_text = checked_ir([by_const])
    assert guard not in const_text and "sdiv i32" in const_text and ", 7" in const_text


def test_asm_uses_small_code_model():
    kernel = elementwise("erfs", [("x", F32)], F32, lambda x: Unary("erf", x, F32))
    t = host_target()
    ref = verify_llvm(build_module([kernel], t, '{"k": 1}', module_name="m"))
    optimize(ref, t, 3)
    ref.verify()
    asm = emit_asm(ref, t, 3)
    assert "movabsq" not in asm and "_GLOBAL_OFFSET_TABLE_" not in asm
    assert "erff" in asm


def test_copy_loops_stay_loops():
    """LLVM would call the C library's memcpy for the row; the loop is ours."""
    kernel = elementwise("copy", [("x", F32)], F32, lambda x: x)
    t = host_target()
    text = str(build_module([kernel], t, "{}", module_name="m"))
    assert '"no-builtin-memcpy"' in text
    ref = verify_llvm(text)
    optimize(ref, t, 3)
    asm = emit_asm(ref, t, 3)
    assert "memcpy" not in asm and "memmove" not in asm


def test_vectorizes_with_fma_at_o3():
    t = host_target()
    if not t.has_fma or t.arch != "x86_64":
        pytest.skip("needs x86 FMA")
    ref = verify_llvm(build_module([saxpy_kernel()], t, "{}", module_name="m"))
    optimize(ref, t, 3)
    asm = emit_asm(ref, t, 3)
    assert "vfmadd" in asm and "ymm" in asm


def test_cross_compile_aarch64():
    t = make_target("aarch64-unknown-linux-gnu")
    assert (t.cpu, t.vector_bits, t.vector_registers, t.has_fma) == ("neoverse-n1", 128, 32, True)
    ref = verify_llvm(build_module([saxpy_kernel(), rowsum_kernel(F64)], t, "{}", module_name="m"))
    optimize(ref, t, 3)
    asm = emit_asm(ref, t, 3)
    assert "fmla" in asm and "v0" in asm
    assert emit_object(ref, t, 3)[:4] == b"\x7fELF"


def test_make_target_defaults():
    host = host_target()
    assert make_target() == host
    assert make_target(cpu="skylake-avx512").vector_bits == 512
    assert make_target("x86_64-unknown-linux-gnu", cpu="haswell").has_fma
    generic = make_target("x86_64-pc-linux-gnu")
    assert (generic.cpu, generic.vector_bits, generic.has_fma) == ("x86-64", 128, False)
    assert host.key() != generic.key() and host.key() == host_target().key()
    assert target_machine(host, 3) is target_machine(host, 3)


def test_packed_k_panels_by_core():
    """AVX-512's packed 6 x 64 f32 tile takes K panels of 256 on Intel's
    cores and of 512 on Zen 4, as measured (contract.py)."""
    x86 = "x86_64-unknown-linux-gnu"
    kc = {cpu: make_target(x86, cpu=cpu).machine.streamed_strip_kc
          for cpu in ("sapphirerapids", "rocketlake", "znver4", "znver3")}
    assert kc == {"sapphirerapids": 256, "rocketlake": 256, "znver4": 512, "znver3": 512}
    assert make_target("aarch64-linux-gnu").machine.streamed_strip_kc == 512


def test_verify_reports_llvm_message():
    with pytest.raises(BackendError, match="fadd"):
        verify_llvm("define i32 @f(i32 %a) {\n  %b = fadd i32 %a, %a\n  ret i32 %b\n}\n")


def test_reserved_and_duplicate_names():
    with pytest.raises(BackendError, match="reserved"):
        build_module([elementwise("tanhf", [("x", F32)], F32, lambda x: x)], host_target(), "{}",
                     module_name="m")
    k = elementwise("same", [("x", F32)], F32, lambda x: x)
    with pytest.raises(BackendError, match="twice"):
        build_module([k, k], host_target(), "{}", module_name="m")


def test_jit_from_module_and_metadata():
    t = host_target()
    kernel = saxpy_kernel()
    ref = verify_llvm(build_module([kernel], t, '{"kernels": ["saxpy"]}', module_name="m"))
    optimize(ref, t, 2)
    lib = JitLibrary.from_module(ref, t)
    meta = ctypes.CFUNCTYPE(ctypes.c_char_p)(lib.address("__dsl_metadata"))
    assert meta() == b'{"kernels": ["saxpy"]}'
    y = np.ones(3, np.float32)
    assert call(lib, kernel, {"a": 2.0, "x": np.arange(3, dtype=np.float32), "y": y}) == 0
    assert y.tolist() == [1.0, 3.0, 5.0]
    with pytest.raises(BackendError):
        lib.address("nope")


# ------------------------------------------------------------------ shared library and C header


def compiled_object(kernels, metadata):
    t = host_target()
    ref = verify_llvm(build_module(kernels, t, metadata, module_name="m"))
    optimize(ref, t, 3)
    return emit_object(ref, t, 3)


def test_link_shared_and_load_with_ctypes(tmp_path):
    kernel = saxpy_kernel()
    so = link_shared(compiled_object([kernel], '{"v": 1}'), tmp_path / "lib" / "k.so", host_target())
    assert [p.name for p in so.parent.iterdir()] == ["k.so"]
    lib = ctypes.CDLL(str(so))
    lib.__dsl_metadata.restype = ctypes.c_char_p
    assert lib.__dsl_metadata() == b'{"v": 1}'
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    lib.saxpy.argtypes = [ctypes.c_float] + [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64] * 2
    assert lib.saxpy(3.0, x.ctypes.data, 4, 1, y.ctypes.data, 4, 1) == 0
    assert y.tolist() == [1.0, 4.0, 7.0, 10.0]


def test_link_failure_raises(tmp_path):
    with pytest.raises(BackendError, match="linking failed"):
        link_shared(b"not an object", tmp_path / "bad.so", host_target())
    assert list(tmp_path.iterdir()) == []


C_MAIN = r"""
#include <stdio.h>
#include "kernels.h"

int main(void) {
    float x[4] = {1, 2, 3, 4}, y[4] = {1, 1, 1, 1};
    double m[6] = {1, 2, 3, 4, 5, 6}, sums[2];
    int32_t ok = saxpy(2.0f, x, 4, 1, y, 4, 1);
    int32_t bad = saxpy(2.0f, x, 4, 1, y, 3, 1);
    int32_t rows = rowsum_f64(m, 2, 3, 3, 1, sums, 2, 1);
    printf("%d %d %d %g %g %g %g %g %g\n", ok, bad, rows, y[0], y[1], y[2], y[3], sums[0], sums[1]);
    printf("%s\n", __dsl_metadata());
    return 0;
}
"""


def test_c_program_against_generated_header(tmp_path):
    kernels = [saxpy_kernel(), rowsum_kernel(F64)]
    header = header_text(kernels, "KERNELS_H")
    assert "const float* x," in header and "float* y," in header
    assert "/* x: f32[N], input */" in header and "/* size of x axis 0 (N) */" in header
    assert " *   1: shape: y.shape[0] must equal x.shape[0] (N)\n" in header
    (tmp_path / "kernels.h").write_text(header)
    (tmp_path / "main.c").write_text(C_MAIN)
    link_shared(compiled_object(kernels, '{"ok": true}'), tmp_path / "libkernels.so", host_target())
    exe = tmp_path / "main"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(tmp_path / "main.c"),
                    f"-L{tmp_path}", "-lkernels", f"-Wl,-rpath,{tmp_path}"], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    assert out == ["0 1 0 3 5 7 9 6 15", '{"ok": true}']
    subprocess.run(["cc", "-fsyntax-only", "-x", "c++", str(tmp_path / "kernels.h")], check=True)
