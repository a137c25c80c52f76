#!/bin/sh
# Build examples/saxpy.tk and examples/matmul_index.tk into shared libraries with
# C headers, compile main.c against them, and run it.
#   sh examples/c/build_and_run.sh [BUILD_DIR]     (default: examples/build/c)
# DSLC and CC override the compiler commands (default: `python3 -m dsl.cli`, gcc).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build/c}
mkdir -p "$build"
build=$(cd "$build" && pwd)
dslc=${DSLC:-python3 -m dsl.cli}
for name in saxpy matmul_index; do
    $dslc "$here/../$name.tk" -o "$build/$name.so" -H "$build/$name.h"
done
${CC:-gcc} -O2 -Wall -Wextra -Werror -I "$build" "$here/main.c" \
    "$build/saxpy.so" "$build/matmul_index.so" -Wl,-rpath,"$build" -lm -o "$build/main"
"$build/main"
