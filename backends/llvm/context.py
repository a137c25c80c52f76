"""The state of generating one kernel function: builder, variable slots, tensors.

Every non-argument `Sym` gets an `alloca` in the entry block the first time it
is used, so definitions need not dominate uses; mem2reg/SROA make them SSA. A
vector local (`Sym.lanes > 1`) gets a `<lanes x T>` slot.

Every return goes through one exit block (`return_status`), which releases
the scratch buffers the function allocated (scratch.py) on every path, failed
checks included.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from dsl.lowering.ir import Kernel, Sym, TensorParam

from ..errors import BackendError
from .ltypes import I32, PTR, reg_type, with_lanes


@dataclass
class TensorArgs:
    """The LLVM values describing one tensor argument."""

    param: TensorParam
    data: ir.Value
    sizes: list[ir.Value]
    strides: list[ir.Value]


def row_major_strides(dims) -> list[int]:
    """Element strides of a C-contiguous array of int `dims`: [rows, 1] for 2-D."""
    out, step = [], 1
    for d in reversed(dims):
        out.insert(0, step)
        step *= d
    return out


class FunctionContext:
    """Everything the expression and statement emitters share for one kernel.

    `in_parallel` is set in the outlined body of a parallel loop (parallel.py):
    a parallel loop nested there forks a team only when called outside one,
    and a failed Check's `ret` returns to the team function, which records the
    status for the kernel.
    """

    in_parallel = False

    def __init__(self, func: ir.Function, kernel: Kernel, body: tuple | None = None, sign_masks: bool = False):
        self.func = func
        self.kernel = kernel
        self.sign_masks = sign_masks  # masked loads as x86 AVX's, by lane signs (vector_memory.py)
        self.body = kernel.body if body is None else body  # the kernel's, as this copy emits it
        self.module: ir.Module = func.module
        entry = func.append_basic_block("entry")
        self.alloca_builder = ir.IRBuilder(entry)
        self.body_start = func.append_basic_block("start")
        self.builder = ir.IRBuilder(self.body_start)
        self.slots: dict[Sym, ir.AllocaInstr] = {}
        self._values: dict[tuple[ir.Block, Sym], ir.Value] = {}  # what load_var reuses
        self._made: dict[tuple, tuple[ir.Value, ...]] = {}  # what `reuse` reuses
        self.tensors: dict[TensorParam, TensorArgs] = {}
        self.fail_blocks: dict[int, ir.Block] = {}
        # scratch buffer -> (pointer slot, null until allocated; the site's cache global)
        self.scratch_slots: dict[TensorParam, tuple[ir.AllocaInstr, ir.GlobalVariable]] = {}
        self.local_arrays: dict[TensorParam, ir.AllocaInstr] = {}  # local_arrays.py
        self.realigned: dict[TensorParam, TensorParam] = {}  # input -> its copy's buffer (realign.py)
        self.float_bounds: list[tuple] = []  # (x, c): abs(x) < c holds here (exprs._guarded)
        self.streamed = False  # made a non-temporal store (streaming.py)
        self.stream_threshold: ir.Value | None = None
        self._exit: tuple[ir.Block, ir.PhiInstr] | None = None
        opts = kernel.options
        self.fmf: tuple[str, ...] = (("contract",) if opts.contract else ()) + (("reassoc",) if opts.reassociate else ())

    def slot(self, sym: Sym) -> ir.AllocaInstr:
        """The stack slot of `sym`, created in the entry block on first use."""
        slot = self.slots.get(sym)
        if slot is None:
            typ = with_lanes(reg_type(sym.type), sym.lanes)
            slot = self.alloca_builder.alloca(typ, name=sym.name)
            slot.type = PTR  # llvmlite would print a typed pointer (`float*`)
            self.slots[sym] = slot
        return slot

    def load_var(self, sym: Sym) -> ir.Value:
        """The value of `sym` at the builder's position: its slot is loaded once
        a block, or the value stored there earlier in the block is taken, so
        the IR LLVM parses is smaller (mem2reg would make it the same).
        Sound because slots never escape and every store to them goes
        through `store_var`."""
        key = (self.builder.block, sym)
        value = self._values.get(key)
        if value is None:
            slot = self.slot(sym)
            value = self._values[key] = self.builder.load(slot, typ=slot.allocated_type)
        return value

    def store_var(self, sym: Sym, value: ir.Value) -> None:
        """Store `value` in `sym`'s slot (the one way slots are written)."""
        self.builder.store(value, self.slot(sym))
        self._values[(self.builder.block, sym)] = value

    def reuse(self, op: str, a: ir.Value, b: ir.Value, make) -> ir.Value:
        """`make()`, a pure instruction `op` on a and b (e.g. 'mul nsw'), or
        the one made for the same operands earlier in this block (the index
        arithmetic of an unrolled tile repeats itself: matmul_f32's IR has
        a fifth fewer lines)."""
        key = (self.builder.block, op, _operand_key(a), _operand_key(b))
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = (make(), a, b)  # the operands kept alive: their ids are keys
        return found[0]

    def tensor(self, param: TensorParam) -> TensorArgs:
        """The pointer, sizes and strides of a tensor parameter."""
        try:
            return self.tensors[param]
        except KeyError:
            raise BackendError(f"{self.kernel.name}: tensor {param.name} is not a parameter") from None

    def fail_block(self, code: int) -> ir.Block:
        """A block returning `code + 1` (the status of a failed Check), shared per code."""
        block = self.fail_blocks.get(code)
        if block is None:
            block = self.func.append_basic_block(f"check{code}.fail")
            self._jump_to_exit(ir.IRBuilder(block), ir.Constant(I32, code + 1))
            self.fail_blocks[code] = block
        return block

    def return_status(self, status: ir.Value) -> None:
        """End the current block: return the i32 `status` (through the exit block)."""
        self._jump_to_exit(self.builder, status)

    def _jump_to_exit(self, bld: ir.IRBuilder, status: ir.Value) -> None:
        if self._exit is None:
            block = self.func.append_basic_block("exit")
            self._exit = (block, ir.IRBuilder(block).phi(I32, name="status"))
        block, phi = self._exit
        phi.add_incoming(status, bld.block)
        bld.branch(block)

    def new_block(self, name: str) -> ir.Block:
        """A new basic block at the end of the function."""
        return self.func.append_basic_block(name)

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """Get or declare an intrinsic or a (pure) libm function `name`."""
        existing = self.module.globals.get(name)
        if existing is not None:
            if not isinstance(existing, ir.Function) or existing.ftype != ir.FunctionType(ret, args):
                raise BackendError(f"symbol {name!r} clashes with a function the back-end needs")
            return existing
        fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        fn.attributes.add("nounwind")
        if not name.startswith("llvm."):
            # libm's erf never touches errno or memory.
            fn.attributes.add("readnone")
        return fn

    def intrinsic(self, base: str, typ: ir.Type, nargs: int) -> ir.Function:
        """An overloaded LLVM intrinsic on one type, e.g. ('llvm.exp', float, 1)."""
        return self.declare(f"{base}.{intrinsic_suffix(typ)}", typ, [typ] * nargs)

    def finish(self) -> None:
        """Close the entry block with a jump to the body; release scratch and return at the exit."""
        self.alloca_builder.branch(self.body_start)
        if self._exit is None:
            return
        block, phi = self._exit
        bld = ir.IRBuilder(block)
        bld.position_at_end(block)
        if self.scratch_slots:
            from .scratch import release_all  # scratch.py builds on this module

            release_all(self, bld)
        if self.streamed:
            from .streaming import finish_streaming  # as scratch.py

            finish_streaming(self, bld)
        bld.ret(phi)


def intrinsic_suffix(typ: ir.Type) -> str:
    """The overload suffix of an intrinsic name: f32, f64, f16, i32, v8f32, v8p0, ...

    >>> intrinsic_suffix(ir.VectorType(ir.FloatType(), 8))
    'v8f32'
    """
    if isinstance(typ, ir.VectorType):
        return f"v{typ.count}{intrinsic_suffix(typ.element)}"
    if isinstance(typ, ir.PointerType):
        return "p0"
    if isinstance(typ, ir.FloatType):
        return "f32"
    if isinstance(typ, ir.DoubleType):
        return "f64"
    if isinstance(typ, ir.HalfType):
        return "f16"
    return f"i{typ.width}"


def _operand_key(value: ir.Value):
    """A constant by its text (llvmlite makes a new object for each), any
    other value by identity."""
    return str(value) if isinstance(value, ir.Constant) else id(value)
