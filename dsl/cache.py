"""The on-disk compile cache: compiled kernels as shared libraries, by content key.

The key covers the kernel's source and every source it depends on, the
compiler's own code, llvmlite's LLVM version, the target (triple, CPU,
features), the options and the specialization. An entry is written atomically
(temp file + rename) with a SHA-256 beside it: a truncated or corrupt entry is
detected, deleted and rebuilt, never loaded.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import tempfile
import threading
import warnings
from pathlib import Path

@functools.lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """A hash of the compiler's own source (so a changed compiler misses the cache)."""
    import llvmlite

    import dsl

    digest = hashlib.sha256(f"{dsl.__version__} llvmlite {llvmlite.__version__}".encode())
    roots = [Path(__import__(m, fromlist=["x"]).__file__).parent
             for m in ("dsl", "dsl.grammar", "dsl.lowering", "dsl.backends")]
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".lark") and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def make_key(**parts) -> str:
    parts["compiler"] = compiler_fingerprint()
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class DiskCache:
    """Shared libraries by key: `<key>.so` beside `<key>.sha256`.

    A library describes itself (`__dsl_metadata`), so the `.so` is the whole
    entry; the sidecar hash is written last, so an entry without a matching hash
    is incomplete or damaged and is rebuilt.
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def paths(self, key: str) -> tuple[Path, Path]:
        folder = self.root / key[:2]
        return folder / f"{key}.so", folder / f"{key}.sha256"

    def lookup(self, key: str) -> Path | None:
        lib, sidecar = self.paths(key)
        try:
            want = sidecar.read_text().strip()
            data = lib.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(data).hexdigest() == want:
            return lib
        for path in (lib, sidecar):
            try:
                path.unlink()
            except OSError:
                pass
        return None

    def get_or_build(self, key: str, build) -> Path:
        """The entry for `key`, built by `build(path)` if it is missing.

        Processes that miss the same key at once (pytest-xdist workers, a
        pool of Dask workers) build it once: the builder holds a lock file
        beside the entry, and the others wait for it, then find the entry.
        """
        found = self.lookup(key)
        if found is not None:
            return found
        with self._build_lock(key):
            return self.lookup(key) or self.store(key, build)

    @contextlib.contextmanager
    def _build_lock(self, key: str):
        lib, _ = self.paths(key)
        if not self._writable(lib.parent):  # store() builds privately, unlocked
            yield
            return
        fd = os.open(lib.parent / f"{key}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock; the empty lock file stays for the next builder

    def store(self, key: str, build) -> Path:
        """Call `build(path)` to write the library to a temp path, then publish it.

        A cache directory that cannot be created or written (read-only, a file
        in the way) is not an error: the library is built in a private
        temporary directory instead, with a warning (once per directory).
        """
        lib, sidecar = self.paths(key)
        if not self._writable(lib.parent):
            return build(Path(tempfile.mkdtemp(prefix="dslc-")) / lib.name)
        tmp = lib.parent / f".tmp-{os.getpid()}-{threading.get_ident()}-{lib.name}"
        build(tmp)
        digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
        os.replace(tmp, lib)
        _atomic_write(sidecar, digest.encode())
        return lib


    def _writable(self, folder: Path) -> bool:
        try:
            for path in (self.root, folder):
                path.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe-")
            os.close(fd)
            os.unlink(probe)
            return True
        except OSError as exc:
            with _warned_lock:
                if str(self.root) not in _warned:
                    _warned.add(str(self.root))
                    warnings.warn(f"dslc: cannot use the compile cache {self.root} ({exc.strerror or exc}); "
                                  "compiling without it (set DSL_CACHE_DIR to a writable directory)",
                                  RuntimeWarning, stacklevel=4)
            return False


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
