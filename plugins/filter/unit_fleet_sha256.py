# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.unit_fleet_sha256``: a unit's hash with the per-node multi-node flags masked."""

from __future__ import annotations

DOCUMENTATION = r"""
name: unit_fleet_sha256
short_description: sha256 of a systemd unit's text with the per-node flags of a multi-node server masked
version_added: "0.1.0"
description:
  - Calls C(module_utils/_fleet.unit_fleet_sha256). The values of C(--node-rank) and C(--dist-init-addr) are replaced
    by a placeholder before hashing, so the ranks of one multi-node server (same release, same unit otherwise) hash
    alike. The release manifest records it as C(unit.fleet_sha256); playbooks/audit.yml compares it across the fleet,
    while each host's exact file hash is still compared with its own manifest.
options:
  _input:
    description: The unit file's text.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Hash the unit for the fleet comparison
  ansible.builtin.set_fact:
    unit_hash: "{{ unit_text | blackwell.sglang.unit_fleet_sha256 }}"
"""

RETURN = r"""
_value:
  description: 64 hex characters, or null for null input.
  type: str
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._fleet import unit_fleet_sha256


class FilterModule(object):
    def filters(self):
        return {"unit_fleet_sha256": unit_fleet_sha256}
