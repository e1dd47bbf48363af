# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.prometheus_targets``: scrape targets ``[{host, address}]`` for hosts of the inventory."""

from __future__ import annotations

DOCUMENTATION = r"""
name: prometheus_targets
short_description: Prometheus scrape targets for inventory hosts, with each host's own port
version_added: "0.1.0"
description:
  - For each host, the address is its C(sglang_prometheus_scrape_address), else its C(ansible_host), else its
    inventory name; the port is the host's variable O(port_var) (for example C(sglang_stack_service_port)), else O(port).
  - Used by C(playbooks/monitoring.yml) to build the inputs of C(blackwell.sglang.sglang_prometheus).
positional: hostvars, port_var, port
options:
  _input:
    description: Inventory host names.
    type: list
    elements: str
    required: true
  hostvars:
    description: The C(hostvars) mapping.
    type: dict
    required: true
  port_var:
    description: Name of the host variable that holds the port.
    type: str
    required: true
  port:
    description: Port when the host does not set O(port_var).
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Targets of SGLang's /metrics
  ansible.builtin.set_fact:
    targets: "{{ groups['sglang_servers'] | blackwell.sglang.prometheus_targets(hostvars, 'sglang_stack_service_port', 30000) }}"
"""

RETURN = r"""
_value:
  description: C([{host, address}]) with C(address) as C(<host>:<port>) (IPv6 addresses in brackets).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError


def prometheus_targets(hosts, hostvars, port_var, port):
    out = []
    for host in hosts or []:
        try:
            hv = hostvars[host]
        except KeyError as exc:
            raise AnsibleFilterError("prometheus_targets: %s is not in hostvars" % host) from exc
        address = hv.get("sglang_prometheus_scrape_address") or hv.get("ansible_host") or host
        value = hv.get(port_var)
        value = port if value in (None, "") else value
        try:
            value = int(value)
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError("prometheus_targets: %s of %s is %r, not a port" % (port_var, host, value)) from exc
        address = str(address)
        if ":" in address and not address.startswith("["):
            address = "[%s]" % address
        out.append({"host": str(host), "address": "%s:%d" % (address, value)})
    return out


class FilterModule(object):
    def filters(self):
        return {"prometheus_targets": prometheus_targets}
