# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.preflight_evaluate``: facts in, preflight checks out."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preflight_evaluate
short_description: Turn gpu_facts, toolchain_facts and host_facts results into preflight checks
version_added: 0.1.0
description:
  - Runs every preflight check of C(plugins/module_utils/_preflight.py) on the controller and returns
    C(checks) (list of C(name), C(status) pass/warn/fail/skip, C(message), C(remedy)), C(failed) (names),
    C(service_env), C(service_args), C(has_target_gpu), C(reboot_required), C(build) and C(build_jobs).
  - The companion filter C(blackwell.sglang.preflight_report) renders the failed checks with their remedies.
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
    description: Check settings (keys of C(DEFAULT_CONFIG) in C(_preflight.py)); the role builds it from its variables.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Evaluate
  ansible.builtin.set_fact:
    result: "{{ gpu | blackwell.sglang.preflight_evaluate(toolchain, host, {'tp_size': 2}) }}"
"""

RETURN = r"""
_value:
  description: C(checks), C(failed), C(service_env), C(service_args), C(has_target_gpu), C(reboot_required), C(build), C(build_jobs).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._preflight import evaluate
from ansible_collections.blackwell.sglang.plugins.module_utils._versions import MissingPackaging


def preflight_evaluate(gpu, toolchain, host, config):
    try:
        return evaluate(gpu, toolchain, host, config)
    except (MissingPackaging, TypeError, ValueError, KeyError) as exc:
        raise AnsibleFilterError("preflight_evaluate: %s: %s" % (type(exc).__name__, exc))


class FilterModule(object):
    def filters(self):
        return {"preflight_evaluate": preflight_evaluate}
