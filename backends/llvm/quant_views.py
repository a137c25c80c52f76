"""The field views of quantized tensor arguments (`lowering/quant.py`).

A quantized argument arrives as its block bytes, its sizes in values and its
strides in blocks (the last one, between the blocks of a row, is 1 by
definition and not read). Each field view is computed once at entry: data at
the field's byte offset, the parent's axes with strides scaled to the field's
elements, the block axis (size / block values, stride one block), then the
values inside the block (stride 1).
"""

from __future__ import annotations



from .context import FunctionContext, TensorArgs, row_major_strides
from .ltypes import I8, I64, int_const


def bind_views(cx: FunctionContext) -> None:
    """Give `cx` a `TensorArgs` for every view the kernel made of its quantized tensors."""
    for param in cx.kernel.tensors:
        if param.quant is None:
            continue
        parent = cx.tensors[param]
        for view in param.quant.views.values():
            cx.tensors[view] = _view_args(cx, parent, view)


def _view_args(cx: FunctionContext, parent: TensorArgs, view) -> TensorArgs:
    bld = cx.builder
    fmt, fld = parent.param.quant.fmt, view.view.field
    per_block = fmt.nbytes // fld.dtype.itemsize  # exact for every format (checked by tests)
    data = bld.gep(parent.data, [int_const(I64, fld.offset)], inbounds=False, source_etype=I8)
    blocks = bld.sdiv(parent.sizes[-1], int_const(I64, fmt.block))
    sizes = list(parent.sizes[:-1]) + [blocks]
    strides = [bld.mul(s, int_const(I64, per_block)) for s in parent.strides[:-1]] + [int_const(I64, per_block)]
    inner = [d for d in view.dims[len(sizes):]]
    sizes += [int_const(I64, d) for d in inner]
    strides += [int_const(I64, d) for d in row_major_strides(inner)]
    return TensorArgs(view, data, sizes, strides)



