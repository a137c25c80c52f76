"""What the machine running the tests can execute (for tests that run code
built for another CPU of its architecture)."""

from __future__ import annotations

import platform
import re
from pathlib import Path


def runs_avx2() -> bool:
    """Whether this machine runs code built for znver3 or haswell (AVX2, FMA, BMI2, MOVBE)."""
    cpuinfo = Path("/proc/cpuinfo")
    if platform.machine() != "x86_64" or not cpuinfo.exists():
        return False
    flags = next((line for line in cpuinfo.read_text().splitlines() if line.startswith("flags")), "")
    return all(re.search(rf"\b{f}\b", flags) for f in ("avx2", "fma", "bmi2", "movbe"))
