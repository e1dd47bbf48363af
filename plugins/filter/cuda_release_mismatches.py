# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.cuda_release_mismatches``: CUDA pip wheels that left the requested major.minor."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cuda_release_mismatches
short_description: List CUDA pip distributions that are missing or not at the requested CUDA major.minor
version_added: 0.1.0
description:
  - Field report B08 - the resolver lets C(nvidia-cuda-nvcc) float to 13.2 while C(nvidia-cuda-runtime) stays at
    13.0, and ptxas / the toolkit headers then disagree. Every CUDA wheel must share one major.minor.
options:
  _input:
    description: Mapping of distribution name to installed version (null or empty when not installed).
    type: dict
    required: true
  cuda_version:
    description: The requested CUDA major.minor, C("13.0").
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Fail on mixed CUDA wheel minors
  ansible.builtin.assert:
    that: (dists | blackwell.sglang.cuda_release_mismatches('13.0')) | length == 0
"""

RETURN = r"""
_value:
  description: One C({name, version, expected}) dict per missing or mismatched distribution, sorted by name.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import cuda_release_mismatches as _bad


def cuda_release_mismatches(dists, cuda_version):
    if not isinstance(dists, dict):
        raise AnsibleFilterError("cuda_release_mismatches: expected a dict of name -> version, got %r" % (dists,))
    try:
        return _bad(dists, cuda_version)
    except ValueError as exc:
        raise AnsibleFilterError("cuda_release_mismatches: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"cuda_release_mismatches": cuda_release_mismatches}
