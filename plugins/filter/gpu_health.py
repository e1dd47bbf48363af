# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filters ``blackwell.sglang.gpu_health_table`` and ``gpu_policy_plan`` (logic in module_utils._gpu_health)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._gpu_health import format_table, policy_plan, table_rows


def gpu_health_table(results):
    if not isinstance(results, dict):
        raise AnsibleFilterError("gpu_health_table expects a mapping host -> gpu_health result")
    return format_table(table_rows(dict((str(k), v) for k, v in results.items())))


def gpu_policy_plan(gpus, models):
    if not isinstance(gpus, list) or not isinstance(models, list):
        raise AnsibleFilterError("gpu_policy_plan expects the gpu_health gpus list and the models list")
    return policy_plan(gpus, models)


class FilterModule(object):
    def filters(self):
        return {"gpu_health_table": gpu_health_table, "gpu_policy_plan": gpu_policy_plan}
