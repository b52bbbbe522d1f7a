"""The float kernels the recorded digests were computed with, pinned before numpy loads.

OpenBLAS picks its float32 GEMM kernel per CPU when it loads (SkylakeX on AVX-512 Intel cores,
Haswell on others), numpy dispatches its own loops per CPU as well, and OpenBLAS splits some
products by thread count. Each choice moves the last bits of FQT float32, BP-QAS and the
calibration's float forward pass, so the trajectory and ZO digests would be of the machine, not
of the code. The pin is the AVX2 kernels (every x86-64 CPU since 2013, AVX-512 ones included) on
one BLAS thread. `tests/conftest.py` applies it in pytest's master process, whose environment
every xdist worker and every subprocess of a test inherits; the digest printers apply it too.
"""

from __future__ import annotations

import os
import platform
import sys

FLOAT_PIN = {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
             "OPENBLAS_NUM_THREADS": "1"}
PINNED_KERNEL = FLOAT_PIN["OPENBLAS_CORETYPE"]


def cpu_has_avx2() -> bool:
    """Whether this is an x86-64 CPU with AVX2 and FMA (what OpenBLAS's Haswell kernels need)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return {"avx2", "fma"} <= set(flags)


def pin() -> bool:
    """Set the pin's environment (True) where the CPU can run it; the thread count everywhere."""
    wanted = FLOAT_PIN if cpu_has_avx2() else {"OPENBLAS_NUM_THREADS": FLOAT_PIN["OPENBLAS_NUM_THREADS"]}
    if "numpy" in sys.modules:
        if any(os.environ.get(k) != v for k, v in wanted.items()):
            raise RuntimeError("numpy was loaded before the float kernels were pinned (tests/float_pin.py)")
    else:
        os.environ.update(wanted)
    return "OPENBLAS_CORETYPE" in wanted


def pinned_kernel_in_use() -> bool:
    """Whether numpy's OpenBLAS runs the pinned kernel on one thread (read from the loaded library)."""
    from threadpoolctl import threadpool_info
    blas = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    return bool(blas) and all(i.get("architecture") == PINNED_KERNEL and i.get("num_threads") == 1
                              for i in blas)


if __name__ == "__main__":
    # `python tests/float_pin.py SCRIPT`: run a digest printer under the pin, as the tests run.
    import runpy
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/float_pin.py SCRIPT.py")
    if not pin():
        sys.exit("this CPU cannot run the pinned kernels (x86-64 with AVX2 and FMA)")
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))
    runpy.run_path(sys.argv[1], run_name="__main__")
