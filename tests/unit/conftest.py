"""Fixtures the unit tests share: the vector kernels built twice, vectorized
('vec') and as written ('ref'), once per session."""

from __future__ import annotations

import pytest
from vector_kernels import KERNELS, unscheduled

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> dict[str, str]:
    """Paths of the vectorized library ('vec') and of the unscheduled one ('ref')."""
    out = {}
    for key, text in (("vec", KERNELS), ("ref", unscheduled(KERNELS))):
        job = compile_source(Source("vec.tk", text), CompileOptions(), stop_after="obj")
        out[key] = str(link_shared(job.obj, tmp_path_factory.mktemp(key) / f"{key}.so", job.target))
    return out


@pytest.fixture(scope="session")
def vec(built):
    return dsl.load(built["vec"])


@pytest.fixture(scope="session")
def ref(built):
    return dsl.load(built["ref"])


