"""The range of each free index: the dimension it indexes where it stands alone."""

from __future__ import annotations

from .. import ir
from ..types import I64
from .exprs import strip_qualifier
from .inline import _dim_text as _describe
from .inline import _dim_expr, same_dim
from .quant_access import field_dims, split_target


def _quant_dims(param, field):
    dims = field_dims(param, field)
    return None if dims is None else tuple(_dim_expr(d) for d in dims)


def index_extents(ck, plan) -> dict:
    """(owner, index name) -> extent expression, or None after reporting why not."""
    out: dict = {}
    for owner, names in plan.owned.items():
        for name in names:
            out[(owner, name)] = _extent(ck, plan, owner, name)
    return out


def _extent(ck, plan, owner, name):
    uses = plan.uses.get((owner, name), [])
    found = None
    first = None
    for use in uses:
        tensor_name = strip_qualifier(use.tensor)
        tensor = ck.frame.lookup_tensor(tensor_name)
        quantized = split_target(ck.frame, use.tensor)
        if quantized is not None:
            tensor, tensor_name = quantized[0], None
        if tensor is None:
            return None  # reported when the subscript is checked
        dims = ck.frame.dims_of(tensor_name) if tensor_name else _quant_dims(*quantized)
        if dims is None and quantized is not None:
            return None  # an unknown field, reported by the subscript
        if dims is None:
            dims = tuple(ir.Const(d, I64) if isinstance(d, int) else ir.Var(d) for d in tensor.dims)
        if use.axis >= len(dims):
            return None  # a rank error, reported by the subscript
        dim = dims[use.axis]
        if found is None:
            found, first = dim, use
        elif not same_dim(found, dim):
            ck.bag.error(use.span, f"index '{name}' ranges over {_describe(found)} ('{first.tensor}' axis "
                         f"{first.axis}) and over {_describe(dim)} ('{use.tensor}' axis {use.axis})",
                         "give both axes the same dim name")
            return None
    if found is None:
        span = plan.first_span.get((owner, name))
        ck.bag.error(span, f"cannot infer the range of index '{name}'",
                     "use it alone as an index of some tensor, e.g. W[r, s]")
        return None
    return found
