"""Every module of dsl.ops imports first, in a fresh interpreter: the package
resolves its names lazily, so a module that asks the package for a sibling
(`from . import reduce`) while the package is importing it finds itself half
made (`import dsl.ops.einsum` raised ImportError)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dsl.ops


def test_each_module_imports_on_its_own():
    modules = sorted(p.stem for p in Path(dsl.ops.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert "einsum" in modules
    failed = {}
    for name in modules:
        done = subprocess.run([sys.executable, "-c", f"import dsl.ops.{name}"], capture_output=True, text=True)
        if done.returncode:
            failed[name] = done.stderr.strip().splitlines()[-1]
    assert not failed, failed
