"""ruff's pyflakes rules over the whole tree: unused names, undefined names, and
a test defined twice under one name (F811), which would silently never run."""

import shutil
import subprocess

import pytest

from conftest import ROOT


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed; `make test` installs it with the test extras")
    result = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
