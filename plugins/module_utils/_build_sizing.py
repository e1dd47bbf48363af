# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""How many compiler jobs a CUDA kernel build may run on a host without being OOM-killed.

One rule, used by the preflight RAM check and by the sgl_kernel_sm120 build environment:

    jobs = max(1, min(nproc, floor((MemAvailable - headroom) / gib_per_job)))

Numbers and their sources:
- ``gib_per_job = 8``: SM120 CUTLASS translation units peak at roughly 3-8 GiB per nvcc process (field report B05;
  FlashInfer PR #3899 sizes its JIT at 8 GiB per job; flash-attention PR #2079 measured 3-5 GB per nvcc thread).
- ``headroom_gib = 16``: left for the OS, the Ansible worker and page cache (same FlashInfer PR).
- Worked examples from B05: 16 cores / MemAvailable 61000000 kB -> 5 jobs; 20 cores / 118566368 kB -> 12 jobs.
- ``compile_threads`` is nvcc ``--threads`` per translation unit (sgl-kernel's ``SGL_KERNEL_COMPILE_THREADS``, default 32
  upstream). nvcc only parallelises across the gencodes of one unit, so with several jobs we give each job one thread
  unless memory allows more: threads = max(1, min(gencodes, floor(budget_jobs / jobs))).
"""

from __future__ import annotations

GIB = 1024 ** 3


def build_parallelism(nproc, mem_available_bytes, gib_per_job=8.0, headroom_gib=16.0, gencodes=1, max_jobs=None):
    """Size a CUDA build.

    :param nproc: usable CPU cores (int >= 1).
    :param mem_available_bytes: ``MemAvailable`` in bytes (``/proc/meminfo`` reports kB: multiply by 1024).
    :param gib_per_job: peak GiB one compiler process may take.
    :param headroom_gib: GiB kept free for everything else.
    :param gencodes: gencode targets per translation unit (upper bound for useful nvcc ``--threads``).
    :param max_jobs: optional operator cap (int) applied last.
    :returns: dict ``{"jobs": int, "compile_threads": int, "peak_gib": float, "budget_jobs": int}`` where ``peak_gib`` is
        the worst-case memory the sized build may use (jobs x threads x gib_per_job).
    :raises ValueError: on a non-positive core count, negative memory or non-positive per-job size.
    """
    nproc = int(nproc)
    mem = float(mem_available_bytes)
    if nproc < 1:
        raise ValueError("nproc must be >= 1, got %r" % nproc)
    if mem < 0:
        raise ValueError("mem_available_bytes must be >= 0, got %r" % mem_available_bytes)
    if float(gib_per_job) <= 0:
        raise ValueError("gib_per_job must be > 0, got %r" % gib_per_job)
    budget = int((mem / GIB - float(headroom_gib)) // float(gib_per_job))
    budget = max(1, budget)
    jobs = max(1, min(nproc, budget))
    if max_jobs is not None:
        jobs = max(1, min(jobs, int(max_jobs)))
    threads = max(1, min(int(gencodes), budget // jobs))
    return {
        "jobs": jobs,
        "compile_threads": threads,
        "peak_gib": round(jobs * threads * float(gib_per_job), 1),
        "budget_jobs": budget,
    }
