# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.hardware_profile``: the SM12x hardware profile of compute capabilities or targets."""

from __future__ import annotations

DOCUMENTATION = r"""
name: hardware_profile
short_description: The SM12x hardware profile (target archs, TORCH_CUDA_ARCH_LIST, unified memory) of a fleet
version_added: 0.1.0
description:
  - One rule from compute capabilities to everything that follows them (module_utils/_hardware_profile.py).
    C(12.0) -> C(sm_120a) (RTX PRO 6000 / RTX 5090), C(12.1) -> C(sm_121a) (DGX Spark GB10, unified memory), both for
    a mixed fleet.
  - The contract's C(sglang_stack_target_archs) is derived from it when the inventory does not set it; the kernel
    build's C(TORCH_CUDA_ARCH_LIST) comes from the role's target archs through it.
options:
  _input:
    description: Compute capabilities (C("12.1")) or targets (C(sm_121a)); duplicates and order do not matter.
    type: list
    elements: raw
    required: true
"""

EXAMPLES = r"""
- name: Targets of a mixed fleet
  ansible.builtin.debug:
    msg: "{{ (['12.0', '12.1', '12.1'] | blackwell.sglang.hardware_profile).target_archs }}"   # [sm_120a, sm_121a]
"""

RETURN = r"""
_value:
  description:
    - C(family), C(capabilities) (C(["12.0", "12.1"])), C(target_archs), C(torch_cuda_arch_list) (C("12.0a 12.1a")),
      C(nvfp4_jit_arch_lists) (capability -> C("12.1a")), C(unified_memory) (bool), C(members) (one dict per
      capability), C(outside) (capabilities outside the family), C(unreadable).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._hardware_profile import profile


def hardware_profile(values):
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise AnsibleFilterError("hardware_profile: expected a list of compute capabilities or targets, got %r"
                                 % (values,))
    return profile(values)


class FilterModule(object):
    def filters(self):
        return {"hardware_profile": hardware_profile}
