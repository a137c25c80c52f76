"""`dslc`, the command line: every --emit stage, the outputs it writes, the
printing and dumping switches, and the exit status of each kind of failure."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import llvmlite.binding as llvm
import pytest
from click.testing import CliRunner

from dsl.cli import main
from dsl.pipeline import STAGE_NAMES

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "examples" / "saxpy.tk"
ROW_SUMS = ROOT / "examples" / "row_sums.tk"

BROKEN = """\
def f(x: f32[N], y: i32[N]):
    for i in range(N):
        y[i] = x[i]
        z = undefined_name + 1
"""


def dslc(*args):
    """Run `dslc ARGS` in this process; stdout and stderr stay apart."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def is_elf(path: Path, kind: int) -> bool:
    """ELF magic and e_type (1 relocatable, 3 shared object)."""
    data = path.read_bytes()
    return data[:4] == b"\x7fELF" and int.from_bytes(data[16:18], "little") == kind


# ------------------------------------------------------------------ help


def test_help_documents_every_option():
    result = dslc("--help")
    assert result.exit_code == 0
    for option in ("--emit", "--target", "-O", "--cpu", "--features", "-H", "--header", "-o",
                   "--print-after", "--print-after-all", "--remarks", "--dump-dir", "--out-dir", "--stdlib",
                   "--no-progress", "--kernel", "--jobs"):
        assert option in result.stdout, option
    for stage in ("ast", "typed", "loops", "llvm", "asm", "obj", "so"):
        assert stage in result.stdout, stage


# ------------------------------------------------------------------ --jobs


def test_jobs_sets_the_codegen_processes(tmp_path, monkeypatch):
    from dsl.backends import codegen_pool

    asked, real = [], codegen_pool.compile_parts
    monkeypatch.setattr(codegen_pool, "compile_parts",
                        lambda texts, target, opt, jobs: (asked.append(jobs), real(texts, target, opt, jobs))[1])
    assert dslc(SAXPY, "-j", "3", "-o", tmp_path / "s.so").exit_code == 0
    assert asked == [3] and is_elf(tmp_path / "s.so", 3)
    result = dslc(SAXPY, "-j", "0", "-o", tmp_path / "t.so")
    assert result.exit_code == 2 and "0 is not in the range x>=1" in result.stderr


# ------------------------------------------------------------------ --kernel

TWO_KERNELS = """\
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]

def scale(alpha: f32, x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i]
"""


def test_kernel_builds_only_the_named_kernel(tmp_path):
    source = tmp_path / "two.tk"
    source.write_text(TWO_KERNELS)
    result = dslc(source, "--kernel", "scale", "-o", tmp_path / "two.so", "-H", tmp_path / "two.h")
    assert result.exit_code == 0, result.stderr
    header = (tmp_path / "two.h").read_text()
    assert "int32_t scale(" in header and "saxpy" not in header
    lib = ctypes.CDLL(str(tmp_path / "two.so"))
    assert hasattr(lib, "scale") and not hasattr(lib, "saxpy")


def test_kernel_that_the_file_lacks_is_an_error(tmp_path):
    source = tmp_path / "two.tk"
    source.write_text(TWO_KERNELS)
    result = dslc(source, "--kernel", "nope", "-o", tmp_path / "two.so")
    assert result.exit_code == 1
    assert f"error: {source} has no kernel 'nope'" in result.stderr
    assert "note: its kernels: saxpy, scale" in result.stderr
    assert not (tmp_path / "two.so").exists()


# ------------------------------------------------------------------ --emit


def test_emit_ast_prints_the_syntax_tree():
    result = dslc(SAXPY, "--emit=ast")
    assert result.exit_code == 0, result.stderr
    assert "FunctionDef saxpy" in result.stdout and "Param alpha: f32" in result.stdout
    assert "For i in range(N)" in result.stdout


def test_emit_typed_prints_kernel_ir_with_index_notation():
    result = dslc(ROOT / "examples" / "matmul_index.tk", "--emit=typed")
    assert result.exit_code == 0, result.stderr
    assert "kernel matmul_index(A: f32[M, K], B: f32[K, N], C: f32[M, N] out)" in result.stdout
    assert "sum[k < K]" in result.stdout and "for m < M, n < N" in result.stdout
    assert "check" not in result.stdout  # entry checks arrive with the loop IR


def test_emit_loops_prints_loop_ir_with_entry_checks():
    result = dslc(SAXPY, "--emit=loops")
    assert result.exit_code == 0, result.stderr
    assert "N = shape(x, 0)" in result.stdout
    assert "check shape(y, 0) == N else #0" in result.stdout
    assert "for i in range(0, N):" in result.stdout


def test_emit_llvm_is_a_valid_module():
    result = dslc(SAXPY, "--emit=llvm", "-O0")
    assert result.exit_code == 0, result.stderr
    module = llvm.parse_assembly(result.stdout)
    module.verify()
    assert module.get_function("saxpy").name == "saxpy"
    assert "define" in result.stdout and "@saxpy(" in result.stdout


