"""Quantized tensor parameters (`w: q4_k[N, K]`) and their accesses.

    w[n, k]          the dequantized f32 value
    w.q[n, s, l]     level l of group s; w.scale[n, s], w.min[n, s]: its scale and min
    w.d[n, b], w.qs[n, b, i], w.blocks[n, b, byte], ...   the raw block fields

`lowering/quant.py` builds the loads and arithmetic; this module checks names,
ranks and the block-size rule, and says what each field's dims are (for the
ranges of free indices in index notation).
"""

from __future__ import annotations

from dsl.grammar import ast
from dsl.grammar.diagnostics import DiagnosticBag, did_you_mean

from .. import ir
from ..quant import FORMATS, Access, Quantized, view
from ..types import I64, U8, value_type
from .coerce import TExpr

COMPUTED = ("q", "scale", "min")


def quant_param(p: ast.Param, fmt_name: str, shape: list, writes, dims: dict,
                bag: DiagnosticBag) -> ir.TensorParam | None:
    """The u8 parameter of `p: q4_k[...]`, or None after reporting why not."""
    fmt = FORMATS[fmt_name]
    if p.name in writes:
        bag.error(p.span, f"'{p.name}' is a quantized tensor ({fmt_name}): kernels read it, they cannot store into it")
        return None
    last, last_node = shape[-1], p.annotation.dims[-1]
    if isinstance(last, int) and last % fmt.block:
        bag.error(last_node.span, f"'{p.name}': the last dim of a {fmt_name} tensor is a whole number of "
                  f"{fmt.block}-value blocks; {last} is not a multiple of {fmt.block}")
        last = shape[-1] = last - last % fmt.block  # reported; checking goes on with whole blocks

    def divided(divisor: int):
        if isinstance(last, int):
            return last // divisor
        return dims.setdefault(f"{last.name}/{divisor}", ir.Sym(f"{last.name}/{divisor}", I64, "dim"))

    quant = Quantized(fmt, divided(fmt.block), divided(fmt.group))
    return ir.TensorParam(p.name, U8, tuple(shape), False, p.span, quant=quant)


def split_target(frame, ident: str) -> tuple[ir.TensorParam, str | None] | None:
    """(quantized parameter, field or None) when `ident` names one (`w`, `w.qs`)."""
    base, _, attr = ident.partition(".")
    tensor = frame.lookup_tensor(base)
    if tensor is None or tensor.quant is None:
        return None
    return tensor, (attr or None)


def field_dims(param: ir.TensorParam, name: str | None) -> tuple | None:
    """The dims of `param` or of one of its fields, as `TensorParam.dims` holds them."""
    q = param.quant
    outer = param.dims[:-1]
    if name is None:
        return param.dims
    if name == "q":
        return outer + (q.groups_dim, q.fmt.group)
    if name in ("scale", "min"):
        return outer + (q.groups_dim,)
    if q.fmt.field(name) is None:
        return None
    return view(param, name).dims


def load(ck, node: ast.Subscript, param: ir.TensorParam, name: str | None) -> TExpr | None:
    """The typed expression of `param[...]` or `param.name[...]`."""
    fmt = param.quant.fmt
    shown = param.name if name is None else f"{param.name}.{name}"
    if name is not None and (name not in fmt.names or (name == "min" and not fmt.has_min)):
        hint = " (q6_k, q8_0 and q8_k blocks have no min: a value is scale * q)" if name == "min" else ""
        ck.bag.error(node.value.span, f"a {fmt.name} tensor has no field '{name}'{hint}",
                     *did_you_mean(name, fmt.names), f"fields of {fmt.name}: {', '.join(fmt.names)}")
        return None
    dims = field_dims(param, name)
    if len(node.indices) != len(dims):
        ck.bag.error(node.span, f"'{shown}' has rank {len(dims)} but is indexed with {len(node.indices)} "
                     f"{'index' if len(node.indices) == 1 else 'indices'}")
        return None
    idx = [ck.index(i, f"index {k} of '{shown}'") for k, i in enumerate(node.indices)]
    if any(i is None for i in idx):
        return None
    if name is not None and name not in COMPUTED:
        t = view(param, name)
        return TExpr(ir.Load(t, tuple(idx), value_type(t.dtype), node.span))
    rank = param.rank
    access = Access(param, tuple(idx[:rank - 1]), node.span)
    match name:
        case None:
            return TExpr(access.value(idx[-1]))
        case "q":
            return TExpr(access.level(idx[-2], idx[-1]))
        case "scale":
            return TExpr(access.scale(idx[-1]))
    return TExpr(access.min(idx[-1]))
