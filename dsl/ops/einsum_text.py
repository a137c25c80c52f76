"""The kernel text `dsl.ops.contract` compiles for a spec and a plan
(`einsum.Plan`: C's axes outermost first, the summed labels, the operands
in the order written, each operand's innermost label).

Index notation (`C[...] = sum(...)`) when the sum runs along the operands'
contiguous axis or the nest is a contraction the micro-kernel takes; plain
loops that add into C, the sums outside C's contiguous axis, when the
operands are contiguous along an axis C keeps (bij,bij->bj: the index
form would sum down columns)."""

from __future__ import annotations

HELPERS = {
    "gelu": "def gelu_{t}(x: {t}) -> {t}:\n    return 0.5 * x * (1.0 + erf(x * 0.7071067811865476))\n",
    "silu": "def silu_{t}(x: {t}) -> {t}:\n    return x / (1.0 + exp(-x))\n",
}
ONE = "#"  # the index of a size-1 axis standing in for a rank-0 tensor


def axes_in_order(term: str, plan, last: str | None = None) -> list[int]:
    """`term`'s axes in the kernel's loop order, the `last` label's innermost."""
    return sorted(range(len(term)), key=lambda i: (term[i] == last, plan.rank(term[i])))


def _subscript(term: str, plan, last: str | None = None) -> str:
    labels = [term[i] for i in axes_in_order(term, plan, last)] if term else [ONE]
    return ", ".join(_index(x) for x in labels)


def _index(label: str) -> str:
    return "i_one" if label == ONE else f"i_{label}"


def _dims(term: str, plan, last: str | None = None) -> str:
    labels = [term[i] for i in axes_in_order(term, plan, last)] if term else [ONE]
    return ", ".join("D_one" if x == ONE else f"D_{x}" for x in labels)


def kernel_text(plan, inputs: list[str], output: str, t: str, steps: list[str], accumulate: bool,
                bias_term: str | None) -> str:
    """The kernel in index notation (see the module's docstring)."""
    params = [f"X{i}: {t}[{_dims(term, plan, plan.last[i])}]" for i, term in enumerate(inputs)]
    if bias_term is not None:
        params.append(f"Bias: {t}[{_dims(bias_term, plan) if bias_term else 'D_one'}]")
    params.append(f"C: {t}[{_dims(output, plan)}]")
    c_at = _subscript(output, plan)
    value = " * ".join(f"X{i}[{_subscript(inputs[i], plan, plan.last[i])}]" for i in plan.written)
    if plan.loops:
        return _loops(plan, params, c_at, value, accumulate, any(not term for term in inputs))
    if plan.summed:
        value = f"sum({value})"
    if accumulate:
        value = f"C[{c_at}] + {value}"
    helpers = []
    for step in steps:
        if step == "relu":
            value = f"max({value}, 0.0)"
        elif step == "bias":
            value = f"{value} + Bias[{_subscript(bias_term, plan) if bias_term else '0'}]"
        else:
            value = f"{step}_{t}({value})"
            helpers.append(HELPERS[step].format(t=t))
    head = "".join(dict.fromkeys(helpers))
    # Sums in any order, as numpy.einsum's (SIMD, pairwise) and the micro-kernel's
    # (adding to out starts each sum from out, as BLAS's beta = 1): a sum
    # that is no contraction (a row of dot products, say) vectorizes.
    return f"{head}\n@options(reassociate=True)\ndef contract({', '.join(params)}):\n    C[{c_at}] = {value}\n"


def _loops(plan, params: list[str], c_at: str, value: str, accumulate: bool, rank0: bool) -> str:
    """C's outer axes, then (unless adding to C) its contiguous axis zeroed,
    then the sums around that axis again, adding the product into C."""
    *outer, inner = plan.output
    lines = ["i_one = 0"] if rank0 else []
    depth = 0
    for label in outer:
        lines.append("    " * depth + f"for {_index(label)} in range(D_{label}):")
        depth += 1
    if not accumulate:
        lines += ["    " * depth + f"for {_index(inner)} in range(D_{inner}):", "    " * (depth + 1) + f"C[{c_at}] = 0.0"]
    for label in plan.summed + inner:
        lines.append("    " * depth + f"for {_index(label)} in range(D_{label}):")
        depth += 1
    lines.append("    " * depth + f"C[{c_at}] += {value}")
    body = "".join(f"\n    {line}" for line in lines)
    return f"\n@options(reassociate=True)\ndef contract({', '.join(params)}):{body}\n"
