# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Controller-side filter of the sglang_gateway role: the fleet as the gateway sees it, read from the inventory
(hostvars); the rules live in module_utils/_gateway.py, the checks and the argv in the module sglang_gateway_args."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.module_utils import _gateway


def _service_value(hv, name):
    """A worker's service setting from the inventory: the stack contract's ``sglang_stack_service_<name>``
    (roles/sglang_stack; the inventories set it there). None when it is not set."""
    return hv.get("sglang_stack_service_" + name)


def _servers(host_names, hostvars, groups, default_port, default_scheme):
    out = []
    for host in list(host_names or []):
        hv = hostvars[host]
        group = _service_value(hv, "multinode_group") or ""
        members = list(groups.get(group) or []) if group else []
        ranks = {}
        for member in members:
            rank = hostvars[member].get("sglang_service_node_rank")
            if rank not in (None, ""):
                ranks[member] = int(rank)
        out.append({
            "host": host,
            "address": hv.get("sglang_gateway_worker_address") or hv.get("ansible_host") or host,
            "port": hv.get("sglang_gateway_worker_port") or default_port,
            "scheme": hv.get("sglang_gateway_worker_scheme") or default_scheme,
            "multinode_members": members,
            "ranks": ranks,
            "service_port": _service_value(hv, "port"),
            "service_host": _service_value(hv, "host"),
        })
    return out


def sglang_gateway_workers(host_names, hostvars, groups, default_port, default_scheme="http",
                           group_name="sglang_servers"):
    """The worker group's servers as read from the inventory and the gateway's workers: ``{"servers", "workers"}``.

    Per server host: ``sglang_gateway_worker_address`` (else ``ansible_host``, else the inventory name),
    ``sglang_gateway_worker_port`` (else ``default_port``), ``sglang_gateway_worker_scheme``, the multi-node group
    (``sglang_stack_service_multinode_group``) with its members' explicit ``sglang_service_node_rank``; also SGLang's
    port and bind address (``sglang_stack_service_port`` / ``_host``) for the checks of the module
    sglang_gateway_args. One worker per server (rank 0 of a multi-node server, _gateway.plan_workers); a
    GatewayError becomes a filter error.
    """
    try:
        servers = _servers(host_names, hostvars, groups, default_port, default_scheme)
        return {"servers": servers, "workers": _gateway.plan_workers(servers, group_name)}
    except (_gateway.GatewayError, KeyError, TypeError) as exc:
        raise AnsibleFilterError("sglang_gateway: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {
            "sglang_gateway_workers": sglang_gateway_workers,
        }
