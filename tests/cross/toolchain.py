"""The `aarch64` fixture (imported by the test modules): the cross toolchain and
qemu, or a skip that says why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from harness import Toolchain

SYSROOT = Path("/usr/aarch64-linux-gnu")
TOOLS = {"qemu-aarch64": "qemu-user", "aarch64-linux-gnu-gcc": "gcc-aarch64-linux-gnu"}


def missing_tools() -> list[str]:
    """The Debian packages whose programs or files are missing."""
    missing = [pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None]
    if not (SYSROOT / "lib" / "libc.so.6").exists():
        missing.append("libc6-dev-arm64-cross")
    return missing


@pytest.fixture(scope="session")
def aarch64() -> Toolchain:
    """The aarch64 C compiler and the qemu command that runs its programs."""
    missing = missing_tools()
    if missing:
        pytest.skip(f"AArch64 cross tests need {', '.join(missing)} (`make test` installs them "
                    f"with apt-get when run as root; see tests/cross/install_tools.sh)")
    return Toolchain(["aarch64-linux-gnu-gcc"], ["qemu-aarch64", "-L", str(SYSROOT)])
