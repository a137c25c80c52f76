"""Random well-typed kernel programs, printed as `.tk` text.

Every program this module makes must compile: a diagnostic on one is a bug in
the generator or in the compiler. Expressions are built top-down with a wanted
type, so no implicit conversion is ever needed (operands of one operator have
the same type; other types come in through explicit casts). Every element
access is in bounds for sizes >= 1 (indices are loop variables over the same
dim, shifted modulo the dim, or constants), and a `pgrid` body touches only
the output elements of its own iteration, so the programs are also fit for
differential testing (`differential.py`).

    >>> text = ProgramGen(random.Random(3)).program().text     # doctest: +SKIP

With `exact=True` a program has integer and bool values only; with
`smooth=True` its floats avoid operations with jumps (comparisons, casts to
integers, floor, transcendental functions), so a 1-ulp difference (FMA
contraction) stays small.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
FLOATS = ("f32", "f64")
BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
DIMS = ("M", "N", "K")
CONST_DIMS = (1, 2, 3, 4)
INT_BINOPS = ("+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>")
FLOAT_BINOPS = ("+", "-", "*", "/", "//", "%")
SMOOTH_BINOPS = ("+", "-", "*")
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
FLOAT_CALLS = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "floor", "ceil", "rint", "abs")


@dataclass
class Tensor:
    name: str
    dtype: str  # storage type (f16 loads give f32)
    dims: tuple
    output: bool

    @property
    def value_type(self) -> str:
        return "f32" if self.dtype == "f16" else self.dtype


@dataclass
class Loop:
    name: str
    dim: object  # its values lie in [0, dim), dim a name or an int
    parallel: bool = False


@dataclass
class Scope:
    loops: list = field(default_factory=list)
    locals: dict = field(default_factory=dict)  # name -> type
    frozen: set = field(default_factory=set)  # locals from outside a parallel body: read only
    parallel: Loop | None = None
    index_names: dict | None = None  # index notation: name -> dim

    def child(self) -> "Scope":
        return Scope(list(self.loops), dict(self.locals), set(self.frozen), self.parallel,
                     None if self.index_names is None else dict(self.index_names))


@dataclass
class Helper:
    name: str
    params: tuple  # (name, type)
    returns: str
    text: str


@dataclass
class Program:
    text: str
    kernels: list  # kernel names


class ProgramGen:
    """Draws one random program from `rng` (see the module docstring)."""

    def __init__(self, rng: random.Random, exact: bool = False, smooth: bool = False, max_depth: int = 3):
        self.rng = rng
        self.exact = exact
        self.smooth = smooth
        self.max_depth = max_depth
        self.counter = 0
        self.tensors: list[Tensor] = []
        self.scalars: dict[str, str] = {}
        self.helpers: list[Helper] = []

    # ------------------------------------------------------------------ program

    def program(self, kernels: int | None = None) -> Program:
        parts, names = [], []
        for _ in range(self.rng.randint(0, 2)):
            helper = self.helper()
            self.helpers.append(helper)
            parts.append(helper.text)
        for _ in range(kernels or self.rng.randint(1, 2)):
            name = self.fresh("k")
            names.append(name)
            parts.append(self.kernel(name))
        return Program("\n".join(parts), names)

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def types(self) -> tuple:
        if self.exact:
            return INTS + ("bool",)
        return INTS + FLOATS + ("bool",)

    def pick_type(self) -> str:
        if self.exact:
            return self.rng.choice(INTS)
        return self.rng.choice(INTS + FLOATS + FLOATS + FLOATS)

    def kernel(self, name: str) -> str:
        rng = self.rng
        self.tensors, self.scalars = [], {}
        dims = rng.sample(DIMS, rng.randint(1, 3))
        for k in range(rng.randint(1, 4)):
            self.tensors.append(self.tensor(dims, output=k == 0 or rng.random() < 0.3))
        for _ in range(rng.randint(0, 2)):
            t = rng.choice(self.types())
            self.scalars[self.fresh("s")] = t
        params = [f"{t.name}: {t.dtype}[{', '.join(map(str, t.dims))}]" for t in self.tensors]
        params += [f"{n}: {t}" for n, t in self.scalars.items()]
        rng.shuffle(params)
        lines = []
        if not self.exact and rng.random() < 0.2:
            lines.append("@options(reassociate=True)")
        lines.append(f"def {name}({', '.join(params)}):")
        body = []
        for _ in range(rng.randint(1, 3)):
            body += self.statement(Scope(), 1, top=True)
        body += self.cover_outputs()
        return "\n".join(lines + body) + "\n"

    def tensor(self, dims, output: bool) -> Tensor:
        rng = self.rng
        rank = rng.randint(1, 3)
        shape = tuple(rng.choice(dims) if rng.random() < 0.8 else rng.choice(CONST_DIMS) for _ in range(rank))
        dtype = rng.choice(self.types() + (() if self.exact else ("f16",)))
        return Tensor(self.fresh("T"), dtype, shape, output)

    def cover_outputs(self) -> list[str]:
        """One store per output, so every tensor marked output is one."""
        out = []
        for t in self.tensors:
            if t.output:
                idx = ", ".join(f"{DIMS_NAMES[i]}" for i in range(len(t.dims)))
                out.append(f"    {t.name}[{idx}] += {self.expr(t.value_type, self.index_scope(t), 2)}"
                           if t.value_type in INTS + FLOATS else
                           f"    {t.name}[{idx}] = {self.expr('bool', self.index_scope(t), 2)}")
        return out

    def index_scope(self, t: Tensor) -> Scope:
        return Scope(index_names={DIMS_NAMES[i]: d for i, d in enumerate(t.dims)})

    # ------------------------------------------------------------------ helpers

    def helper(self) -> Helper:
        rng = self.rng
        name = self.fresh("h")
        params = tuple((self.fresh("p"), self.pick_type()) for _ in range(rng.randint(1, 3)))
        returns = self.pick_type()
        self.scalars = dict(params)
        self.tensors = []
        scope = Scope()
        body = []
        if rng.random() < 0.5:
            local = self.fresh("v")
            body.append(f"    {local} = {self.expr(returns, scope, 2)}")
            scope.locals[local] = returns
            if rng.random() < 0.5:
                body.append(f"    if {self.expr('bool', scope, 1)}:")
                body.append(f"        {local} = {self.expr(returns, scope, 2)}")
        body.append(f"    return {self.expr(returns, scope, 2)}")
        header = f"def {name}({', '.join(f'{p}: {t}' for p, t in params)}) -> {returns}:"
        self.scalars = {}
        return Helper(name, params, returns, "\n".join([header] + body) + "\n")

    # ------------------------------------------------------------------ statements

    def statement(self, scope: Scope, depth: int, top: bool = False) -> list[str]:
        rng = self.rng
        pad = "    " * depth
        kinds = ["store", "store", "local", "for", "for", "if"]
        if top:
            kinds += ["index", "index"]
        if depth > 3:
            kinds = ["store", "local"]
        kind = rng.choice(kinds)
        if kind == "store":
            return self.store(scope, pad)
        if kind == "local":
            return self.local(scope, pad)
        if kind == "for":
            return self.loop(scope, depth)
        if kind == "if":
            return self.branch(scope, depth)
        return self.index_statement(pad)

    def block(self, scope: Scope, depth: int) -> list[str]:
        lines = []
        for _ in range(self.rng.randint(1, 2)):
            lines += self.statement(scope, depth)
        return lines

    def store(self, scope: Scope, pad: str) -> list[str]:
        outs = [t for t in self.tensors if t.output and self.indices(t, scope) is not None]
        if not outs:
            return [f"{pad}pass"]
        t = self.rng.choice(outs)
        target = f"{t.name}[{self.indices(t, scope)}]"
        value = self.expr(t.value_type, scope, self.max_depth)
        if t.value_type != "bool" and self.rng.random() < 0.3:
            op = self.rng.choice(self.binops(t.value_type))
            return [f"{pad}{target} {op}= {value}"]
        return [f"{pad}{target} = {value}"]

    def local(self, scope: Scope, pad: str) -> list[str]:
        writable = [n for n in scope.locals if n not in scope.frozen and scope.locals[n] != "bool"]
        if writable and self.rng.random() < 0.4:
            name = self.rng.choice(writable)
            t = scope.locals[name]
            op = self.rng.choice(self.binops(t))
            return [f"{pad}{name} {op}= {self.expr(t, scope, self.max_depth)}"]
        t = self.rng.choice(self.types())
        name = self.fresh("v")
        line = f"{pad}{name} = {self.expr(t, scope, self.max_depth)}"
        scope.locals[name] = t
        return [line]

    def loop(self, scope: Scope, depth: int) -> list[str]:
        rng = self.rng
        pad = "    " * depth
        dims = sorted({d for t in self.tensors for d in t.dims}, key=str)
        inner = scope.child()
        kind = rng.choice(["range", "range", "grid", "pgrid"] if scope.parallel is None else ["range", "grid"])
        if kind == "range":
            var, dim = self.fresh("i"), rng.choice(dims)
            inner.loops.append(Loop(var, dim))
            form = rng.choice([f"range({dim})", f"range(1, {dim})", f"range({dim} - 1, -1, -1)",
                               f"range(0, {dim}, 2)"])
            header = f"for {var} in {form}:"
        else:
            extents = [rng.choice(dims) for _ in range(rng.randint(1, 3))]
            names = [self.fresh("i") for _ in extents]
            loops = [Loop(n, d, parallel=kind == "pgrid" and k == 0) for k, (n, d) in enumerate(zip(names, extents))]
            inner.loops += loops
            if kind == "pgrid":
                inner.parallel = loops[0]
                inner.frozen |= set(scope.locals)
            header = f"for {', '.join(names)} in {kind}({', '.join(map(str, extents))}):"
        return [pad + header] + self.block(inner, depth + 1)

    def branch(self, scope: Scope, depth: int) -> list[str]:
        pad = "    " * depth
        lines = [f"{pad}if {self.expr('bool', scope, 2)}:"] + self.block(scope.child(), depth + 1)
        if self.rng.random() < 0.3:
            lines += [f"{pad}elif {self.expr('bool', scope, 2)}:"] + self.block(scope.child(), depth + 1)
        if self.rng.random() < 0.5:
            lines += [f"{pad}else:"] + self.block(scope.child(), depth + 1)
        return lines

    def index_statement(self, pad: str) -> list[str]:
        outs = [t for t in self.tensors if t.output]
        t = self.rng.choice(outs)
        scope = self.index_scope(t)
        idx = ", ".join(scope.index_names)
        op = "=" if t.value_type == "bool" or self.rng.random() < 0.6 else "+="
        if t.value_type == "bool":
            op = "="
        value = self.index_value(t.value_type, scope)
        return [f"{pad}{t.name}[{idx}] {op} {value}"]

    def index_value(self, t: str, scope: Scope) -> str:
        """An index-notation right-hand side, maybe with a reduction."""
        rng = self.rng
        if t in INTS + FLOATS and rng.random() < 0.6:
            reduction = self.reduction(t, scope)
            if reduction is not None:
                rest = self.expr(t, scope, 1)
                return f"({reduction} {rng.choice(('+', '-', '*'))} {rest})"
        return self.expr(t, scope, self.max_depth)

    def reduction(self, t: str, scope: Scope) -> str | None:
        """sum/max/min over a new index `r` that a load of some tensor uses."""
        rng = self.rng
        candidates = [x for x in self.tensors if x.value_type == t]
        if not candidates:
            return None
        x = rng.choice(candidates)
        axis = rng.randrange(len(x.dims))
        r = self.fresh("r")
        inner = scope.child()
        inner.index_names[r] = x.dims[axis]
        parts = []
        for k, d in enumerate(x.dims):
            if k == axis:
                parts.append(r)
            else:
                parts.append(self.index_for(d, inner))
        load = f"{x.name}[{', '.join(parts)}]"
        ops = ("sum", "max", "min") if not self.smooth else ("sum",)
        other = self.expr(t, inner, 1)
        return f"{rng.choice(ops)}({load} {rng.choice(('+', '*'))} {other})"

    # ------------------------------------------------------------------ indices

    def indices(self, t: Tensor, scope: Scope) -> str | None:
        """In-bounds indices of `t` here, or None (an output a parallel body may not touch)."""
        parts = [self.index_for(d, scope) for d in t.dims]
        par = scope.parallel
        if t.output and par is not None and scope.index_names is None:
            axes = [k for k, d in enumerate(t.dims) if d == par.dim]
            if not axes:
                return None
            # Always the same axis: iteration p then touches only elements whose
            # index there is p, so no two iterations share one.
            parts[axes[0]] = par.name
        return ", ".join(parts)

    def index_for(self, dim, scope: Scope) -> str:
        rng = self.rng
        if scope.index_names is not None:
            names = [n for n, d in scope.index_names.items() if d == dim]
            if names and rng.random() < 0.9:
                return rng.choice(names)
        loops = [lp for lp in scope.loops if lp.dim == dim]
        if loops and rng.random() < 0.85:
            v = rng.choice(loops).name
            return rng.choice([v, v, f"({v} + {rng.randint(1, 3)}) % {dim}", f"{dim} - 1 - {v}",
                               f"min({v}, {dim} - 1)"])
        if isinstance(dim, int):
            return str(rng.randrange(dim))
        return rng.choice(["0", f"{dim} - 1", f"{rng.randint(0, 9)} % {dim}"])

    # ------------------------------------------------------------------ expressions

    def binops(self, t: str) -> tuple:
        if t in INTS:
            return INT_BINOPS
        return SMOOTH_BINOPS if self.smooth else FLOAT_BINOPS

    def expr(self, t: str, scope: Scope, depth: int) -> str:
        if depth <= 0 or self.rng.random() < 0.25:
            return self.leaf(t, scope)
        if t == "bool":
            return self.bool_expr(scope, depth)
        return self.number_expr(t, scope, depth)

    def bool_expr(self, scope: Scope, depth: int) -> str:
        rng = self.rng
        form = rng.randrange(5)
        if form == 0:
            return f"({self.expr('bool', scope, depth - 1)} {rng.choice(('and', 'or'))} " \
                   f"{self.expr('bool', scope, depth - 1)})"
        if form == 1:
            return f"(not {self.expr('bool', scope, depth - 1)})"
        if form == 2:
            return f"({self.expr('bool', scope, depth - 1)} if {self.expr('bool', scope, depth - 1)} " \
                   f"else {self.expr('bool', scope, depth - 1)})"
        s = rng.choice(INTS) if self.exact or self.smooth else self.pick_type()
        return f"({self.expr(s, scope, depth - 1)} {rng.choice(COMPARISONS)} {self.expr(s, scope, depth - 1)})"

    def number_expr(self, t: str, scope: Scope, depth: int) -> str:
        rng = self.rng
        sub = depth - 1
        form = rng.randrange(9)
        if form <= 2:
            op = rng.choice(self.binops(t))
            right = self.expr(t, scope, sub)
            if op == "/" and self.smooth:
                right = f"(abs({right}) + {t}(1))"
            if rng.random() < 0.2:  # a weak literal meets a typed operand
                right = "3" if t in INTS else "0.5"
            return f"({self.expr(t, scope, sub)} {op} {right})"
        if form == 3:
            signed = t in FLOATS or t.startswith("i")
            op = rng.choice(["-", "abs"] if signed else ["~"]) if t in INTS or signed else "-"
            if t in INTS and rng.random() < 0.5:
                op = "~"
            inner = self.expr(t, scope, sub)
            return f"abs({inner})" if op == "abs" else f"({op}{inner})"
        if form == 4:
            return f"{rng.choice(('min', 'max'))}({self.expr(t, scope, sub)}, {self.expr(t, scope, sub)})"
        if form == 5:
            return f"({self.expr(t, scope, sub)} if {self.expr('bool', scope, sub)} else {self.expr(t, scope, sub)})"
        if form == 6:
            return self.cast(t, scope, sub)
        if form == 7 and t in FLOATS:
            return self.float_call(t, scope, sub)
        if form == 7 and self.helpers and scope.index_names is None:
            call = self.helper_call(scope, sub)
            if call is not None:
                return f"{t}({call})" if not self.exact or True else call
        return self.leaf(t, scope)

    def cast(self, t: str, scope: Scope, depth: int) -> str:
        if self.exact:
            s = self.rng.choice(INTS + ("bool",))
        elif self.smooth and t in FLOATS:
            s = self.rng.choice(INTS + FLOATS)
        elif self.smooth:
            s = self.rng.choice(INTS + ("bool",))
        else:
            s = self.rng.choice(self.types())
        return f"{t}({self.expr(s, scope, depth)})"

    def float_call(self, t: str, scope: Scope, depth: int) -> str:
        rng = self.rng
        if rng.random() < 0.3:
            args = ", ".join(self.expr(t, scope, depth) for _ in range(3))
            return f"fma({args})"
        if rng.random() < 0.15:
            return f"({self.expr(t, scope, depth)} ** {rng.choice((2, 3))})"
        names = ("sqrt", "abs") if self.smooth else FLOAT_CALLS
        name = rng.choice(names)
        inner = self.expr(t, scope, depth)
        if name == "sqrt" and self.smooth:
            inner = f"abs({inner})"
        return f"{name}({inner})"

    def helper_call(self, scope: Scope, depth: int) -> str | None:
        usable = [h for h in self.helpers
                  if not self.exact or all(pt in INTS for _, pt in h.params) and h.returns in INTS]
        if self.smooth:
            usable = []
        if not usable:
            return None
        h = self.rng.choice(usable)
        return f"{h.name}({', '.join(self.expr(pt, scope, depth) for _, pt in h.params)})"

    def leaf(self, t: str, scope: Scope) -> str:
        rng = self.rng
        options = []
        for x in self.tensors:
            if x.value_type == t:
                idx = self.indices(x, scope)
                if idx is not None:
                    options.append(f"{x.name}[{idx}]")
        options += [n for n, st in self.scalars.items() if st == t]
        options += [n for n, lt in scope.locals.items() if lt == t]
        if t == "i64":
            options += [lp.name for lp in scope.loops] + list(scope.index_names or ())
        if options and rng.random() < 0.8:
            return rng.choice(options)
        return self.literal(t)

    def literal(self, t: str) -> str:
        rng = self.rng
        if t == "bool":
            return rng.choice(("True", "False"))
        if t in FLOATS:
            return f"{t}({rng.choice(('0.5', '1.0', '2.0', '0.25', '3.0', '1e-3', '-1.5'))})"
        bits, signed = BITS[t], t.startswith("i")
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        value = rng.choice([0, 1, 2, 3, 7, lo, hi, rng.randint(lo, hi)])
        return f"{t}({value})"


DIMS_NAMES = ("a", "b", "c")


def programs(**kwargs):
    """A hypothesis strategy of program texts (shrinks through its random choices).

        >>> @given(programs(exact=True))       # doctest: +SKIP
        ... def test_compiles(text): ...
    """
    from hypothesis import strategies as st

    return st.randoms(use_true_random=False).map(lambda rng: ProgramGen(rng, **kwargs).program().text)


def generate(seed: int, **kwargs) -> str:
    """The text of the program drawn from `seed`."""
    return ProgramGen(random.Random(seed), **kwargs).program().text
