"""`permute`'s transposes of pixels of 2, 3 or 4 channels and planes
(an image's HWC and CHW, complex numbers' (re, im) pairs and planes), by the
kernels of `stdlib/channels.tk`: whole registers of pixels, the channels
shuffled in and out, where the 16 x 16 tiles need both axes 16 long.
"""

from __future__ import annotations

import numpy as np

from .arrays import strided

CHANNELS = (2, 3, 4)
_REGISTER = 64  # bytes of one channel per kernel step: `L` pixels (channels.tk)


def channels(lib, t: str, src: np.ndarray, dst: np.ndarray) -> int:
    """dst = src for [P, A, B] views (src contiguous along A, dst along B) by
    `lib`'s interleave/deinterleave kernels, when A (the planes into pixels)
    or B (pixels into planes) is a count of channels and the other side's
    pixels lie end to end. Returns how many of the pixels it did: 0 when
    it does not apply; the rest are left to the caller."""
    size = src.itemsize
    lanes = _REGISTER // size
    planes, a, b = src.shape
    if a in CHANNELS and src.strides[2] == a * size:  # pixels of src into planes of dst
        count = b - b % lanes
        if count:
            x = strided(src, (planes, count // lanes, a * lanes), (src.strides[0], a * lanes * size, size))
            y = strided(dst, (planes, a, count // lanes, lanes), (dst.strides[0], dst.strides[1], lanes * size, size))
            getattr(lib, f"deinterleave{a}_{t}")(x, y)
        return count
    if b in CHANNELS and dst.strides[1] == b * size:  # planes of src into pixels of dst
        count = a - a % lanes
        if count:
            x = strided(src, (planes, b, count // lanes, lanes), (src.strides[0], src.strides[2], lanes * size, size))
            y = strided(dst, (planes, count // lanes, b * lanes), (dst.strides[0], b * lanes * size, size))
            getattr(lib, f"interleave{b}_{t}")(x, y)
        return count
    return 0
