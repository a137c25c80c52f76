"""Mutations of valid programs: what a fuzzer feeds the front-end after the
well-typed programs (`gen_programs.py`) — broken, truncated, strange text.

    >>> mutate("def k(x: f32[N]):\\n    pass\\n", random.Random(1))   # doctest: +SKIP

Each call applies one to three of: deleting, duplicating, swapping or
replacing tokens; truncating; inserting random bytes or characters; nesting an
expression or a statement hundreds of levels deep; huge or malformed
literals; unicode identifiers and strings.
"""

from __future__ import annotations

import random
import re

TOKEN = re.compile(r"""[A-Za-z_][A-Za-z0-9_]*|\d[\w.]*|"[^"\n]*"|'[^'\n]*'|\*\*|//|<<|>>|[-+*/%&|^<>=!]=|->|\S""")
VOCABULARY = (
    "def", "for", "in", "if", "elif", "else", "return", "pass", "and", "or", "not", "from", "import",
    "True", "False", "None", "while", "lambda", "range", "grid", "pgrid", "sum", "max", "min", "exp",
    "fma", "abs", "f32", "f64", "f16", "i8", "i32", "i64", "u8", "u64", "bool", "q4_k", "@schedule",
    "@options", "split", "tile", "reorder", "unroll", "vectorize", "parallel", "fuse", "hoist", "contract",
    "choice", "one_of", "tail", "mask", "peel", "(", ")", "[", "]", ":", ",", ".", "=", "+=", "**",
    "//", "%", "<<", ">>", "~", "->", "@", "\\", "\t", "\n", "    ", "0", "-1", "1e308", "0x", "1_",
)
STRANGE = ("é", "π", "ｘ", "\u202e", "\u200b", "𝔘", "日本", "\x00", "\x7f", "\ufeff", "ß", "\r", "\x0c",
           "\udcff", "😀", "İ")
HUGE = ("9" * 400, "1e400", "0x" + "f" * 300, "-" + "9" * 40, "1" + "0" * 20, "18446744073709551616",
        "9223372036854775808", "0.000000000000000000000000000000000000000000001", "1e-400", "0b" + "1" * 200,
        "1_000_000_000_000_000_000", "4294967296", "2 ** 63", "2 ** 64", "1 << 100000")


def tokens(text: str) -> list[re.Match]:
    return list(TOKEN.finditer(text))


def mutate(text: str, rng: random.Random) -> str:
    """`text` after one to three random mutations."""
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(text, rng)
    return text


def _pick(text: str, rng: random.Random) -> re.Match | None:
    found = tokens(text)
    return rng.choice(found) if found else None


def delete_token(text: str, rng: random.Random) -> str:
    m = _pick(text, rng)
    return text if m is None else text[:m.start()] + text[m.end():]


def duplicate_token(text: str, rng: random.Random) -> str:
    m = _pick(text, rng)
    return text if m is None else text[:m.end()] + " " * rng.randint(0, 1) + m.group() + text[m.end():]


def swap_tokens(text: str, rng: random.Random) -> str:
    found = tokens(text)
    if len(found) < 2:
        return text
    a, b = sorted(rng.sample(found, 2), key=lambda m: m.start())
    return text[:a.start()] + b.group() + text[a.end():b.start()] + a.group() + text[b.end():]


def replace_token(text: str, rng: random.Random) -> str:
    m = _pick(text, rng)
    if m is None:
        return text
    pool = [t.group() for t in tokens(text)] if rng.random() < 0.5 else VOCABULARY
    return text[:m.start()] + rng.choice(pool) + text[m.end():]


def truncate(text: str, rng: random.Random) -> str:
    return text[:rng.randrange(len(text) + 1)]


def random_bytes(text: str, rng: random.Random) -> str:
    at = rng.randrange(len(text) + 1)
    if rng.random() < 0.5:
        junk = "".join(rng.choice(STRANGE) for _ in range(rng.randint(1, 4)))
    else:
        junk = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))).decode("latin-1")
    return text[:at] + junk + text[at:]


def deep_nesting(text: str, rng: random.Random) -> str:
    """An expression in hundreds of parentheses (or a tower of ifs or unary
    minuses), in place of a number or a name."""
    depth = rng.choice((50, 200, 500, 1000, 3000))
    found = [m for m in tokens(text) if m.group()[0].isalnum() and m.group() not in VOCABULARY]
    if not found or rng.random() < 0.3:
        return _nested_ifs(text, rng, depth)
    m = rng.choice(found)
    form = rng.randrange(4)
    if form == 0:
        inner = "(" * depth + m.group() + ")" * depth
    elif form == 1:
        inner = "-" * depth + m.group()
    elif form == 2:
        inner = " + ".join([m.group()] * depth)
    else:
        inner = "abs(" * depth + m.group() + ")" * depth
    return text[:m.start()] + inner + text[m.end():]


def _nested_ifs(text: str, rng: random.Random, depth: int) -> str:
    depth = min(depth, 400)
    lines = ["def deep(x: i32[N]):"]
    for k in range(depth):
        lines.append("    " * (k + 1) + f"if x[0] > {k}:")
    lines.append("    " * (depth + 1) + "x[0] = 1")
    return text + "\n" + "\n".join(lines) + "\n"


def huge_literal(text: str, rng: random.Random) -> str:
    found = [m for m in tokens(text) if m.group()[0].isdigit()]
    m = rng.choice(found) if found else _pick(text, rng)
    if m is None:
        return text
    return text[:m.start()] + rng.choice(HUGE) + text[m.end():]


def unicode_names(text: str, rng: random.Random) -> str:
    found = [m for m in tokens(text) if m.group()[0].isalpha()]
    if not found:
        return text
    m = rng.choice(found)
    choice = rng.randrange(4)
    if choice == 0:
        new = m.group() + rng.choice(STRANGE)
    elif choice == 1:
        new = "".join(chr(0xFF21 + ord(c) - ord("A")) if "A" <= c <= "Z" else c for c in m.group().upper())
    elif choice == 2:
        new = '"' + rng.choice(STRANGE) * rng.randint(1, 50) + '"'
    else:
        new = '"""' + rng.choice(STRANGE) + "\\" + rng.choice(("", '"', "x", "N{")) + '"""'
    return text[:m.start()] + new + text[m.end():]


def shuffle_lines(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    if len(lines) < 2:
        return text
    a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[a], lines[b] = lines[b], lines[a]
    if rng.random() < 0.5:  # and break the indentation of one
        k = rng.randrange(len(lines))
        lines[k] = rng.choice(("", " ", "\t", "        ")) + lines[k].lstrip()
    return "\n".join(lines)


MUTATIONS = (delete_token, delete_token, duplicate_token, swap_tokens, replace_token, replace_token, truncate,
             random_bytes, deep_nesting, huge_literal, unicode_names, shuffle_lines)
