"""`CompileOptions`: everything that steers one compile, read once at the edge.

Environment variables (`DSL_PRINT_AFTER`, `DSL_REMARKS`, `DSL_DUMP_DIR`, `DSL_CACHE_DIR`,
`DSL_INTERPRET`, `DSL_DEBUG`) are read here, by `from_env`, and nowhere else
(`DSL_NO_PROGRESS`, which steers no compile, by `progress_disabled`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path


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

    def with_(self, **changes) -> "CompileOptions":
        return replace(self, **changes)

    def prints_after(self, stage: str) -> bool:
        return "all" in self.print_after or stage in self.print_after

    def cache_key_part(self) -> dict:
        """The options that change generated code (printing and caching do not)."""
        return {"O": self.opt_level, "triple": self.triple, "cpu": self.cpu, "features": self.features,
                "picks": list(self.schedule_picks), "specialize": list(self.specialize)}


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no", "off")


def from_env(base: CompileOptions | None = None, environ=os.environ) -> CompileOptions:
    """`base` updated with the DSL_* environment variables."""
    opts = base or CompileOptions()
    changes: dict = {}
    if _flag(environ.get("DSL_REMARKS")):
        changes["remarks"] = True
    if environ.get("DSL_PRINT_AFTER"):
        names = {n.strip() for n in environ["DSL_PRINT_AFTER"].split(",") if n.strip()}
        changes["print_after"] = opts.print_after | names
    if environ.get("DSL_DUMP_DIR"):
        changes["dump_dir"] = Path(environ["DSL_DUMP_DIR"])
    if environ.get("DSL_CACHE_DIR"):
        changes["cache_dir"] = Path(environ["DSL_CACHE_DIR"])
    if _flag(environ.get("DSL_INTERPRET")):
        changes["interpret"] = True
    if _flag(environ.get("DSL_DEBUG")):
        changes["debug"] = True
    if environ.get("DSL_NO_CACHE") and _flag(environ.get("DSL_NO_CACHE")):
        changes["use_cache"] = False
    return replace(opts, **changes)


def progress_disabled(environ=os.environ) -> bool:
    """DSL_NO_PROGRESS=1: no progress bar (dsl.progress), even on a terminal."""
    return _flag(environ.get("DSL_NO_PROGRESS"))


def default_cache_dir(opts: CompileOptions) -> Path:
    if opts.cache_dir is not None:
        return opts.cache_dir
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dslc"
