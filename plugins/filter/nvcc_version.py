# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.nvcc_version``: parse ``nvcc --version`` output."""

from __future__ import annotations

DOCUMENTATION = r"""
name: nvcc_version
short_description: Parse the output of C(nvcc --version)
version_added: 0.1.0
description:
  - Trusts only the C(release X.Y, VX.Y.Z) line; the C(Build cuda_...) line changed format across CUDA releases
    (field report B21).
options:
  _input:
    description: The whole stdout of C($CUDA_HOME/bin/nvcc --version).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Record the nvcc version
  ansible.builtin.set_fact:
    cuda_toolchain_nvcc_version: "{{ (nvcc_out.stdout | blackwell.sglang.nvcc_version).version }}"  # "13.0.88"
"""

RETURN = r"""
_value:
  description: C(version) (C("13.0.88")), C(release) (C("13.0")), C(major), C(minor), C(patch) (ints).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import nvcc_facts


def nvcc_version(text):
    try:
        return nvcc_facts(text)
    except ValueError as exc:
        raise AnsibleFilterError("nvcc_version: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"nvcc_version": nvcc_version}
