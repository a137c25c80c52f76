"""Shared test fixtures: golden files and the `--update-golden` switch."""

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite golden files with the current output instead of comparing")


class Golden:
    def __init__(self, update: bool):
        self.update = update

    def check(self, path: Path, actual: str) -> None:
        """Compare `actual` with the golden file at `path` (or rewrite it)."""
        actual = actual.rstrip("\n") + "\n"
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(actual)
            return
        if not path.exists():
            pytest.fail(f"golden file {path.relative_to(ROOT)} is missing; "
                        "run `pytest --update-golden` to create it, then review it")
        expected = path.read_text()
        assert actual == expected, f"output differs from {path.relative_to(ROOT)} (update with --update-golden)"


@pytest.fixture
def golden(request) -> Golden:
    return Golden(request.config.getoption("--update-golden"))


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Tests never share the user's compile cache; pytest-xdist's workers share
    the run's (the cache's per-entry lock has each kernel compiled once).
    Session-scoped, so that module-scoped fixtures build into it too."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "dsl-cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DSL_CACHE_DIR", str(folder))
        yield
