# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.gpu_health_table``: the fleet's gpu_health results as one table (module_utils._gpu_health)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._gpu_health import format_table, table_rows


def gpu_health_table(results):
    if not isinstance(results, dict):
        raise AnsibleFilterError("gpu_health_table expects a mapping host -> gpu_health result")
    return format_table(table_rows(dict((str(k), v) for k, v in results.items())))


class FilterModule(object):
    def filters(self):
        return {"gpu_health_table": gpu_health_table}
