"""C library names a kernel may not take: LLVM may emit calls to any of them."""

from __future__ import annotations

_MATH = """
acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 exp10 expm1
frexp ldexp log log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf
erfc lgamma tgamma ceil floor nearbyint rint lrint llrint round lround llround roundeven
trunc fmod remainder remquo copysign nan nextafter nexttoward fdim fmax fmin fma ilogb
sincos fminimum fmaximum
""".split()

_OTHER = "memcpy memmove memset memcmp bzero abort exit malloc free calloc realloc".split()

RESERVED_NAMES = frozenset(
    [*_MATH, *(f + "f" for f in _MATH), *(f + "l" for f in _MATH), *_OTHER]
)
