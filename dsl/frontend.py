"""Reading kernel sources: a `.tk` file and the files it imports.

`from quant_common import scale_min_k4` looks for `quant_common.tk` beside the
importing file, then in the include paths, then in the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dsl.grammar import ast
from dsl.grammar.diagnostics import CompileError, Diagnostic, DiagnosticBag, Source, did_you_mean
from dsl.grammar.parser import parse

STDLIB_DIR = Path(__file__).resolve().parent.parent / "stdlib"


def stdlib_dir() -> Path:
    import dsl.stdlib

    return Path(dsl.stdlib.__file__).resolve().parent


@dataclass
class Frontend:
    """A parsed main module, the functions it imports, and every source read.

    `imported` holds the names the main module imports. `scopes` maps each
    function of an imported module (by id) to the functions *its* module sees (its
    own definitions and its imports), so a library's helper calls that library's
    functions and nothing the main module happens to define or import.
    """

    module: ast.Module
    imported: dict[str, ast.FunctionDef] = field(default_factory=dict)
    sources: list[Source] = field(default_factory=list)
    scopes: dict[int, dict[str, ast.FunctionDef]] = field(default_factory=dict)


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
    loader = _Loader(front, [Path(p) for p in search] + [stdlib_dir()])
    here = Path(base_dir) / Path(source.name).name if base_dir else Path(source.name)
    first = [Path(base_dir)] if base_dir else []
    front.imported = loader.imports(module, first + loader.search, [(_key(here), here.name)])
    loader.bag.raise_if_errors()
    return front


class _Loader:
    """Reads each imported module once and gives its functions their scope."""

    def __init__(self, front: Frontend, search: list[Path]):
        self.front = front
        self.search = search
        self.bag = DiagnosticBag()
        self.done: dict[str, ast.Module] = {}

    def imports(self, module: ast.Module, roots: list[Path], chain: list[tuple[str, str]]) -> dict:
        """The functions `module`'s import statements bring in, by name.
        `chain` lists the modules being loaded, outermost first: (key, file name)."""
        names: dict[str, ast.FunctionDef] = {}
        for imp in module.imports:
            path = _find(imp.module, roots)
            if path is None:
                self.bag.error(imp.span, f"cannot find module '{imp.module}'",
                               f"looked for {imp.module.replace('.', '/')}.tk beside the importing file, "
                               "in the include paths (-I) and in the standard library")
                continue
            key = _key(path)
            keys = [k for k, _ in chain]
            if key in keys:
                files = [name for _, name in chain[keys.index(key):]] + [path.name]
                self.bag.error(imp.span, f"import cycle: {' -> '.join(files)}",
                               "modules cannot import each other; move the shared functions to a third module")
                continue
            functions = {fn.name: fn for fn in self.module(key, path, chain).functions}
            for name in imp.names:
                if name.id not in functions:
                    self.bag.error(name.span, f"module '{imp.module}' has no function '{name.id}'",
                                   *did_you_mean(name.id, functions))
                elif names.get(name.id, functions[name.id]) is not functions[name.id]:
                    self.bag.error(name.span, f"'{name.id}' is imported twice, from different modules")
                else:
                    names[name.id] = functions[name.id]
        return names

    def module(self, key: str, path: Path, chain: list[tuple[str, str]]) -> ast.Module:
        if key in self.done:
            return self.done[key]
        source = read_source(path)
        self.front.sources.append(source)
        child = parse(source)
        self.done[key] = child
        imported = self.imports(child, [path.parent] + self.search, chain + [(key, path.name)])
        scope = dict(imported)
        for fn in child.functions:
            if fn.name in scope:
                self.bag.error(fn.name_span, f"'{fn.name}' is defined more than once")
            scope[fn.name] = fn
        for fn in child.functions:
            self.front.scopes[id(fn)] = scope
        return child


def _key(path: Path) -> str:
    return str(Path(path).resolve())


def _find(module: str, roots: list[Path]) -> Path | None:
    rel = Path(*module.split(".")).with_suffix(".tk")
    for root in roots:
        candidate = Path(root) / rel
        if candidate.is_file():
            return candidate
    return None


def visible_functions(front: Frontend) -> dict[str, ast.FunctionDef]:
    """The functions the main module imports, by the names it imports them as."""
    return dict(front.imported)
