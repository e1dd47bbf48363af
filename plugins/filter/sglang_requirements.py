# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.sglang_requirements``: SGLang's dependencies minus what other roles own."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_requirements
short_description: Requirements and constraints that install SGLang's dependencies without replacing torch
version_added: 0.1.0
description:
  - Filters SGLang's C(Requires-Dist) (as returned by C(importlib.metadata.requires)) so that extras and protected
    distributions (torch, torchaudio, torchvision, pytorch-triton, sgl-kernel, sglang-kernel, flashinfer-*, sglang)
    are never installed through it, and pins every protected distribution that is installed to its exact current
    version in a constraints list (field report B19).
options:
  _input:
    description: The package's requirement strings.
    type: list
    elements: str
    required: true
  mode:
    description: C(all), C(none), or a list of declared dependency names to install (SGLang's pins are kept).
    type: raw
    default: all
  excludes:
    description: More names or shell patterns to leave out.
    type: list
    elements: str
    default: []
  extra:
    description: Requirement strings appended verbatim.
    type: list
    elements: str
    default: []
  protected:
    description: Names or shell patterns owned by other roles (replaces the default list).
    type: list
    elements: str
  installed:
    description: Mapping of installed distribution name to version, for the constraints.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Compute what to install
  ansible.builtin.set_fact:
    plan: "{{ requires | blackwell.sglang.sglang_requirements(mode='all', excludes=['timm'], installed=dists) }}"
"""

RETURN = r"""
_value:
  description:
    - C(requirements) (list of requirement strings), C(constraints) (list of C(name==version)), C(excluded)
      (list of C({requirement, name, reason})), C(extras_skipped) (int).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils import _sglang_deps as deps


def sglang_requirements(requires, mode="all", excludes=(), extra=(), protected=None, installed=None):
    protected = deps.DEFAULT_PROTECTED if protected is None else tuple(protected)
    try:
        plan = deps.select_requirements(requires, mode=mode, excludes=excludes, extra=extra, protected=protected)
    except ValueError as exc:
        raise AnsibleFilterError("sglang_requirements: %s" % exc)
    plan["constraints"] = deps.constraint_lines(installed or {}, protected=protected)
    return plan


class FilterModule(object):
    def filters(self):
        return {"sglang_requirements": sglang_requirements}
