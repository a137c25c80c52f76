"""Libraries built once per test run, shared by pytest-xdist's workers.

They are built by `dsl.ops.generated.generated_library`, through the run's
compile cache (tests/conftest.py points
DSL_CACHE_DIR at one folder for every worker), whose per-entry lock has one
worker build a library while another that needs it waits and then loads it.
A fixture that builds many libraries takes them `in_worker_order`, so that
two workers starting it at once build different ones side by side.
"""

from __future__ import annotations

import os
from pathlib import Path

from dsl.library import Library
from dsl.ops.generated import generated_library


def file_library(path: Path) -> Library:
    """The loaded library of the `.tk` file at `path` (one that imports nothing),
    compiled as dsl.ops compiles the programs it writes."""
    return generated_library(path.read_text(), path.name)


def in_worker_order(items: list) -> list:
    """`items` rotated by the pytest-xdist worker's number: gw0 starts at the
    first, gw1 half-way along (with two workers), ..."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0
    shift = len(items) * index // max(count, 1)
    return items[shift:] + items[:shift]
