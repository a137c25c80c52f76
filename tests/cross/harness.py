"""A C test driver for one kernel, written from the generated header alone.

The header documents every parameter (`const float* A, /* A: f32[M, K], input */`,
`int64_t A_size0, /* size of A axis 0 (M) */`, ...). `parse_header` reads the
prototypes back into `CKernel`s; `driver_source` writes a `main()` that loads
each tensor's memory from `<name>.bin`, calls the kernel with the sizes and
element strides of the numpy arrays it was given, prints the status and writes
every output tensor's memory to `<name>.out`. `run_case` builds and runs it
(natively or under qemu) and returns the outputs as numpy arrays, views
included: an array is shipped as the span of memory it covers, so transposed
and strided views reach the kernel without a copy.

    >>> kernels = parse_header(Path("mm.h").read_text())        # doctest: +SKIP
    >>> outs = run_case(toolchain, build, kernels["mm"], [a, b, c])
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dsl.lowering.quant import FORMATS

NUMPY_TYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
               "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
               "u64": np.uint64, "bool": np.bool_}


@dataclass(frozen=True)
class CParam:
    """One kernel parameter as the header describes it."""

    name: str  # the C name of its first argument (data pointer or scalar)
    dtype: str
    dims: tuple[str, ...] | None  # None: a scalar
    output: bool = False


@dataclass(frozen=True)
class CKernel:
    name: str
    params: tuple[CParam, ...]


_PARAM = re.compile(r"^\s*(?P<ctype>[\w ]+\*?)\s+(?P<cname>\w+),?\s*/\*\s*(?P<doc>.*?)\s*\*/\s*$")
_TENSOR = re.compile(r"^\w+: (?P<dtype>\w+)\[(?P<dims>[^\]]*)\](?: \(IEEE half bits\))?, (?P<role>input|output)$")
_SCALAR = re.compile(r"^\w+: (?P<dtype>\w+), scalar$")
_QUANT = re.compile(r"^\w+: (?P<dtype>q\w+)\[(?P<dims>[^\]]*)\], input: ggml block")


def parse_header(text: str) -> dict[str, CKernel]:
    """The kernels a generated header declares, by name."""
    kernels = {}
    for match in re.finditer(r"^int32_t (\w+)\(\n(.*?)^\);", text, re.M | re.S):
        params = []
        for line in match.group(2).splitlines():
            found = _PARAM.match(line)
            assert found, f"unexpected header line: {line!r}"
            doc, cname = found.group("doc"), found.group("cname")
            if tensor := _TENSOR.match(doc):
                dims = tuple(d.strip() for d in tensor.group("dims").split(","))
                params.append(CParam(cname, tensor.group("dtype"), dims, tensor.group("role") == "output"))
            elif quant := _QUANT.match(doc):  # block bytes: sizes in values, strides in blocks
                params.append(CParam(cname, quant.group("dtype"), tuple(d.strip() for d in quant.group("dims").split(","))))
            elif scalar := _SCALAR.match(doc):
                params.append(CParam(cname, scalar.group("dtype"), None))
            # sizes and strides follow their tensor; the driver derives them from the array
        kernels[match.group(1)] = CKernel(match.group(1), tuple(params))
    return kernels


def _span(array: np.ndarray) -> np.ndarray:
    """The memory `array` covers, from its first element, as a 1-D array."""
    assert all(s >= 0 for s in array.strides), "negative strides are not shipped"
    item = array.itemsize
    length = 1 + sum((n - 1) * s // item for n, s in zip(array.shape, array.strides)) if array.size else 0
    return np.lib.stride_tricks.as_strided(array, shape=(length,), strides=(item,))


def _c_scalar(value, dtype: str) -> str:
    if dtype in ("f32", "f64"):
        text = float(value).hex()
        return f"{text}f" if dtype == "f32" else text
    if dtype == "bool":
        return "1" if value else "0"
    return f"INT64_C({int(value)})" if dtype.startswith("i") else f"UINT64_C({int(value)})"


def driver_source(header: str, kernel: CKernel, args: list) -> str:
    """A C program calling `kernel` on `args` (numpy arrays and Python scalars)."""
    lines = ["#include <stdio.h>", "#include <stdlib.h>", f'#include "{header}"', "",
             "static void* load(const char* path, size_t bytes) {",
             "    void* data = malloc(bytes ? bytes : 1);",
             "    FILE* f = fopen(path, \"rb\");",
             "    if (!data || !f || fread(data, 1, bytes, f) != bytes) { perror(path); exit(2); }",
             "    fclose(f);", "    return data;", "}", "",
             "static void save(const char* path, const void* data, size_t bytes) {",
             "    FILE* f = fopen(path, \"wb\");",
             "    if (!f || fwrite(data, 1, bytes, f) != bytes) { perror(path); exit(2); }",
             "    fclose(f);", "}", "", "int main(void) {"]
    call = []
    for param, value in zip(kernel.params, args, strict=True):
        if param.dims is None:
            call.append(_c_scalar(value, param.dtype))
            continue
        ctype = _c_element(param.dtype)
        nbytes = _span(value).nbytes
        lines.append(f'    {ctype}* {param.name} = ({ctype}*)load("{param.name}.bin", {nbytes});')
        if param.dtype in FORMATS:  # uint8 [..., bytes per row]: sizes in values, strides in blocks
            fmt = FORMATS[param.dtype]
            sizes = value.shape[:-1] + (value.shape[-1] // fmt.nbytes * fmt.block,)
            call += [param.name, *(str(n) for n in sizes), *(str(s // fmt.nbytes) for s in value.strides[:-1]), "1"]
            continue
        call += [param.name, *(str(n) for n in value.shape), *(str(s // value.itemsize) for s in value.strides)]
    lines.append(f"    int32_t status = {kernel.name}({', '.join(call)});")
    lines.append('    printf("status %d\\n", (int)status);')
    for param, value in zip(kernel.params, args, strict=True):
        if param.output:
            lines.append(f'    save("{param.name}.out", {param.name}, {_span(value).nbytes});')
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines)


def _c_element(dtype: str) -> str:
    if dtype == "bool" or dtype in FORMATS:
        return "uint8_t"
    if dtype == "f16":
        return "uint16_t"
    return {"f32": "float", "f64": "double"}.get(dtype, f"{dtype.replace('i', 'int').replace('u', 'uint')}_t")


@dataclass(frozen=True)
class Toolchain:
    """How to build and run a C program against a kernel library."""

    cc: list[str]
    run_prefix: list[str]  # e.g. ['qemu-aarch64', '-L', '/usr/aarch64-linux-gnu']


def run_case(tool: Toolchain, build_dir: Path, lib: str, kernel: CKernel, args: list,
             env: dict | None = None) -> tuple[int, list[np.ndarray], str]:
    """Build `lib.so` + `lib.h` (in `build_dir`) into a driver for `kernel`, run
    it on `args` and return (status, the output arrays after the call, stderr)."""
    work = build_dir / f"run-{kernel.name}"
    work.mkdir(exist_ok=True)
    for param, value in zip(kernel.params, args, strict=True):
        if param.dims is not None:
            _span(value).tofile(work / f"{param.name}.bin")
    (work / "main.c").write_text(driver_source(f"../{lib}.h", kernel, args))
    cc = subprocess.run([*tool.cc, "-std=c11", "-Wall", "-Werror", "main.c", f"../{lib}.so", "-o", "main",
                         "-Wl,-rpath,$ORIGIN/.."], cwd=work, capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    done = subprocess.run([*tool.run_prefix, "./main"], cwd=work, capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, f"driver failed ({done.returncode}): {done.stderr}"
    status = int(done.stdout.split("status ", 1)[1].split()[0])
    outputs = []
    for param, value in zip(kernel.params, args, strict=True):
        if param.output:
            memory = np.fromfile(work / f"{param.name}.out", dtype=value.dtype)
            view = np.lib.stride_tricks.as_strided(memory, value.shape, value.strides)
            outputs.append(view.copy())
    return status, outputs, done.stderr
