"""Without the cross tools the qemu tests skip, naming the packages to install."""

from __future__ import annotations

import pytest
import toolchain


def test_missing_tools_name_their_packages(monkeypatch, tmp_path):
    monkeypatch.setattr(toolchain.shutil, "which", lambda tool: None)
    monkeypatch.setattr(toolchain, "SYSROOT", tmp_path)
    assert toolchain.missing_tools() == ["qemu-user", "gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"]
    with pytest.raises(pytest.skip.Exception, match="need qemu-user, gcc-aarch64-linux-gnu, libc6-dev-arm64-cross"):
        toolchain.aarch64.__wrapped__()
