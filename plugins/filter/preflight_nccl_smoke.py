# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.preflight_nccl_smoke``: the all-reduce smoke test result as a preflight check."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preflight_nccl_smoke
short_description: Turn an NCCL all-reduce smoke test run into a preflight check
version_added: 0.1.0
description:
  - Reads the registered result of C(roles/preflight/files/nccl_allreduce_smoke.py) (exit status and the JSON line it
    prints) and returns a check named C(nccl_allreduce_smoke) with C(status) pass or fail, C(message) and C(remedy).
  - A timeout is C(nccl_p2p_hang) (field report B28).
options:
  _input:
    description: The registered result of the script task (C(rc), C(stdout)).
    type: dict
    required: true
  service_env:
    description: The environment the test ran with (C(sglang_stack_service_env)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Add the smoke test to the checks
  ansible.builtin.set_fact:
    preflight_checks: "{{ preflight_checks + [smoke | blackwell.sglang.preflight_nccl_smoke(sglang_stack_service_env)] }}"
"""

RETURN = r"""
_value:
  description: One check (C(name), C(status), C(message), C(remedy)).
  type: dict
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._preflight import check_nccl_smoke


def preflight_nccl_smoke(result, service_env=None):
    result = result or {}
    return check_nccl_smoke(result.get("rc"), result.get("stdout"), service_env or {})


class FilterModule(object):
    def filters(self):
        return {"preflight_nccl_smoke": preflight_nccl_smoke}
