"""Stable, readable text of the kernel IR and the loop IR.

Used for golden tests, `dslc --emit=typed|loops` and `--print-after`:

    kernel saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N] out)
      N = shape(x, 0)
      check shape(y, 0) == N else #0
      for i in range(0, N):
        out[i] = alpha * x[i] + y[i]
      checks:
        #0 shape: 'y' axis 0 must equal N ('x' axis 0)

Conventions:
- expressions are infix with the fewest parentheses Python's precedence needs;
  `a if c else b` is always parenthesized; intrinsics, min/max, fma and casts
  print as calls (`exp(x)`, `min(a, b)`, `f32(i)`);
- index notation: `C[m, n] = v for m < M, n < N`, reductions `sum[k < K](v)`;
- a constant carries a type suffix (`3_i32`, `1.5_f64`) unless its type is implied
  by its context (the other operand, the stored-to tensor, ...) or is the default
  for its literal (i64, f32); floats print as the shortest text that round-trips
  in their type;
- a local's first assignment shows its type: `acc: f32 = 0.0`;
- two symbols with one name print as `i`, `i.1`, ... in order of appearance, so
  the text never depends on symbol ids.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import ir
from .types import BOOL, F32, I64, ScalarType, value_type

CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")
# Python's binding strength, loosest first; ATOM needs no parentheses anywhere.
PREC = {"or": 2, "and": 3, "|": 6, "^": 7, "&": 8, "<<": 9, ">>": 9,
        "+": 10, "-": 10, "*": 11, "/": 11, "//": 11, "%": 11}
PREC.update({op: 5 for op in CMP_OPS})
NOT, UNARY, ATOM = 4, 12, 14
CALL_BINARY = ("min", "max")
UNARY_SYMBOL = {"neg": "-", "invert": "~"}


class Namer:
    """Gives each `Sym` a printed name: its own, or `name.1`, `name.2`, ... when an
    earlier symbol took it. Names depend only on the order of first use."""

    def __init__(self, reserved=()):
        self._names: dict[ir.Sym, str] = {}
        self._taken: set[str] = set(reserved)

    def __call__(self, sym: ir.Sym) -> str:
        name = self._names.get(sym)
        if name is None:
            name, n = sym.name, 0
            while name in self._taken:
                n += 1
                name = f"{sym.name}.{n}"
            self._names[sym] = name
            self._taken.add(name)
        return name

    def known(self) -> dict[ir.Sym, str]:
        return dict(self._names)


def format_kernel(kernel: ir.Kernel) -> str:
    """The text of one kernel, ending with a newline (see the module docstring)."""
    return _Printer(kernel_reserved(kernel)).kernel(kernel)


def format_program(program: ir.Program) -> str:
    """The kernels of `program`, separated by blank lines."""
    return "\n".join(format_kernel(k) for k in program.kernels)


def kernel_namer(kernel: ir.Kernel) -> Namer:
    """The `Namer` holding the names `format_kernel(kernel)` uses."""
    printer = _Printer(kernel_reserved(kernel))
    printer.kernel(kernel)
    return printer.names


def kernel_reserved(kernel: ir.Kernel) -> tuple[str, ...]:
    return tuple(t.name for t in kernel.tensors)


def format_expr(e: ir.Expr, names: Namer | None = None) -> str:
    """One expression, e.g. `alpha * x[i] + y[i]`."""
    return _Printer(names=names).expr(e)


def format_stmt(s: ir.Stmt, names: Namer | None = None) -> str:
    """One statement with its nested body, lines indented by two spaces per level."""
    printer = _Printer(names=names)
    printer.stmt(s, 0)
    return "\n".join(printer.lines)


def format_node(node, names: Namer | None = None) -> str:
    """One line for an expression or a statement (a loop or `if` gives its header)."""
    if isinstance(node, (ir.For, ir.If)):
        return format_stmt(node, names).split("\n", 1)[0]
    if isinstance(node, (ir.Assign, ir.Store, ir.Check, ir.Alloc, ir.LocalArray, ir.Prefetch, ir.Realign,
                         ir.IndexStore)):
        return format_stmt(node, names)
    return format_expr(node, names)


def format_float(value: float, t: ScalarType) -> str:
    """The shortest text that reads back as `value` rounded to `t`, laid out like
    Python's `repr` (`0.1`, `1e-05`, `1e+30`, `inf`, `-0.0`)."""
    if t.bits == 64:
        x = float(value)
        return repr(x) if math.isfinite(x) else _nonfinite(x)
    x = (np.float16 if t.bits == 16 else np.float32)(value)
    if not np.isfinite(x):
        return _nonfinite(float(x))
    sci = np.format_float_scientific(x, unique=True, trim="-")
    exponent = int(sci.split("e")[1])
    if -4 <= exponent < 16:
        return np.format_float_positional(x, unique=True, trim="0")
    return sci


def _nonfinite(x: float) -> str:
    if math.isnan(x):
        return "nan"
    return "inf" if x > 0 else "-inf"


