"""`dsl.ops.contract`: tensor contractions in einsum notation, compiled.

    c = dsl.ops.contract("bmk,bkn->bmn", a, b)
    y = dsl.ops.contract("acdf,bcef->abde", x, w, first_touch="zero", last_touch="relu")
    z = dsl.ops.contract("...mk,...kn->...mn", a, b)     # batch axes broadcast, as numpy.einsum

The op writes one kernel in index notation for the spec and the operands'
layouts, and compiles it once (`generated.py`). How the indices are laid out
in that kernel decides what the compiler makes of it (the seeds' tensor
backend): of two operands, an output index found in only one operand is M or
N, one in both is a batch index, a summed index is K. The N index with the
smallest stride in the output becomes the micro-kernel's vector axis (C's
last axis in the kernel), an M index of the other operand its rows, the K
index with the smallest stride in the M operand its sum axis; the other K
indices are batch-reduce loops summed into the same C tile (BRGEMM), and the
other output indices loops around it, the outermost of them on all threads.
With no M index and B contiguous along a sum, the kernel is a plain nest
summing along B's rows instead (dot products, vectorized). A permutation of
one operand is `permute`'s blocked copy; a float32 sum of one operand that
keeps its contiguous axis is `dsl.ops.sum`'s.
Operands and the output are passed as transposed views: nothing is copied.

first_touch: None or "zero" (the result replaces `out`, as numpy.einsum), or
"accumulate" (`out` += the result: the seeds' GEMM without a first touch).
last_touch: None, "relu", "gelu", "silu", ("bias", array) (an array that
broadcasts to the output, added), or a list of these applied in order; they
run on each C tile's last visit, inside the micro-kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .arrays import SUFFIX, as_array, check_float_dtype, check_out, finish, kernel_view, writable_target
from .call_plans import remember
from .einsum_ellipsis import expand_ellipsis
from .einsum_text import axes_in_order as _axes, kernel_text
from .generated import generated_library
# Not `from . import reduce`: that asks the package for the name first, and its
# lookup imports `dense`, which imports this module (half made on a first import).
import dsl.ops.reduce as reduce_ops
from .permutation import permute

FIRST_TOUCH = (None, "zero", "accumulate")


def contract(spec: str, *operands, out=None, first_touch=None, last_touch=None) -> np.ndarray:
    """The einsum `spec` of `operands` (float32/float64), into `out` if given.

    >>> a = np.ones((2, 3, 4), np.float32); b = np.ones((2, 4, 5), np.float32)
    >>> dsl.ops.contract("bmk,bkn->bmn", a, b)[0, 0, 0]
    4.0
    """
    quick = _replay_key(spec, operands, out, first_touch, last_touch)
    if quick is not None and (known := _replays.get(quick)) is not None:
        return _replay(known, operands)
    arrays = [as_array("contract", f"operand {i}", x) for i, x in enumerate(operands)]
    spec, arrays = expand_ellipsis(spec, arrays)
    inputs, output = parse_spec(spec, arrays)
    sizes = label_sizes(inputs, arrays)
    if first_touch not in FIRST_TOUCH:
        raise ValueError(f"contract: first_touch must be one of {FIRST_TOUCH}, got {first_touch!r}")
    steps, bias = _last_touch(last_touch)
    dtype = check_float_dtype("contract", *arrays, *([bias] if bias is not None else []))
    shape = tuple(sizes[x] for x in output)
    if out is None:
        if first_touch == "accumulate":
            raise ValueError("contract: first_touch='accumulate' adds to out, which must be given")
    else:
        out = check_out("contract", out, shape, dtype)
    if len(inputs) == 1 and not steps and first_touch != "accumulate" and len(set(inputs[0])) == len(inputs[0]):
        done = _one_operand(inputs[0], output, arrays[0], out)
        if done is not None:
            return done
    viewed = [kernel_view(a, dtype) for a in arrays]
    quick = quick if all(v is a for v, a in zip(viewed, arrays)) else None  # no copies to replay
    arrays = viewed
    bias_term, bias = _compact_bias(bias, shape, output, dtype)
    key = (spec, tuple((a.shape, a.strides) for a in arrays), out is not None and (out.shape, out.strides),
           tuple(steps), first_touch, bias_term, dtype.str)
    found = _plans.get(key)
    if found is None:
        plan = loop_order(inputs, output, arrays, out, loops=not steps)
        text = kernel_text(plan, inputs, output, SUFFIX[dtype], steps, first_touch == "accumulate", bias_term)
        found = _plans[key] = (plan, text)
    plan, text = found
    if out is None:  # laid out so that the kernel writes it in order
        inner = np.empty(tuple(sizes[x] for x in plan.output), dtype)
        out = inner.transpose([plan.output.index(x) for x in output])
    if out.size == 0:
        return out
    target = writable_target(out, *arrays, *([bias] if bias is not None else []))
    if first_touch == "accumulate" and target is not out:
        np.copyto(target, out)
    views = [_view(a, term, plan, last) for a, term, last in zip(arrays, inputs, plan.last)]
    if bias is not None:
        views.append(_view(bias, bias_term, plan) if bias_term else bias)
    kernel = generated_library(text, "contract").contract
    kernel(*views, _view(target, output, plan))
    if quick is not None and target is out:  # a new result (`inner`), written in place
        perms = tuple(_axes(term, plan, last) if term else None for term, last in zip(inputs, plan.last))
        back = tuple(plan.output.index(x) for x in output)
        remember(_replays, quick, _Replay(kernel, perms, inner.shape, back, _axes(output, plan), dtype))
    return finish(target, out)


def _one_operand(term: str, output: str, x: np.ndarray, out) -> np.ndarray | None:
    """A permutation of one operand is permute's blocked copy, which reads and
    writes whole cache lines where a loop nest strides through one side; a
    float32 sum that keeps x's contiguous axis is dsl.ops.sum's, which reads x
    in its memory order (the kernel's `sum()` runs innermost, down columns
    there: bij->ij of 64 x 64 x 256, 1 thread, 3.0 ms against 0.18; bij->bj
    0.71 against 0.13). None for the kernel to do it."""
    axes = tuple(term.index(label) for label in output)
    if len(axes) == len(term):
        return permute(x, axes, out=out)
    inner = _unit_axis(term, x)
    if x.dtype != np.float32 or inner is None or inner not in output:
        return None  # the kernel's sum runs along x's contiguous axis: vectorized
    summed = tuple(i for i, label in enumerate(term) if label not in output)
    kept = [label for label in term if label in output]
    if out is not None:
        reduce_ops.sum(x, axis=summed, out=out.transpose([output.index(label) for label in kept]))
        return out
    return np.asarray(reduce_ops.sum(x, axis=summed)).transpose([kept.index(label) for label in output])


class _Replay(NamedTuple):
    """What a call with a layout seen before needs: its kernel, each operand's
    axes in the kernel's order (None: a rank-0 operand, passed as one
    element), the result's shape as the kernel writes it and the axes that
    turn it into the spec's order, the result's axes in the kernel's order."""

    kernel: object
    perms: tuple
    inner_shape: tuple
    back: tuple
    target_axes: list
    dtype: np.dtype


