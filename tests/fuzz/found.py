"""Crashes the fuzzer (or a probe of its mutation kinds) found, each fixed in the compiler and kept as a
regression test. `reliability_report.py` lists them in RELIABILITY.md.

    (what failed, how it showed, the fix, the regression test)
"""

FOUND = [
    ("a cast of an integer literal that does not fit its type, used as an operand: `max(i32(2**63), x)`",
     "internal error (AttributeError) in the type checker",
     "lowering/typecheck/exprs.py: the cast returns no value after reporting the literal",
     "tests/golden/errors/fuzz_cast_literal.tk"),
    ("a cast of an infinite float literal to an integer type: `i32(1e400)`",
     "internal error (OverflowError) in the type checker",
     "lowering/typecheck/exprs.py: located error 'float literal inf has no i32 value'",
     "tests/golden/errors/fuzz_cast_literal.tk"),
    ("a schedule factor beyond i64: `split(i, 10**20)`",
     "internal error (VerifyError: constant does not fit in i64) after the split (found by a hand-made "
     "huge-literal probe, not by the random campaign)",
     "lowering/schedule.py: directive integers are at most 2**31 - 1, a located error otherwise",
     "tests/golden/errors/fuzz_schedule_huge.tk"),
    ("a huge micro-tile: `contract(m, mr=1000, nr=1000)`",
     "the compile ran for minutes building a million accumulators (found by the same probe; the campaign "
     "found it too: program 623 of seed 1, `nr=2**64`, hung its worker; programs 2912 and 6692, "
     "split factors 2**63 and ~2**1200, gave the VerifyError above)",
     "lowering/schedule.py: mr * nr at most 1024 elements, a located error otherwise",
     "tests/golden/errors/fuzz_schedule_huge.tk"),
    ("vectorizing the loop around an already vectorized one: `vectorize(b, 16), vectorize(a, 8)`",
     "internal error (VerifyError: store operands with lane counts 8 and 16); differential case d573 of seed 1",
     "lowering/transforms/vectorize.py: refused with a located error when a loop inside is vectorized",
     "tests/golden/errors/fuzz_vectorize_twice.tk"),
]
