"""The views `dsl.ops` wrappers build without numpy's slower helpers:
`merge_axes` (by reshape), `strided` (one `np.ndarray` on a contiguous
buffer), `address` (read from the array object), and `call_plans` (kernel
calls recorded once, replayed on new operands), each against what numpy's
own functions give."""

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from dsl.ops.arrays import address, merge_axes, strided, view_as
from dsl.ops.call_plans import record


def test_address_is_numpys_data_pointer():
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    readonly = np.frombuffer(bytes(range(16)), np.uint8)
    for a in (base, base[1:, ::-1, 2:], base.T, base[:, :0], np.zeros(0, np.float32), readonly[3:],
              np.array(1.5, np.float32), base.view(np.uint8)[5:]):
        assert address(a) == a.__array_interface__["data"][0], (a.shape, a.strides)


def test_merge_axes_merges_where_every_array_allows():
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    b = np.empty((2, 3, 4, 5), np.float32)[:, :, :, :]
    m, n = merge_axes([a, b], 3)
    assert m.shape == (24, 5) and n.shape == (24, 5) and np.shares_memory(m, a)
    s = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)[:, :3]  # axes 1, 2 merge; 0, 1 no longer
    m, n = merge_axes([s, np.empty((4, 3, 5), np.float32)], 3)
    assert m.shape == (4, 15) and n.shape == (4, 15) and np.array_equal(m.reshape(4, 3, 5), s)
    assert merge_axes([a.transpose(1, 0, 2, 3)], 3)[0].shape == (3, 2, 4, 5)  # nothing merges
    one = merge_axes([np.ones((1, 1, 7))], 2)[0]
    assert one.shape == (1, 7)


def test_view_as_never_copies():
    a = np.arange(12.0).reshape(3, 4).T
    with pytest.raises(ValueError):
        view_as(a, (12,))  # would need a copy
    assert np.shares_memory(view_as(a, (2, 2, 3)), a)


@pytest.mark.parametrize("writeable", [True, False])
def test_strided_matches_as_strided(writeable):
    base = np.arange(10 * 12, dtype=np.float64).reshape(10, 12)
    cases = [(base, (8, 3, 12), (96, 96, 8)),  # overlapping windows inside base
             (base[2:], (3, 3, 2, 2), (192, 16, 96, 8)),  # a contiguous view: its own buffer
             (base[:, 1:], (9, 11), (96, 8)),  # not contiguous: as_strided
             (base[2:4], (4, 12), (96, 8))]  # reaches past the view's elements: as_strided
    for a, shape, strides in cases:
        got = strided(a, shape, strides, writeable=writeable)
        want = as_strided(a, shape, strides, writeable=writeable)
        assert np.array_equal(got, want) and got.strides == want.strides
        assert got.flags.writeable == want.flags.writeable
    frozen = base.copy()
    frozen.flags.writeable = False
    assert not strided(frozen, (2, 2), (96, 8)).flags.writeable
    view = strided(base, (2, 2), (96, 8))
    view[1, 1] = -1.0
    assert base[1, 1] == -1.0


class _Lib:
    """A kernel library stand-in that adds its first argument into its second."""

    def add_into(self, x, y):
        y += x


def test_a_replayed_plan_makes_the_recorded_calls_on_new_operands():
    x, y = np.arange(24.0).reshape(4, 6), np.zeros((4, 6))

    def run(lib):
        lib.add_into(x[1:3, ::2], y[::2, 1:4])
        lib.add_into(x[3], y[3])

    plan = record(run, (x, y))
    assert [step[0] for step in plan.steps] == ["add_into", "add_into"] and not y.any()  # recorded, not run
    x2, y2 = np.arange(24.0).reshape(4, 6) * 2, np.ones((4, 6))
    plan.run(_Lib(), (x2, y2))
    want = np.ones((4, 6))
    want[::2, 1:4] += x2[1:3, ::2]
    want[3] += x2[3]
    assert np.array_equal(y2, want)
    with pytest.raises(ValueError):
        record(lambda lib: lib.add_into(np.zeros(3), y), (x, y))  # views neither operand
