"""Reading kernel sources: a `.tk` file and the files it imports.

`from quant_common import scale_min_k4` looks for `quant_common.tk` beside the
importing file, then in the include paths, then in the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dsl.grammar import ast
from dsl.grammar.diagnostics import CompileError, Diagnostic, DiagnosticBag, Source
from dsl.grammar.parser import parse

STDLIB_DIR = Path(__file__).resolve().parent.parent / "stdlib"


def stdlib_dir() -> Path:
    import dsl.stdlib

    return Path(dsl.stdlib.__file__).resolve().parent


@dataclass
class Frontend:
    """A parsed main module, the functions it imports, and every source read."""

    module: ast.Module
    imported: dict[str, ast.FunctionDef] = field(default_factory=dict)
    sources: list[Source] = field(default_factory=list)


def read_source(path: Path) -> Source:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CompileError(Diagnostic(None, f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})")) from None
    except OSError as exc:
        raise CompileError(Diagnostic(None, f"cannot read {path}: {exc.strerror}")) from None
    return Source(str(path), text)


def load(source: Source, search: tuple[Path, ...] = (), base_dir: Path | None = None) -> Frontend:
    """Parse `source` and everything it imports (transitively)."""
    module = parse(source)
    front = Frontend(module, sources=[source])
    roots = ([base_dir] if base_dir else []) + list(search) + [stdlib_dir()]
    _resolve(module, roots, front, visiting=[source.name], done={})
    return front


def _resolve(module: ast.Module, roots: list[Path], front: Frontend, visiting: list[str], done: dict) -> None:
    bag = DiagnosticBag()
    for imp in module.imports:
        path = _find(imp.module, roots)
        if path is None:
            bag.error(imp.span, f"cannot find module '{imp.module}'",
                      f"looked for {imp.module.replace('.', '/')}.tk beside the importing file, "
                      "in the include paths (-I) and in the standard library")
            continue
        key = str(path.resolve())
        if key in visiting:
            bag.error(imp.span, f"import cycle: {' -> '.join([*visiting, key])}")
            continue
        if key not in done:
            source = read_source(path)
            front.sources.append(source)
            child = parse(source)
            done[key] = child
            _resolve(child, [path.parent] + roots[1:], front, visiting + [key], done)
            for fn in child.functions:
                front.imported.setdefault(f"{key}::{fn.name}", fn)
        functions = {fn.name: fn for fn in done[key].functions}
        for name in imp.names:
            if name.id not in functions:
                bag.error(name.span, f"module '{imp.module}' has no function '{name.id}'")
            else:
                front.imported[name.id] = functions[name.id]
    bag.raise_if_errors()


def _find(module: str, roots: list[Path]) -> Path | None:
    rel = Path(*module.split(".")).with_suffix(".tk")
    for root in roots:
        candidate = Path(root) / rel
        if candidate.is_file():
            return candidate
    return None


def visible_functions(front: Frontend) -> dict[str, ast.FunctionDef]:
    """Imported names as the main module sees them (not the internal `path::name` keys)."""
    out = {k: v for k, v in front.imported.items() if "::" not in k}
    # A function imported from a module may call that module's other functions.
    for key, fn in front.imported.items():
        if "::" in key:
            out.setdefault(fn.name, fn)
    return out