class _Printer:
    def __init__(self, reserved=(), names: Namer | None = None):
        self.names = names if names is not None else Namer(reserved)
        self.lines: list[str] = []
        self.declared: set[ir.Sym] = set()

    # ------------------------------------------------------------- kernels

    def kernel(self, k: ir.Kernel) -> str:
        options = _options_text(k.options)
        if options:
            self.lines.append(options)
        params = ", ".join(self.param(p) for p in k.params)
        self.lines.append(f"kernel {k.name}({params})")
        self.block(k.body, 1)
        if k.checks:
            self.lines.append("  checks:")
            for code, info in enumerate(k.checks):
                self.lines.append(f"    #{code} {info.kind}: {info.message}")
        return "\n".join(self.lines) + "\n"

    def param(self, p) -> str:
        if isinstance(p, ir.ScalarParam):
            return f"{self.names(p.sym)}: {p.dtype}"
        dims = ", ".join(str(d) if isinstance(d, int) else self.names(d) for d in p.dims)
        return f"{p.name}: {p.dtype}[{dims}]" + (" out" if p.is_output else "")

    # ---------------------------------------------------------- statements

    def block(self, body, depth: int) -> None:
        if not body:
            self.emit(depth, "pass")
        for s in body:
            self.stmt(s, depth)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def stmt(self, s, depth: int) -> None:
        match s:
            case ir.For():
                self.emit(depth, self.for_header(s))
                self.block(s.body, depth + 1)
            case ir.If():
                self.if_chain(s, depth)
            case ir.Assign(sym, value):
                self.emit(depth, f"{self.target(sym)} = {self.expr(value, sym.type)}")
            case ir.Store():
                self.emit(depth, self.store(s))
            case ir.Check(cond, code):
                self.emit(depth, f"check {self.expr(cond, BOOL)} else #{code}")
            case ir.Prefetch(tensor, indices, write, level):
                where = f" to L{level}" if level != 1 else ""
                self.emit(depth, f"prefetch{'_write' if write else ''} {self.subscript(tensor, indices)}{where}")
            case ir.Alloc(buffer, size, code):
                self.emit(depth, f"alloc {buffer.name}: {buffer.dtype}[{self.expr(size, I64)}] else #{code}")
            case ir.Realign(tensor, when, code):
                self.emit(depth, f"realign {tensor.name} if {self.expr(when, BOOL)} else #{code}")
            case ir.LocalArray(buffer):
                self.emit(depth, f"local {buffer.name}: {buffer.dtype}[{', '.join(map(str, buffer.dims))}]")
            case ir.IndexStore(indices, store):
                self.emit(depth, f"{self.store(store)} for {self.bounds(indices)}")
            case _:
                self.emit(depth, f"<?{type(s).__name__}>")

    def for_header(self, s: ir.For) -> str:
        parts = [self.expr(s.start, I64), self.expr(s.stop, I64)]
        if s.step != 1:
            parts.append(str(s.step))
        text = f"for {self.names(s.var)} in range({', '.join(parts)})"
        if s.kind != "serial":
            text += f" {s.kind}"
        if s.unroll:
            text += f" unroll={s.unroll}"
        if s.when is not None:
            text += f" if {self.expr(s.when, BOOL)}"
        if s.name != s.var.name:
            text += f" name={s.name}"
        return text + ":"

    def if_chain(self, s: ir.If, depth: int) -> None:
        keyword = "if"
        while True:
            self.emit(depth, f"{keyword} {self.expr(s.cond, BOOL)}:")
            self.block(s.then, depth + 1)
            if len(s.orelse) == 1 and isinstance(s.orelse[0], ir.If):
                s, keyword = s.orelse[0], "elif"
                continue
            if s.orelse:
                self.emit(depth, "else:")
                self.block(s.orelse, depth + 1)
            return

    def target(self, sym: ir.Sym) -> str:
        name = self.names(sym)
        if sym.role == "local" and sym not in self.declared:
            self.declared.add(sym)
            lanes = f" x {sym.lanes}" if sym.lanes > 1 else ""
            return f"{name}: {sym.type}{lanes}"
        return name

    def store(self, s: ir.Store) -> str:
        dest = self.subscript(s.tensor, s.indices)
        where = "" if s.mask is None else f" where {self.expr(s.mask, BOOL)}"
        stream = "  nontemporal" if s.nontemporal else ""
        return f"{dest} = {self.expr(s.value, value_type(s.tensor.dtype))}{where}{stream}"

    def subscript(self, tensor: ir.TensorParam, indices) -> str:
        return f"{tensor.name}[{', '.join(self.expr(i, I64) for i in indices)}]"

    def bounds(self, indices) -> str:
        return ", ".join(f"{self.names(sym)} < {self.expr(x, I64)}" for sym, x in indices)

    # --------------------------------------------------------- expressions

    def expr(self, e, expected: ScalarType | None = None) -> str:
        return self.prec_expr(e, expected)[0]

    def prec_expr(self, e, expected: ScalarType | None) -> tuple[str, int]:
        """The text of `e` and how tightly it binds (see PREC)."""
        match e:
            case ir.Const():
                return self.const(e, expected)
            case ir.Var(sym):
                return self.names(sym), ATOM
            case ir.Shape(tensor, axis):
                return f"shape({tensor.name}, {axis})", ATOM
            case ir.Load(tensor, indices, mask=mask) if mask is not None:
                return f"{self.subscript(tensor, indices)}.where({self.expr(mask, BOOL)})", ATOM
            case ir.Load(tensor, indices):
                return self.subscript(tensor, indices), ATOM
            case ir.Ramp(base, stride, lanes):
                return f"ramp({self.expr(base, I64)}, {stride}, {lanes})", ATOM
            case ir.Broadcast(value, lanes):
                return f"broadcast({self.expr(value)}, {lanes})", ATOM
            case ir.HReduce(op, value, t):
                return f"hreduce_{_HREDUCE_NAMES[op]}({self.expr(value, t)})", ATOM
            case ir.Shuffle(a, b, mask):
                return f"shuffle({self.expr(a, e.type)}, {self.expr(b, e.type)}, {list(mask)})", ATOM
            case ir.Binary():
                return self.binary(e)
            case ir.Unary():
                return self.unary(e)
            case ir.Cast(value, t):
                return f"{t}({self.expr(value)})", ATOM
            case ir.Fma(a, b, c, t):
                return f"fma({self.expr(a, t)}, {self.expr(b, t)}, {self.expr(c, t)})", ATOM
            case ir.Select(cond, a, b, t):
                return f"({self.expr(a, t)} if {self.expr(cond, BOOL)} else {self.expr(b, t)})", ATOM
            case ir.Overlaps(a, b):
                return f"overlaps({a.name}, {b.name})", ATOM
            case ir.Threads():
                return "threads()", ATOM
            case ir.UnitStrides():
                return "unit_strides()", ATOM
            case ir.AlignGap(tensor, indices, nbytes):
                return f"align_gap({self.subscript(tensor, indices)}, {nbytes})", ATOM
            case ir.TargetOp(name, args):
                return f"{name}({', '.join(self.expr(a, a.type) for a in args)})", ATOM
            case ir.Reduce(op, indices, body, t):
                return f"{op}[{self.bounds(indices)}]({self.expr(body, t)})", ATOM
        return f"<?{type(e).__name__}>", ATOM

    def binary(self, e: ir.Binary) -> tuple[str, int]:
        # A constant operand takes its type from the other side when that is not a constant.
        lhs_hint = _type_of(e.rhs) if not isinstance(e.rhs, ir.Const) else None
        rhs_hint = _type_of(e.lhs) if not isinstance(e.lhs, ir.Const) else None
        if e.op in CALL_BINARY:
            return f"{e.op}({self.expr(e.lhs, lhs_hint)}, {self.expr(e.rhs, rhs_hint)})", ATOM
        prec = PREC.get(e.op, ATOM)
        lhs, lp = self.prec_expr(e.lhs, lhs_hint)
        rhs, rp = self.prec_expr(e.rhs, rhs_hint)
        # Left-associative; comparisons chain in Python, so they bracket both sides.
        if lp < prec or (lp == prec and e.op in CMP_OPS):
            lhs = f"({lhs})"
        if rp <= prec:
            rhs = f"({rhs})"
        return f"{lhs} {e.op} {rhs}", prec

    def unary(self, e: ir.Unary) -> tuple[str, int]:
        if e.op == "not":
            text, prec = self.prec_expr(e.operand, BOOL)
            return f"not {_paren(text, prec < NOT)}", NOT
        symbol = UNARY_SYMBOL.get(e.op)
        if symbol is None:
            return f"{e.op}({self.expr(e.operand, e.operand.type)})", ATOM
        text, prec = self.prec_expr(e.operand, e.type)
        return symbol + _paren(text, prec < UNARY or text.startswith("-")), UNARY

    def const(self, e: ir.Const, expected: ScalarType | None) -> tuple[str, int]:
        t, value = e.type, e.value
        if isinstance(value, (bool, np.bool_)) or t.is_bool:
            text = repr(bool(value)) if isinstance(value, (bool, np.bool_, int)) else repr(value)
        elif t.is_float and isinstance(value, (int, float, np.number)):
            text = format_float(value, t)
        else:
            text = str(value)
        if t != (expected or _default_type(t)):
            text = f"{text}_{t}"
        return text, (UNARY if text.startswith("-") else ATOM)


_HREDUCE_NAMES = {"+": "sum", "*": "prod", "min": "min", "max": "max"}


def _paren(text: str, needed: bool) -> str:
    return f"({text})" if needed else text


def _type_of(e) -> ScalarType | None:
    return getattr(e, "type", None)


def _default_type(t: ScalarType) -> ScalarType:
    """The type an unsuffixed literal of `t`'s kind has."""
    if t.is_bool:
        return BOOL
    return F32 if t.is_float else I64


def _options_text(options: ir.KernelOptions) -> str:
    default = ir.KernelOptions()
    changed = [f"{f.name}={getattr(options, f.name)!r}" for f in dataclasses.fields(options)
               if getattr(options, f.name) != getattr(default, f.name)]
    return f"@options({', '.join(changed)})" if changed else ""
