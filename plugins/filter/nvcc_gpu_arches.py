# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.nvcc_gpu_arches``: the virtual architectures an nvcc can target."""

from __future__ import annotations

DOCUMENTATION = r"""
name: nvcc_gpu_arches
short_description: Parse C(nvcc --list-gpu-arch) into a list of C(compute_NN) names
version_added: 0.1.0
description:
  - Field report B04 - decide whether a toolkit can target SM120 from what nvcc lists, not from its version number.
options:
  _input:
    description: The stdout of C($CUDA_HOME/bin/nvcc --list-gpu-arch).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Fail when nvcc cannot target compute_120
  ansible.builtin.assert:
    that: "'compute_120' in (arch_out.stdout | blackwell.sglang.nvcc_gpu_arches)"
"""

RETURN = r"""
_value:
  description: Virtual architectures in output order, for example C(["compute_75", ..., "compute_120", "compute_121"]).
  type: list
  elements: str
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import gpu_arch_list


def nvcc_gpu_arches(text):
    return gpu_arch_list(text)


class FilterModule(object):
    def filters(self):
        return {"nvcc_gpu_arches": nvcc_gpu_arches}