def test_emit_asm_defines_the_kernel_symbol():
    result = dslc(SAXPY, "--emit=asm")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "saxpy:" in lines
    assert any(line.split() == [".globl", "saxpy"] for line in lines)


@pytest.mark.parametrize("level", ["-O0", "-O3"])
def test_each_optimization_level_builds_a_module(level, tmp_path):
    out = tmp_path / "saxpy.ll"
    result = dslc(SAXPY, level, "-o", out)
    assert result.exit_code == 0, result.stderr
    llvm.parse_assembly(out.read_text()).verify()


def test_o0_and_o3_differ():
    plain = dslc(SAXPY, "--emit=asm", "-O0").stdout
    optimized = dslc(SAXPY, "--emit=asm", "-O3").stdout
    assert plain != optimized


def test_emit_obj_writes_an_elf_object(tmp_path):
    out = tmp_path / "x.o"
    result = dslc(SAXPY, "--emit=obj", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert is_elf(out, kind=1)


def test_emit_obj_needs_an_output_file():
    result = dslc(SAXPY, "--emit=obj")
    assert result.exit_code == 2
    assert "-o" in result.stderr


def test_shared_object_exports_kernels_and_metadata(tmp_path):
    out = tmp_path / "row_sums.so"
    result = dslc(ROW_SUMS, "-o", out)
    assert result.exit_code == 0, result.stderr
    assert is_elf(out, kind=3)
    lib = ctypes.CDLL(str(out))
    for name in ("row_sums", "row_sums_f64", "__dsl_metadata"):
        assert hasattr(lib, name), name
    meta = getattr(lib, "__dsl_metadata")
    meta.restype = ctypes.c_char_p
    text = meta().decode()
    assert '"name":"row_sums"' in text and '"name":"row_sums_f64"' in text


def test_nm_lists_one_symbol_per_kernel(tmp_path):
    out = tmp_path / "row_sums.so"
    assert dslc(ROW_SUMS, "-o", out).exit_code == 0
    try:
        nm = subprocess.run(["nm", "-D", "--defined-only", str(out)], capture_output=True, text=True, check=True)
    except FileNotFoundError:
        pytest.skip("nm is not installed")
    exported = {line.split()[-1] for line in nm.stdout.splitlines() if " T " in line}
    assert "__dsl_metadata" in exported
    # Besides the metadata, only kernels and their `kernel__variant` entry points.
    assert {name for name in exported if "__" not in name} == {"row_sums", "row_sums_f64"}
    assert all(name.split("__")[0] in ("", "row_sums", "row_sums_f64") for name in exported)


def test_text_stage_written_with_o(tmp_path):
    out = tmp_path / "saxpy.loops"
    result = dslc(SAXPY, "--emit=loops", "-o", out)
    assert result.exit_code == 0 and result.stdout == ""
    assert out.read_text().startswith("kernel saxpy(")


# ---------------------------------------------------- printing and dumping


def test_print_after_guard_goes_to_stderr(tmp_path):
    result = dslc(SAXPY, "--print-after=guard", "-o", tmp_path / "s.so")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "// ----- after guard -----" in result.stderr
    assert "kernel saxpy(" in result.stderr
    assert "after loops" not in result.stderr


def test_print_after_all_prints_every_text_stage(tmp_path):
    result = dslc(SAXPY, "--print-after-all", "-o", tmp_path / "s.so")
    assert result.exit_code == 0
    assert result.stdout == ""
    for stage in STAGE_NAMES:
        if stage != "obj":
            assert f"// ----- after {stage} -----" in result.stderr, stage
    assert "after obj" not in result.stderr


def test_dump_dir_writes_one_numbered_file_per_stage(tmp_path):
    dump = tmp_path / "dump"
    result = dslc(SAXPY, "--dump-dir", dump, "-o", tmp_path / "s.so")
    assert result.exit_code == 0, result.stderr
    files = sorted(p.name for p in dump.iterdir())
    expected = [f"{k:02d}-{stage}.{'o' if stage == 'obj' else 'txt'}" for k, stage in enumerate(STAGE_NAMES)]
    assert [f for f in files if "schedule-" not in f] == expected
    # saxpy has no @schedule: the automatic one is its one pass
    assert files[3:5] == ["03-schedule-01-saxpy-auto.txt", "03-schedule.txt"]
    assert (dump / files[0]).read_text().startswith("FunctionDef saxpy")
    assert is_elf(dump / files[-1], kind=1)


SCHEDULED = """\
@schedule(split(i, 8), unroll(i.inner), parallel(i.outer))
def scale(x: f32[N], y: f32[N]):
    for i in range(N):
        y[i] = x[i] * 2.0
"""


def test_dump_dir_writes_one_file_per_schedule_pass_in_order(tmp_path):
    src = tmp_path / "scale.tk"
    src.write_text(SCHEDULED)
    dump = tmp_path / "dump"
    result = dslc(src, "--dump-dir", dump, "--emit=guard")
    assert result.exit_code == 0, result.stderr
    passes = ["03-schedule-01-scale-split.txt", "03-schedule-02-scale-unroll.txt",
              "03-schedule-03-scale-parallel.txt"]
    files = sorted(p.name for p in dump.iterdir())
    assert files == ["00-ast.txt", "01-typed.txt", "02-loops.txt", *passes, "03-schedule.txt", "04-guard.txt"]
    texts = [(dump / name).read_text() for name in passes]
    assert "for i.inner in range(0, 8)" in texts[0] and "parallel" not in texts[0]
    assert "for i.inner" not in texts[1]  # unrolled
    assert "parallel" in texts[2]
    # each file holds what --print-after prints for that pass
    printed = dslc(src, "--print-after=unroll", "--emit=schedule").stderr
    assert texts[1].strip() in printed


def test_dump_dir_keeps_the_passes_before_a_failing_directive(tmp_path):
    src = tmp_path / "scale.tk"
    src.write_text(SCHEDULED.replace("unroll(i.inner)", "unroll(i.innr)"))
    dump = tmp_path / "dump"
    assert dslc(src, "--dump-dir", dump, "--emit=guard").exit_code == 1
    assert sorted(p.name for p in dump.iterdir()) == ["00-ast.txt", "01-typed.txt", "02-loops.txt",
                                                      "03-schedule-01-scale-split.txt"]


def test_dump_dir_stops_with_emit(tmp_path):
    dump = tmp_path / "dump"
    assert dslc(SAXPY, "--emit=loops", "--dump-dir", dump).exit_code == 0
    assert sorted(p.name for p in dump.iterdir()) == ["00-ast.txt", "01-typed.txt", "02-loops.txt"]


# ------------------------------------------------------------------ failures


def test_program_errors_exit_1_with_located_messages(tmp_path):
    bad = tmp_path / "bad.tk"
    bad.write_text(BROKEN)
    result = dslc(bad, "-o", tmp_path / "bad.so")
    assert result.exit_code == 1
    assert f"{bad}:3:16: error: store to 'y'" in result.stderr
    assert f"{bad}:4:13: error: name 'undefined_name' is not defined" in result.stderr
    assert "Traceback" not in result.stderr and ".py" not in result.stderr
    assert not (tmp_path / "bad.so").exists()


def test_program_errors_in_a_real_process(tmp_path):
    bad = tmp_path / "bad.tk"
    bad.write_text(BROKEN)
    proc = subprocess.run([sys.executable, "-m", "dsl.cli", str(bad), "--emit=loops"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "bad.tk:3:16: error:" in proc.stderr and "2 errors generated." in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_file_is_a_usage_error(tmp_path):
    result = dslc(tmp_path / "nope.tk")
    assert result.exit_code == 2
    assert "nope.tk" in result.stderr and "does not exist" in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--print-after=bogus"], "unknown stage 'bogus'"),
    (["--print-after=obj", "-o", "x.so"], "binary"),
    (["--print-after=llvm", "--emit=loops"], "--emit=loops stops before it"),
    (["--emit=typed", "-H", "x.h"], "-H needs the kernels lowered"),
    (["--emit=bogus"], "bogus"),
    (["-O4"], "4"),
])
def test_bad_usage_exits_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = dslc(SAXPY, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_unwritable_output_exits_1_without_traceback(tmp_path):
    result = dslc(SAXPY, "--emit=loops", "-o", tmp_path / "no" / "such" / "dir" / "x.txt")
    assert result.exit_code == 1
    assert result.stderr.startswith("dslc: ") and "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--cpu", "notacpu"], "--cpu: 'notacpu' is not a recognized processor"),
    (["--features", "+nosuchfeature"], "--features: '+nosuchfeature' is not a recognized feature"),
    (["--target", "bogus-triple"], "--target bogus-triple: No available targets"),
])
def test_unknown_target_is_a_usage_error(args, message, tmp_path):
    # In a child process: without the check, LLVM aborts the whole process.
    proc = subprocess.run([sys.executable, "-m", "dsl.cli", str(SAXPY), "-o", "s.so", *args],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "LLVM ERROR" not in proc.stderr
    assert not (tmp_path / "s.so").exists()


def test_cross_target_assembly():
    result = dslc(SAXPY, "--emit=asm", "--target", "aarch64-unknown-linux-gnu", "--cpu", "neoverse-n1")
    assert result.exit_code == 0, result.stderr
    assert "saxpy:" in result.stdout.splitlines()
    assert "fmla" in result.stdout or "fmadd" in result.stdout  # AArch64 code: a fused multiply-add


# ------------------------------------------------------------------ --remarks


def test_remarks_say_what_became_a_micro_kernel_and_what_did_not():
    result = dslc(ROOT / "examples" / "matmul_index.tk", "--remarks", "--emit=schedule", "--cpu", "haswell")
    assert result.exit_code == 0
    assert "matmul_index.tk:5:5: remark: loop 'm': contraction of 'A' (m=m) and 'B' (n=n) over k=k: " \
           "6x16 f32 micro-kernel" in result.stderr
    result = dslc(SAXPY, "--remarks", "--emit=schedule")
    assert "remark: loop 'i' is not a contraction" in result.stderr
    assert "remark: loop 'i': parallel on all threads when its work" in result.stderr
    assert "remark" not in dslc(SAXPY, "--emit=schedule").stderr
