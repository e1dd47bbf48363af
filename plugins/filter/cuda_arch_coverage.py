# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.cuda_arch_coverage``: does an arch list run on a GPU of a compute capability?"""

from __future__ import annotations

DOCUMENTATION = r"""
name: cuda_arch_coverage
short_description: Check that a CUDA arch list (for example torch.cuda.get_arch_list()) covers a compute capability
version_added: 0.1.0
description:
  - Field report B14 - a torch or kernel build without C(sm_120) fails at run time with
    C(no kernel image is available for execution on the device).
  - C(sm_XY) SASS covers capability X.Y and later minors of the same major; C(sm_XYa) covers exactly X.Y;
    C(compute_XY) PTX covers any capability >= X.Y through the driver JIT and is reported with a warning.
options:
  _input:
    description: Architectures, for example C(['sm_80', 'sm_90', 'sm_120', 'compute_120']).
    type: list
    elements: str
    required: true
  compute_cap:
    description: The GPU's compute capability, C("12.0") (also C(12.0), C("120"), C("sm_120")).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Assert the installed torch has kernels for the GPU
  ansible.builtin.assert:
    that: (torch_arch_list | blackwell.sglang.cuda_arch_coverage('12.0')).covered
"""

RETURN = r"""
_value:
  description:
    - C(covered) (bool), C(via) (the covering entry or null), C(kind) (C(exact), C(sass), C(ptx) or null),
      C(compute_cap) (C("12.0")), C(warning) (str or null), C(message) (str).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import arch_coverage


def cuda_arch_coverage(arch_list, compute_cap):
    if isinstance(arch_list, str) or not isinstance(arch_list, (list, tuple)):
        raise AnsibleFilterError("cuda_arch_coverage: expected a list of architectures, got %r" % (arch_list,))
    try:
        return arch_coverage(arch_list, compute_cap)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("cuda_arch_coverage: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"cuda_arch_coverage": cuda_arch_coverage}
