"""`CompileOptions`: everything that steers one compile, read once at the edge.

Environment variables (`DSL_PRINT_AFTER`, `DSL_REMARKS`, `DSL_DUMP_DIR`, `DSL_CACHE_DIR`,
`DSL_INTERPRET`, `DSL_DEBUG`, `DSL_NO_CACHE`, `DSL_CODEGEN_JOBS`) are read here, by `from_env`, and nowhere
else (`DSL_NO_PROGRESS`, which steers no compile, by `progress_disabled`). A value
that means nothing (`DSL_PRINT_AFTER=bogus`, `DSL_DEBUG=maybe`) is warned about,
once per process, and the compile goes on.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
_warned: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class CompileOptions:
    opt_level: int = 3
    triple: str | None = None  # None: the host
    cpu: str | None = None
    features: str | None = None
    print_after: frozenset[str] = frozenset()  # stage names, or {"all"}
    remarks: bool = False  # print what the scheduler did to each loop nest, and why
    dump_dir: Path | None = None
    include_paths: tuple[Path, ...] = ()
    verify: bool = True  # run the IR verifier after every pass
    debug: bool = False  # show raw tracebacks of internal errors
    cache_dir: Path | None = None
    use_cache: bool = True
    interpret: bool = False
    # Autotuning's choice per kernel: (kernel name, candidate index) pairs
    # (`lowering.schedule_space`); kernels not named run candidate 0.
    schedule_picks: tuple[tuple[str, int], ...] = ()
    # Exact-size specialization: (dim name, size) pairs bound at compile time.
    specialize: tuple[tuple[str, int], ...] = ()
    # Build only these kernels of the file (None: all of them); the standard
    # library's first use compiles just the kernel it calls.
    kernels: frozenset[str] | None = None
    # Processes LLVM compiles a large module's parts in (dsl.backends.codegen_pool;
    # 0: one per core, at most 4). The library is the same whatever the number.
    codegen_jobs: int = 0

    def with_(self, **changes) -> "CompileOptions":
        """A copy with the given fields changed (the options are frozen).

            CompileOptions().with_(opt_level=0, print_after=frozenset({"loops"}))
        """
        return replace(self, **changes)

    def prints_after(self, stage: str) -> bool:
        """Whether the IR is printed after `stage`, a pipeline stage ('loops',
        'llvm', ...) or a schedule pass ('split', 'auto', ...): named in
        `print_after`, or `print_after` holds 'all'.

            CompileOptions(print_after=frozenset({"split"})).prints_after("split")  # True
        """
        return "all" in self.print_after or stage in self.print_after

    def cache_key_part(self) -> dict:
        """The options that change generated code (printing and caching do not)."""
        return {"O": self.opt_level, "triple": self.triple, "cpu": self.cpu, "features": self.features,
                "picks": list(self.schedule_picks), "specialize": list(self.specialize),
                "kernels": None if self.kernels is None else sorted(self.kernels)}


def warn_once(var: str, value: str, message: str) -> None:
    """Warn that environment variable `var` holds `value`, which `message`
    explains; once per process for each (var, value)."""
    if (var, value) in _warned:
        return
    _warned.add((var, value))
    warnings.warn(f"{var}={value!r} {message}", UserWarning, stacklevel=3)


def _flag(environ, var: str) -> bool:
    """A switch: 1/true/yes/on, or 0/false/no/off (unset or empty: off); any
    other value counts as on, with a warning."""
    value = environ.get(var)
    text = (value or "").strip().lower()
    if text not in _TRUE + _FALSE:
        warn_once(var, value, f"is not a switch value ({'/'.join(_TRUE)} or {'/'.join(_FALSE[1:])}); read as on")
    return text not in _FALSE


def _print_after(value: str) -> frozenset[str]:
    """The names in DSL_PRINT_AFTER ('loops,split') that name something
    printable; the others are warned about and dropped."""
    from dsl.lowering.transforms.apply import PRINTABLE

    from .pipeline import STAGE_NAMES

    names = {n.strip() for n in value.split(",") if n.strip()}
    known = ["all", *(n for n in STAGE_NAMES if n != "obj"), *PRINTABLE]
    unknown = sorted(names - set(known))
    if unknown:
        warn_once("DSL_PRINT_AFTER", value, f"has unknown names, ignored: {', '.join(unknown)}; it takes a "
                  f"comma-separated list of stages and schedule passes: {', '.join(known)} "
                  "(obj is binary: DSL_DUMP_DIR keeps it)")
    return frozenset(names & set(known))


def _folder(environ, var: str) -> Path | None:
    """The directory `var` names (made when first written to); None, with a
    warning, when it names an existing file."""
    if not environ.get(var):
        return None
    path = Path(environ[var])
    if path.exists() and not path.is_dir():
        warn_once(var, environ[var], "is a file, not a directory; ignored")
        return None
    return path


def from_env(base: CompileOptions | None = None, environ=os.environ) -> CompileOptions:
    """`base` updated with the DSL_* environment variables."""
    opts = base or CompileOptions()
    changes: dict = {}
    if _flag(environ, "DSL_REMARKS"):
        changes["remarks"] = True
    if environ.get("DSL_PRINT_AFTER"):
        changes["print_after"] = opts.print_after | _print_after(environ["DSL_PRINT_AFTER"])
    for var, name in (("DSL_DUMP_DIR", "dump_dir"), ("DSL_CACHE_DIR", "cache_dir")):
        folder = _folder(environ, var)
        if folder is not None:
            changes[name] = folder
    if _flag(environ, "DSL_INTERPRET"):
        changes["interpret"] = True
    if _flag(environ, "DSL_DEBUG"):
        changes["debug"] = True
    if _flag(environ, "DSL_NO_CACHE"):
        changes["use_cache"] = False
    jobs = environ.get("DSL_CODEGEN_JOBS", "").strip()
    if jobs.isdigit() and int(jobs) >= 1:
        changes["codegen_jobs"] = int(jobs)
    elif jobs:
        warn_once("DSL_CODEGEN_JOBS", jobs, "is not a count of processes (1, 2, ...); ignored")
    return replace(opts, **changes)


def progress_disabled(environ=os.environ) -> bool:
    """DSL_NO_PROGRESS=1: no progress bar (dsl.progress), even on a terminal."""
    return _flag(environ, "DSL_NO_PROGRESS")


def default_cache_dir(opts: CompileOptions) -> Path:
    if opts.cache_dir is not None:
        return opts.cache_dir
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dslc"
