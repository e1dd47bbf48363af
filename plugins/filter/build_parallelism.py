# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.build_parallelism``: size a CUDA build from cores and MemAvailable."""

from __future__ import annotations

DOCUMENTATION = r"""
name: build_parallelism
short_description: Size a CUDA kernel build (jobs and nvcc threads) from cores and free memory
version_added: 0.1.0
description:
  - Applies C(jobs = max(1, min(nproc, floor((MemAvailable - headroom) / gib_per_job)))), the rule shared by the
    preflight RAM check and the sgl_kernel_sm120 build (8 GiB per job and 16 GiB headroom by default, after
    field report B05 and FlashInfer PR 3899).
options:
  _input:
    description: Usable CPU cores.
    type: int
    required: true
  mem_available_mb:
    description: MemAvailable in MiB (for example C(ansible_memory_mb.nocache.free) or C(/proc/meminfo) kB / 1024).
    type: float
    required: true
  gib_per_job:
    description: Peak GiB one compiler process may take.
    type: float
    default: 8
  headroom_gib:
    description: GiB left for everything else.
    type: float
    default: 16
  gencodes:
    description: Gencode targets per translation unit (cap for nvcc --threads).
    type: int
    default: 1
  max_jobs:
    description: Optional operator cap on jobs.
    type: int
"""

EXAMPLES = r"""
- name: Size the build
  ansible.builtin.set_fact:
    sizing: "{{ ansible_processor_nproc | blackwell.sglang.build_parallelism(ansible_memory_mb.nocache.free) }}"
"""

RETURN = r"""
_value:
  description: C(jobs), C(compile_threads), C(peak_gib) (worst case GiB) and C(budget_jobs) (jobs memory alone allows).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._build_sizing import build_parallelism as _size


def build_parallelism(nproc, mem_available_mb, gib_per_job=8.0, headroom_gib=16.0, gencodes=1, max_jobs=None):
    try:
        return _size(nproc, float(mem_available_mb) * 1024 * 1024, gib_per_job=gib_per_job,
                     headroom_gib=headroom_gib, gencodes=gencodes, max_jobs=max_jobs)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("build_parallelism: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"build_parallelism": build_parallelism}
