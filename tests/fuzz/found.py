"""Crashes the fuzzer found, each fixed in the compiler and kept as a
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
]
