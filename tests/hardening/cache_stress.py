"""One process of the cache stress test: 8 threads compile and call kernels
(one shared by every thread and process, one per thread) into one cache.

    python cache_stress.py MODULE_DIR PROCESS_ID
Prints 'ok N' after N correct calls, or raises.
"""

import sys
import threading

import numpy as np

sys.path.insert(0, sys.argv[1])
import stress_kernels  # noqa: E402  (written by the test)

THREADS = 8


def work(index: int, errors: list) -> None:
    try:
        x = np.arange(100, dtype=np.float32)
        out = np.empty_like(x)
        for kernel, factor in ((stress_kernels.shared, 3.0), (getattr(stress_kernels, f"own{index}"), index + 1.0)):
            kernel(x, out)
            np.testing.assert_array_equal(out, factor * x)
    except BaseException as exc:  # reported by the main thread
        errors.append(exc)


def main() -> None:
    errors: list = []
    threads = [threading.Thread(target=work, args=(k, errors)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    print(f"ok {2 * THREADS}")


if __name__ == "__main__":
    main()
