"""ruff's pyflakes rules over the whole tree: unused names, undefined names, and
a test defined twice under one name (F811), which would silently never run."""

import subprocess
import sys

from conftest import ROOT


def test_ruff_finds_nothing():
    # ruff is a test extra; run it from this interpreter's environment.
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
