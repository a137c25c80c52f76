"""codegen_pool: parts compiled here and in helper processes give the same objects."""

import subprocess
import sys

import pytest

from dsl.backends import codegen_pool as pool
from dsl.backends.target import host_target


def _texts(count):
    """`count` small modules: f0 returns 0, f1 returns 1, ..."""
    t = host_target()
    return [f'target triple = "{t.triple}"\n'
            f"define i32 @f{k}(i32 %x) {{\n  %y = mul i32 %x, {k + 3}\n  %z = add i32 %y, {k}\n  ret i32 %z\n}}\n"
            for k in range(count)]


def test_helpers_give_the_objects_this_process_would():
    texts = _texts(5)
    alone = pool.compile_parts(texts, host_target(), 3, jobs=1)
    shared = pool.compile_parts(texts, host_target(), 3, jobs=3)
    assert alone == shared
    assert not pool._failed and len(pool._idle) >= 2  # the helpers did their share and wait for more
    assert all(f"f{k}".encode() in obj for k, obj in enumerate(alone))


def test_a_helper_compiles_as_this_process_does():
    helper = pool._Helper()
    try:
        text = _texts(1)[0]
        assert helper.compile(text, host_target(), 3) == pool.compile_text(text, host_target(), 3)
        with pytest.raises(pool.BackendError, match="invalid LLVM IR"):
            helper.compile(text.replace("ret i32", "ret i64"), host_target(), 3)
        assert helper.compile(text, host_target(), 2)  # and goes on after an error
    finally:
        helper.close()
    assert helper.proc.returncode == 0


def test_invalid_part_names_its_text():
    texts = _texts(3)
    texts[1] = texts[1].replace("ret i32 %z", "ret i64 %z")
    with pytest.raises(pool.PartFailed) as failed:
        pool.compile_parts(texts, host_target(), 3, jobs=2)
    assert failed.value.text == texts[1] and "invalid LLVM IR" in str(failed.value)


def test_helper_that_cannot_start_leaves_the_work_here(monkeypatch):
    class Broken(pool._Helper):
        def __init__(self):  # a process that ends at once, as one that cannot import dslc does
            self.proc = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE)
            self.alive, self.served = True, 0

    monkeypatch.setattr(pool, "_Helper", Broken)
    monkeypatch.setattr(pool, "_idle", [])
    monkeypatch.setattr(pool, "_failed", False)
    texts = _texts(4)
    assert pool.compile_parts(texts, host_target(), 3, jobs=2) == pool.compile_parts(texts, host_target(), 3, jobs=1)
    assert pool._failed and pool._idle == []  # and no helper is started again
    assert pool._borrow(1) == []


def test_default_jobs_is_a_few_cores():
    assert 1 <= pool.default_jobs() <= 4


def test_a_silent_worker_ends(tmp_path):
    import io
    import os
    import time

    from dsl.backends.codegen_worker import serve

    read_end, write_end = os.pipe()
    start = time.monotonic()
    with os.fdopen(read_end, "rb") as requests:
        serve(requests, io.BytesIO(), idle_seconds=0.2)
    assert 0.2 <= time.monotonic() - start < 5
    os.close(write_end)


def test_a_helper_that_ended_after_work_is_replaced(monkeypatch):
    monkeypatch.setattr(pool, "_idle", [])
    monkeypatch.setattr(pool, "_failed", False)
    helper = pool._Helper()
    helper.compile(_texts(1)[0], host_target(), 3)
    helper.proc.stdin.close()  # as after its idle minutes
    helper.proc.wait(30)
    pool._give_back([helper])
    fresh = pool._borrow(1)
    assert len(fresh) == 1 and fresh[0] is not helper and not pool._failed
    pool._give_back(fresh)
    pool._close_all()
