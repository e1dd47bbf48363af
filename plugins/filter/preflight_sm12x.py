# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.preflight_sm12x``: the SM12x hardware profile's preflight checks."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preflight_sm12x
short_description: The SM12x hardware profile of a host and its fleet, with its preflight checks
version_added: 0.1.0
description:
  - Runs the checks of C(plugins/module_utils/_preflight_sm12x.py) on the controller (C(gpu_family),
    C(kernel_target_archs), C(nvcc_target_archs), C(torch_arch_profile), C(nccl_fabric), C(nccl_smoke_size),
    C(sm12x_service_env)) and returns the host's capabilities, the fleet's profile and what the profile adds to the
    service environment.
options:
  _input:
    description: The C(gpu_facts) result.
    type: dict
    required: true
  toolchain:
    description: The C(toolchain_facts) result.
    type: dict
    required: true
  host:
    description: The C(host_facts) result.
    type: dict
    required: true
  config:
    description: Settings (keys of C(DEFAULT_CONFIG) in C(_preflight_sm12x.py)); the role builds it from its variables.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Evaluate the profile
  ansible.builtin.set_fact:
    sm12x: "{{ gpu | blackwell.sglang.preflight_sm12x(toolchain, host, {'fallback_capability': '12.1'}) }}"
"""

RETURN = r"""
_value:
  description: C(host), C(profile), C(target_archs), C(checks), C(service_env), C(env_reasons), C(smoke).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._preflight_sm12x import evaluate


def preflight_sm12x(gpu, toolchain, host, config):
    try:
        return evaluate(gpu, toolchain, host, config)
    except (TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError("preflight_sm12x: %s: %s" % (type(exc).__name__, exc))


class FilterModule(object):
    def filters(self):
        return {"preflight_sm12x": preflight_sm12x}