_replays: dict = {}  # _replay_key -> _Replay
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _replay_key(spec, operands: tuple, out, first_touch, last_touch) -> tuple | None:
    """The key of a call that replays a known plan (~2 us, where checking and
    planning take ~15): a new result (no `out`), no bias, no `...`, operands
    that are aligned numpy arrays of one native float dtype. None otherwise."""
    if out is not None or type(spec) is not str or "." in spec or not operands:
        return None
    if not (last_touch is None or type(last_touch) is str) or first_touch not in (None, "zero"):
        return None
    dtype = getattr(operands[0], "dtype", None)
    if dtype not in _FLOATS or not dtype.isnative:
        return None
    for a in operands:
        if type(a) is not np.ndarray or a.dtype is not dtype or not a.flags.aligned:
            return None
    return (spec, first_touch, last_touch, dtype.char, *[(a.shape, a.strides) for a in operands])


def _replay(known: _Replay, operands: tuple) -> np.ndarray:
    inner = np.empty(known.inner_shape, known.dtype)
    out = inner.transpose(known.back)
    views = [a.transpose(p) if p is not None else a.reshape(1) for a, p in zip(operands, known.perms)]
    known.kernel(*views, out.transpose(known.target_axes) if out.ndim else out.reshape(1))
    return out


_plans: dict = {}  # (spec, layouts, options) -> (Plan, kernel text): the per-call work done once


