# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.manifest_drift``: fleet and host drift from release manifests."""

from __future__ import annotations

DOCUMENTATION = r"""
name: manifest_drift
short_description: Report drift between the release manifests of a fleet and the hosts' live state
version_added: 0.1.0
description:
  - Compares the C(manifest.json) of each host's live release (written by the C(sglang_release) role) across the
    fleet (release id, SGLang commit and version, torch build, key distributions, wheel sha256s, unit sha256, the
    FP4 probe's recommended backends, the model's revision and verification-manifest digest) against the majority
    value; when live state is given, each host's manifest against what the host runs now (installed distributions,
    unit file hash); when pins are given, each host's recorded model revision against the inventory's 40-hex pin.
options:
  _input:
    description: Mapping of host name to its manifest (an empty mapping or null when the host has none).
    type: dict
    required: true
  live:
    description: Optional mapping of host name to C({distributions, torch, unit_sha256}) read now.
    type: dict
  pins:
    description: Optional mapping of host name to C({model_revision}) from the inventory (C(sglang_model_revision)).
    type: dict
"""

EXAMPLES = r"""
- name: Compare the fleet
  ansible.builtin.set_fact:
    drift: "{{ manifests | blackwell.sglang.manifest_drift(live=live_state) }}"
"""

RETURN = r"""
_value:
  description: C(fleet), C(hosts) and C(pins) lists of C({host, field, value, expected}), C(drift) (bool), C(summary) lines.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._fleet import drift_report


def manifest_drift(manifests, live=None, pins=None):
    if not isinstance(manifests, dict):
        raise AnsibleFilterError("manifest_drift expects a mapping of host -> manifest, got %s" % type(manifests).__name__)
    return drift_report(dict(manifests), dict(live) if live else None, dict(pins) if pins else None)


class FilterModule(object):
    def filters(self):
        return {"manifest_drift": manifest_drift}
