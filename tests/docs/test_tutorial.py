"""docs/tutorial.md shows the kernels that benchmarks/tutorial.py times: every
```tk block of the tutorial is, verbatim, a kernel of benchmarks/tutorial.tk,
and every kernel of that file is shown."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```tk\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_tutorial_shows_the_benchmarked_kernels():
    shown = FENCE.findall((ROOT / "docs" / "tutorial.md").read_text())
    source = (ROOT / "benchmarks" / "tutorial.tk").read_text()
    kernels = re.findall(r"^def (\w+)", source, re.MULTILINE)
    assert len(shown) == len(kernels) == 5
    for block in shown:
        assert block in source, f"not in benchmarks/tutorial.tk:\n{block}"
    for name in kernels:
        assert any(f"def {name}(" in block for block in shown), f"{name} is not shown in the tutorial"
