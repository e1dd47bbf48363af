# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.pip_report_check``: would this pip resolution touch a protected package?"""

from __future__ import annotations

DOCUMENTATION = r"""
name: pip_report_check
short_description: Find protected distributions in a pip --dry-run --report before anything is installed
version_added: 0.1.0
description:
  - Reads the JSON that C(pip install --dry-run --report) writes and lists every protected distribution (torch,
    torchvision, sgl-kernel, flashinfer-*, ...) that the resolution would install or replace, with the packages
    that require it. The verdict is C(torch_replaced) when torch is among them (field report B19).
options:
  _input:
    description: The parsed report (a mapping with an C(install) list) or its JSON text.
    type: raw
    required: true
  installed:
    description: Mapping of installed distribution name to version.
    type: dict
    default: {}
  protected:
    description: Names or shell patterns to guard (replaces the default list).
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Refuse a resolution that would swap torch
  ansible.builtin.assert:
    that: (dry_run.stdout | blackwell.sglang.pip_report_check(installed=dists)).ok
"""

RETURN = r"""
_value:
  description: C(ok) (bool), C(verdict) (C(ok), C(torch_replaced), C(protected_package_changed)), C(changes)
    (list of C({name, from, to, required_by})), C(install_count).
  type: dict
"""

import json

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils import _sglang_deps as deps


def pip_report_check(report, installed=None, protected=None):
    if isinstance(report, (str, bytes)):
        try:
            report = json.loads(report)
        except ValueError as exc:
            raise AnsibleFilterError("pip_report_check: the report is not JSON: %s" % exc)
    if not isinstance(report, dict):
        raise AnsibleFilterError("pip_report_check expects a pip report mapping, got %s" % type(report).__name__)
    protected = deps.DEFAULT_PROTECTED if protected is None else tuple(protected)
    return deps.report_changes(report, installed=installed or {}, protected=protected)


class FilterModule(object):
    def filters(self):
        return {"pip_report_check": pip_report_check}
