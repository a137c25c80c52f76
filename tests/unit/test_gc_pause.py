"""gc_paused: the cycle collector is off during compiles and back after."""

import gc
import threading

from dsl.gc_pause import gc_paused
from dsl.options import CompileOptions
from dsl.pipeline import compile_source
from dsl.grammar.diagnostics import Source

SAXPY = "def saxpy(a: f32, x: f32[N], y: f32[N]):\n    y[i] = a * x[i] + y[i]\n"


def test_off_during_a_compile_and_on_after():
    import dsl.pipeline as pipeline

    seen, first = [], pipeline.STAGES[0]
    pipeline.STAGES[0] = pipeline.Stage(first.name, lambda job: (seen.append(gc.isenabled()), first.run(job)),
                                        first.show)
    try:
        compile_source(Source("s.tk", SAXPY), CompileOptions(), stop_after="llvm")
    finally:
        pipeline.STAGES[0] = first
    assert seen == [False] and gc.isenabled()


def test_off_before_stays_off():
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_threads_share_one_pause():
    inside, leave = threading.Barrier(3), threading.Event()
    states = []

    def compile_like():
        with gc_paused():
            inside.wait()
            leave.wait()
        states.append(gc.isenabled())

    threads = [threading.Thread(target=compile_like) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    leave.set()
    for t in threads:
        t.join()
    assert gc.isenabled() and len(states) == 2


def test_an_error_inside_turns_it_back_on():
    try:
        with gc_paused():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()