def _compact_bias(bias, shape: tuple, output: str, dtype) -> tuple[str | None, np.ndarray | None]:
    """The bias with only the output axes along which it varies, and their labels
    (a stride-0 innermost axis would keep the kernel off its unit-stride code)."""
    if bias is None:
        return None, None
    try:
        full = np.broadcast_to(kernel_view(bias, dtype), shape)
    except ValueError:
        raise ValueError(f"contract: the bias of shape {bias.shape} does not broadcast to the output's "
                         f"shape {shape}") from None
    keep = [i for i in range(len(shape)) if shape[i] > 1 and full.strides[i] != 0]
    if not keep:
        return "", np.array(full[(0,) * len(shape)], dtype).reshape(1)
    return "".join(output[i] for i in keep), full[tuple(slice(None) if i in keep else 0 for i in range(len(shape)))]


def parse_spec(spec: str, arrays: list[np.ndarray]) -> tuple[list[str], str]:
    """The input terms and the output term of `spec` (implicit output: the
    labels used once, in alphabetical order, as numpy.einsum)."""
    if not isinstance(spec, str):
        raise TypeError(f"contract: the spec must be a string, got {type(spec).__name__}")
    text = spec.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    inputs = lhs.split(",")
    for label in text.replace(",", "").replace("->", ""):
        if not label.isascii() or not label.isalpha():
            raise ValueError(f"contract: invalid subscript '{label}' in einstein sum subscripts string, "
                             "subscripts must be letters")
    if len(inputs) != len(arrays):
        raise ValueError(f"contract: the spec has {len(inputs)} operand terms, {len(arrays)} operands were given")
    for i, (term, a) in enumerate(zip(inputs, arrays)):
        if len(term) != a.ndim:
            raise ValueError(f"contract: operand {i} has {a.ndim} dimensions, its subscripts '{term}' name {len(term)}")
    if not arrow:
        counts = {x: lhs.count(x) for x in lhs if x != ","}
        return inputs, "".join(sorted(x for x, n in counts.items() if n == 1))
    for label in rhs:
        if rhs.count(label) > 1:
            raise ValueError(f"contract: output subscript '{label}' appears more than once in the output")
        if label not in lhs:
            raise ValueError(f"contract: einstein sum subscripts string included output subscript '{label}' "
                             "which never appeared in an input")
    return inputs, rhs


