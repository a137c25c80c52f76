"""The shuffle rounds of transpose_loads: for every register width and lane
size they transpose (the columns come out in a known order), and on a
16 x 16 block of 32-bit elements they are x86's in-lane unpacks followed by
whole-lane moves, the shapes LLVM selects vpunpck* and vshufi64x2 for."""

import itertools

import pytest

from dsl.lowering.transforms.transpose_loads import _column_order, _round_masks


@pytest.mark.parametrize("n, lane", [(n, lane) for n in (2, 4, 8, 16, 32, 64) for lane in (1, 2, 4, 8, 16)
                                     if lane <= n])
def test_rounds_transpose_every_block(n, lane):
    rounds = _round_masks(n, lane)
    assert len(rounds) == n.bit_length() - 1
    for low, high in rounds:
        assert sorted(low + high) == list(range(2 * n))  # every element of the pair kept once
    order = _column_order(n, rounds)  # asserts the result is a transpose
    assert sorted(order) == list(range(n))


def test_16_by_16_of_32_bit_elements_are_unpacks_then_lane_moves():
    rounds = _round_masks(16, 4)
    unpack_low_32 = tuple(itertools.chain.from_iterable((b, 16 + b, b + 1, 17 + b) for b in range(0, 16, 4)))
    unpack_low_64 = tuple(itertools.chain.from_iterable((b, b + 1, 16 + b, 17 + b) for b in range(0, 16, 4)))
    even_lanes = (0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27)
    assert rounds[0][0] == unpack_low_32
    assert rounds[1][0] == unpack_low_64
    assert rounds[2][0] == rounds[3][0] == even_lanes
    assert _column_order(16, rounds) == [0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15]
