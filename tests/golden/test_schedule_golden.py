"""Golden loop IR after each schedule directive, for a handful of kernels.

Each file under tests/golden/schedules/ is compiled to the loop IR, then its
directives run one by one; the kernel's text after every pass is recorded
(what `--print-after=PASS` shows), so a change in any transform shows up as
a reviewed diff of `expected/<name>.schedule.txt`.
"""

from pathlib import Path

import pytest

from dsl.grammar.diagnostics import Source
from dsl.lowering.printer import format_kernel
from dsl.lowering.transforms.apply import apply_schedule
from dsl.pipeline import compile_source

from test_golden import OPTIONS

HERE = Path(__file__).resolve().parent
SCHEDULED = sorted((HERE / "schedules").glob("*.tk"))


def _steps(path: Path) -> str:
    source = Source(f"{path.parent.name}/{path.name}", path.read_text())
    job = compile_source(source, OPTIONS, stop_after="loops", base_dir=path.parent)
    from dsl.backends.target import make_target

    machine = make_target(OPTIONS.triple, OPTIONS.cpu, OPTIONS.features).machine
    parts: list[str] = []
    for kernel in job.program.kernels:
        parts.append(f"// ----- before the schedule ({kernel.name}) -----\n{format_kernel(kernel)}")

        def after(name, k):
            parts.append(f"// ----- after {name} ({k.name}) -----\n{format_kernel(k)}")

        apply_schedule(kernel, after, True, machine)
    return "\n".join(parts)


@pytest.mark.parametrize("path", SCHEDULED, ids=lambda p: p.stem)
def test_loop_ir_after_each_directive(path, golden):
    text = _steps(path)
    assert text.count("// ----- after ") >= 1
    golden.check(HERE / "expected" / f"{path.stem}.schedule.txt", text)


def test_enough_scheduled_programs():
    assert len(SCHEDULED) >= 5
