#!/bin/sh
# Install what tests/cross needs (qemu-user, the aarch64 cross gcc and libc)
# when it is missing. Quiet when everything is there; never fails the build:
# without apt or root the cross tests skip and say why.
PACKAGES="qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
if command -v qemu-aarch64 >/dev/null 2>&1 && command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 \
        && [ -e /usr/aarch64-linux-gnu/lib/libc.so.6 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "tests/cross: apt-get not found; the AArch64 tests under qemu will be skipped" >&2
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "tests/cross: not root; to run the AArch64 tests under qemu:" >&2
    echo "    sudo apt-get install -y --no-install-recommends $PACKAGES" >&2
    exit 0
fi
echo "tests/cross: installing $PACKAGES (about 56 MB)" >&2
install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $PACKAGES >/dev/null; }
# A fresh machine may have no package lists yet: update only then.
install || { apt-get update -qq >/dev/null && install; } \
    || echo "tests/cross: apt-get install failed; the AArch64 tests will be skipped" >&2
exit 0
