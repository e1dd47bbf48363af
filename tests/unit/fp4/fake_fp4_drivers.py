"""Test doubles for the probe runner's ``driver_module`` hook (unit tests only).

Each fake "kernel" computes the exact NVFP4 product from the reference and then injects one fault, so the
runner's real machinery (fork server or spawned children, timeouts, JSON, verdict aggregation) is exercised
on CPU.  Never shipped by the module.
"""

import os
import signal
import time

SGLANG = {
    "gemm/fake_exact": "fake_exact",
    "gemm/fake_slow_exact": "fake_slow_exact",
    "gemm/fake_nan": "fake_nan",
    "gemm/fake_zeros_m150": "fake_zeros_m150",
    "gemm/fake_garbage_row": "fake_garbage_row",
    "gemm/fake_unsupported": "fake_unsupported",
    "gemm/fake_segfault": "fake_segfault",
    "gemm/fake_hang": "fake_hang",
    "gemm/fake_cuda_error": "fake_cuda_error",
}


class BackendSupportedError(Exception):
    """Same name as flashinfer.utils.BackendSupportedError."""


def gemm_driver(key, torch, cc):
    import nvfp4_reference as ref

    if key == "gemm/fake_unsupported":
        def refuse(a_q, b_q, alpha, out):
            raise BackendSupportedError("mm_fp4 does not support backend 'fake' with capability %d" % cc)
        return (lambda b_q: b_q), refuse

    def call(a_q, b_q, alpha, out):
        y = ref.reference_gemm(a_q, b_q).to(torch.bfloat16)
        m = y.shape[0]
        if key == "gemm/fake_slow_exact":
            time.sleep(0.05)  # clearly slower than the exact fake on any machine
        elif key == "gemm/fake_nan" and m >= 9:
            y[m // 2, 3] = float("nan")
        elif key == "gemm/fake_zeros_m150" and m == 150:
            y[128:] = 0
        elif key == "gemm/fake_garbage_row" and m == 128:
            y[77] = torch.randn(y.shape[1], generator=torch.Generator().manual_seed(1)).to(device=y.device, dtype=y.dtype) * y[77].float().std()
        elif key == "gemm/fake_segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif key == "gemm/fake_hang":
            time.sleep(3600)
        elif key == "gemm/fake_cuda_error":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        out.copy_(y)
        return out

    return (lambda b_q: b_q), call