def label_sizes(inputs: list[str], arrays: list[np.ndarray]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for i, (term, a) in enumerate(zip(inputs, arrays)):
        for label, size in zip(term, a.shape):
            if sizes.setdefault(label, size) != size:
                raise ValueError(f"contract: size of label '{label}' for operand {i} ({size}) does not match "
                                 f"previous terms ({sizes[label]})")
    return sizes


def _last_touch(last_touch) -> tuple[list[str], np.ndarray | None]:
    """The epilogue's steps, in order, and the bias array (if a step adds one)."""
    if last_touch is None:
        return [], None
    items = [last_touch] if isinstance(last_touch, (str, tuple)) else list(last_touch)
    steps, bias = [], None
    for item in items:
        if isinstance(item, tuple) and len(item) == 2 and item[0] == "bias" and bias is None:
            steps.append("bias")
            bias = as_array("contract", "bias", item[1])
        elif item in ("relu", "gelu", "silu"):
            steps.append(item)
        elif item == "bias":
            raise ValueError("contract: last_touch 'bias' needs its array: ('bias', array)")
        else:
            raise ValueError(f"contract: unknown last_touch {item!r} (relu, gelu, silu, ('bias', array), "
                             "or a list of these; one bias at most)")
    return steps, bias


class Plan:
    """The kernel's loop order: output labels (C's axes, outermost first),
    summed labels (outermost first), and the operands in the order written."""

    def __init__(self, output: str, summed: str, written: list[int], last: list[str | None] | None = None,
                 loops: bool = False):
        self.output, self.summed, self.written = output, summed, written
        self.loops = loops  # plain loops adding into C, the sums outside C's last axis (einsum_text.py)
        # Per operand, the label of its innermost axis in the kernel: the vector
        # axis, or the one of unit stride (compiled code is fastest when every
        # tensor's innermost stride is 1; see backends/llvm/versions.py).
        self.last = last or [None] * len(written)

    def rank(self, label: str) -> int:
        order = self.output + self.summed
        return order.index(label) if label in order else len(order)


def loop_order(inputs: list[str], output: str, arrays: list[np.ndarray], out, loops: bool = True) -> Plan:
    """Pick the micro-kernel's axes from strides (see the module's docstring);
    `loops`: whether plain loops adding into C may serve (not with a last touch)."""
    def out_stride(label: str) -> int:  # by position when we make the output
        position = output.index(label)
        return abs(out.strides[position]) if out is not None else len(output) - position

    summed = "".join(dict.fromkeys(x for term in inputs for x in term if x not in output))
    by_stride = sorted(output, key=out_stride, reverse=True)
    last = [_unit_axis(term, a) for term, a in zip(inputs, arrays)]
    if len(inputs) != 2:
        return _sum_plan(by_stride, summed, list(range(len(inputs))), last, inputs, arrays, loops)
    owner = {x: [x in term for term in inputs] for x in output}
    single = [x for x in output if sum(owner[x]) == 1]
    if not single:
        return _sum_plan(by_stride, summed, [0, 1], last, inputs, arrays, loops)
    n = min(single, key=out_stride)
    y = owner[n].index(True)  # the operand with the vector axis ("B")
    x = 1 - y
    m_choices = [lab for lab in single if owner[lab][x]]
    if not m_choices:  # no micro-kernel without M
        return _sum_plan(by_stride, summed, [0, 1], last, inputs, arrays, loops)
    inner = [m_choices and min(m_choices, key=out_stride) or None, n]
    outer = [lab for lab in by_stride if lab not in inner]
    order_out = "".join(outer + [lab for lab in inner if lab])

    def stride_in(term_index: int, label: str) -> int:
        term = inputs[term_index]
        return abs(arrays[term_index].strides[term.index(label)]) if label in term else 0

    both = [lab for lab in summed if lab in inputs[0] and lab in inputs[1]]
    alone = [lab for lab in summed if lab not in both]
    k = min(both, key=lambda lab: stride_in(x, lab)) if both else None
    reduce = sorted((lab for lab in both if lab != k), key=lambda lab: stride_in(x, lab), reverse=True)
    order_sum = "".join(alone + reduce + ([k] if k else []))
    # Summed labels of one operand go first in the nest: write that operand first.
    written = [y, x] if any(lab in inputs[y] for lab in alone) and not any(lab in inputs[x] for lab in alone) \
        else [x, y]
    last[y] = n  # B's vectors run along n
    return Plan(order_out, order_sum, written, last)


def _sum_plan(by_stride: list[str], summed: str, written: list[int], last: list, inputs: list[str],
              arrays: list[np.ndarray], loops: bool) -> Plan:
    """A nest that is no contraction. Its sums innermost (index notation)
    when the largest operand is contiguous along one of them (or along no
    axis): dot products, vectorized. Else plain loops, C's axis along which
    the largest operand is contiguous innermost, the sums
    (largest stride first) around it (bij,bij->bj of 64 x 64 x 256, 1 thread:
    1.9 ms summing down columns)."""
    inner = max(zip(arrays, last), key=lambda pair: pair[0].size)[1]
    if not loops or not summed or inner is None or inner in summed:
        return Plan("".join(by_stride), summed, written, last)

    def stride(label: str) -> int:
        return max(abs(a.strides[term.index(label)]) if label in term else 0 for term, a in zip(inputs, arrays))

    sums = "".join(sorted(summed, key=stride, reverse=True))
    last = [inner if inner in term else lab for term, lab in zip(inputs, last)]
    return Plan("".join([lab for lab in by_stride if lab != inner] + [inner]), sums, written, last, loops=True)


def _unit_axis(term: str, a: np.ndarray) -> str | None:
    """The label of `a`'s axis of unit stride (of more than one element), if any."""
    for label, size, stride in zip(term, a.shape, a.strides):
        if size > 1 and stride == a.itemsize:
            return label
    return None


def _view(a: np.ndarray, term: str, plan: Plan, last: str | None = None) -> np.ndarray:
    """`a` with its axes in the kernel's order (a rank-0 array as one element)."""
    return a.transpose(_axes(term, plan, last)) if term else a.reshape(1)
