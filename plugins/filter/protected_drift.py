# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.protected_drift``: did an install change torch or another protected distribution?"""

from __future__ import annotations

DOCUMENTATION = r"""
name: protected_drift
short_description: Compare protected distributions (torch, flashinfer, sgl-kernel, ...) before and after an install
version_added: 0.1.0
description:
  - Returns every protected distribution whose version changed, appeared or disappeared between two snapshots of a
    venv (mappings of distribution name to version). The verdict is C(torch_replaced) when torch is among them
    (field report B19). C(sglang) itself is ignored.
options:
  _input:
    description: Distributions before the install.
    type: dict
    required: true
  after:
    description: Distributions after the install.
    type: dict
    required: true
  protected:
    description: Names or shell patterns to compare (replaces the default list).
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Torch must be exactly what it was
  ansible.builtin.assert:
    that: (before | blackwell.sglang.protected_drift(after)).ok
"""

RETURN = r"""
_value:
  description: C(ok), C(verdict) (C(ok), C(torch_replaced), C(protected_package_changed)), C(changes)
    (list of C({name, from, to})), C(torch) (version before).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils import _sglang_deps as deps


def protected_drift(before, after, protected=None):
    if not isinstance(before, dict) or not isinstance(after, dict):
        raise AnsibleFilterError("protected_drift expects two mappings of distribution name to version")
    protected = deps.DEFAULT_PROTECTED if protected is None else tuple(protected)
    return deps.protected_drift(before, after, protected=protected)


class FilterModule(object):
    def filters(self):
        return {"protected_drift": protected_drift}
