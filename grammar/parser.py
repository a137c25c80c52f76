"""Text to AST: `parse(Source) -> Module`.

    text --lexer.Scanner--> tokens --lexer.Layout--> + _NL/_INDENT/_DEDENT
         --_Tables.run (LALR, tables from tk.lark)--> ast_builder callbacks --> Module

The Lark object (built once per process) supplies the grammar's terminals, its
LALR tables and its rule callbacks (`ast_builder.Builder`, applied as each rule
is reduced: no parse tree is built, and nothing recurses, so deep inputs cost
list space, not Python frames). Lark's own lexer and parse loop are not used:
one regex over the terminals into slotted tokens, and a lean loop, parse about
twice as fast (a dense 50-line kernel in ~4 ms). Per-call state lives in locals
and a thread-local, so parsing is thread-safe. A syntax error becomes one
`CompileError`, worded by `syntax_errors.py`.
"""

from __future__ import annotations

import threading
from functools import cache
from importlib import resources
from itertools import chain

from lark import Lark
from lark.parsers.lalr_analysis import Shift

from .ast import Module
from .diagnostics import CompileError, Source
from .lexer import Layout, Scanner, end_token, unclosed_bracket
from .syntax_errors import explain
from .tokens import current


def parse(source: Source) -> Module:
    """Parse kernel source text into a `Module`; raise `CompileError` on a syntax error.

    >>> m = parse(Source("k.tk", "def f(x: f32):\\n    return x\\n"))
    >>> m.functions[0].name
    'f'

    The last PARSED_KEPT results are kept by name and text (the AST is
    immutable): dsl.ops reads a stdlib file twice in its first call, to list
    its kernels and to build one, and dense.tk takes ~0.2 s to parse.
    """
    key = (source.name, source.first_line, source.text)
    with _parsed_lock:
        module = _parsed.get(key)
    if module is None:
        module = _parse(source)
        with _parsed_lock:
            _parsed[key] = module
            while len(_parsed) > PARSED_KEPT:
                del _parsed[next(iter(_parsed))]
    return module


PARSED_KEPT = 32
_parsed: dict[tuple[str, int, str], Module] = {}  # oldest first
_parsed_lock = threading.Lock()


def _parse(source: Source) -> Module:
    text = source.text if source.text.endswith("\n") else source.text + "\n"
    text = text.removeprefix("\ufeff")  # a byte-order mark is not part of line 1
    tables, scanner = _tables(), _scanner()
    layout = Layout(text)
    current.source = source
    try:
        return tables.run(chain(layout.process(scanner.tokens(text)), _end(layout)))
    except _Stuck as e:
        unclosed = unclosed_bracket(scanner, text)
        expected = tables.expected(e.states)
        raise CompileError(explain(e.token, expected, layout, unclosed)) from None
    finally:
        current.source = None


@cache
def _lark() -> Lark:
    """The process-wide parser: ~0.1 s to build, once."""
    from .ast_builder import Builder

    grammar = resources.files(__package__).joinpath("tk.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="basic", transformer=Builder(), maybe_placeholders=True)


class _Stuck(Exception):
    """The parser has no action for `token` in the state on top of `states`."""

    def __init__(self, token, states):
        super().__init__(token)
        self.token = token
        self.states = states


class _Tables:
    """Lark's LALR tables and rule callbacks, driven by a loop of our own.

    The loop is Lark's `ParserState.feed_token` minus its per-token overheads
    (an assert comparing Rule objects, Token-typed rule names, calls for `?rules`
    that hand their one child through), about 40% faster.
    """

    def __init__(self, lark: Lark):
        conf = lark.parse_interactive().parser_state.parse_conf
        self.start, self.end = conf.start_state, conf.end_state
        self.actions: dict = {}
        for state, actions in conf.states.items():
            row = self.actions[state] = {}
            for symbol, (action, arg) in actions.items():
                if action is Shift:
                    row[str(symbol)] = (True, arg)
                else:
                    keep = _passed_through(arg)
                    callback = None if keep is not None else conf.callbacks[arg]
                    row[str(symbol)] = (False, (len(arg.expansion), str(arg.origin.name), callback, keep))

    def run(self, tokens):
        """Parse a token stream ending with `$END`; the value of the start rule."""
        actions, end = self.actions, self.end
        states, values = [self.start], []
        for tok in tokens:
            kind = tok.type
            while True:
                step = actions[states[-1]].get(kind)
                if step is None:
                    raise _Stuck(tok, states)
                shift, arg = step
                if shift:
                    states.append(arg)
                    values.append(tok)
                    break
                size, origin, callback, keep = arg
                if callback is None:
                    value = values[keep - size]
                    del states[-size:]
                    del values[-size:]
                elif size:
                    value = callback(values[-size:])
                    del states[-size:]
                    del values[-size:]
                else:
                    value = callback([])
                states.append(actions[states[-1]][origin][1])
                values.append(value)
                if kind == "$END" and states[-1] == end:
                    return values[-1]
        raise AssertionError("token stream without $END")  # pragma: no cover

    def expected(self, states: list) -> set[str]:
        """The terminals that could come next: each one tried on a copy of the
        state stack (LALR tables alone over-promise, their states being merged)."""
        return {t for t in self.actions[states[-1]] if t.isupper() and self._accepts(list(states), t)}

    def _accepts(self, states: list, terminal: str) -> bool:
        while True:
            step = self.actions[states[-1]].get(terminal)
            if step is None:
                return False
            shift, arg = step
            if shift or states[-1] == self.end:
                return True
            size, origin, _, _ = arg
            if size:
                del states[-size:]
            states.append(self.actions[states[-1]][origin][1])
            if states[-1] == self.end:
                return True


def _passed_through(rule) -> int | None:
    """For `?a: b` (or `?a: b _NL`), which Lark hands through unchanged, the index
    of `b`: the loop then skips the call. None for rules with a callback."""
    options = rule.options
    if not options.expand1 or rule.alias or options.keep_all_tokens or options.empty_indices:
        return None
    kept = [i for i, sym in enumerate(rule.expansion) if not (sym.is_term and sym.filter_out)]
    if len(kept) != 1 or rule.expansion[kept[0]].is_term or rule.expansion[kept[0]].name.startswith("_"):
        return None
    return kept[0]


@cache
def _tables() -> _Tables:
    return _Tables(_lark())


def _end(layout: Layout):
    """`$END`, made once the tokens before it are read."""
    yield end_token(layout.last)


@cache
def _scanner() -> Scanner:
    return Scanner(_lark())
