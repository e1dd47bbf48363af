# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.release_id``: the short id of a stack's release key."""

from __future__ import annotations

DOCUMENTATION = r"""
name: release_id
short_description: Short, stable id of a release key (SGLang ref, patches, CUDA, torch, arches, FlashInfer)
version_added: 0.1.0
description:
  - Normalises the stack inputs (PEP 440 versions, CUDA C(major.minor), sorted lists) into a canonical JSON
    document and returns the first O(length) hex digits of its SHA-256. The same inputs give the same id on every
    host and every run; see C(docs/release.md) for the schema.
options:
  _input:
    description:
      - Mapping with the keys C(sglang_ref) (required), C(kernel_patches), C(cuda_version), C(torch_version),
        C(cuda_archs), C(flashinfer_version) and C(extra). Unknown keys are an error.
    type: dict
    required: true
  length:
    description: Number of hex digits (8 to 64).
    type: int
    default: 12
  canonical:
    description: Return the canonical JSON text instead of the id (for manifests and debugging).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Compute the release id
  ansible.builtin.set_fact:
    sglang_release_id: "{{ {'sglang_ref': 'd28f35240a', 'cuda_version': '13.0'} | blackwell.sglang.release_id }}"
"""

RETURN = r"""
_value:
  description: The hex id (or the canonical JSON text when O(canonical=true)).
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._release import canonical_json
from ansible_collections.blackwell.sglang.plugins.module_utils._release import release_id as _release_id


def release_id(inputs, length=12, canonical=False):
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("release_id expects a mapping of stack inputs, got %s" % type(inputs).__name__)
    try:
        return canonical_json(inputs) if canonical else _release_id(inputs, length=length)
    except ValueError as exc:
        raise AnsibleFilterError("release_id: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"release_id": release_id}
