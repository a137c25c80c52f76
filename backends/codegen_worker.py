"""A helper process that compiles LLVM IR for `codegen_pool`.

Run as `python -m dsl.backends.codegen_worker`. It reads requests from stdin:
a JSON line `{"target": {...}, "opt_level": 3, "bytes": N}` and then N bytes
of LLVM IR text. It answers each on stdout with a JSON line `{"bytes": N}`
and the N bytes of the object file, or `{"error": MESSAGE}` when the IR is
malformed. It ends when stdin closes, or after IDLE_SECONDS without a
request (so an idle program does not keep it; the pool starts another).
"""

from __future__ import annotations

import json
import select
import sys

from .errors import BackendError
from .optimize import compile_text
from .target import Target

IDLE_SECONDS = 120


def serve(requests, replies, idle_seconds: float | None = None) -> None:
    """Answer the requests read from binary stream `requests` on `replies`,
    until `requests` ends or stays silent for `idle_seconds`."""
    while idle_seconds is None or select.select([requests], [], [], idle_seconds)[0]:
        header = requests.readline()
        if not header:
            return
        request = json.loads(header)
        text = requests.read(request["bytes"]).decode()
        try:
            obj = compile_text(text, Target(**request["target"]), request["opt_level"])
            reply = {"bytes": len(obj)}
        except BackendError as err:
            obj, reply = b"", {"error": str(err)}
        replies.write(json.dumps(reply).encode() + b"\n" + obj)
        replies.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer, IDLE_SECONDS)
