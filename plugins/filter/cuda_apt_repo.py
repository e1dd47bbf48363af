# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.cuda_apt_repo``: NVIDIA's CUDA apt repository directory for a host's facts."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cuda_apt_repo
short_description: NVIDIA's CUDA apt repository directory (slug and architecture) for a host's distribution facts
version_added: 0.1.0
description:
  - Field report B33. The slug is O(slug) when set, else O(slug_map)[distribution] looked up by the full
    C(distribution_version), then its major.minor, then its major version, so Debian 12.11 finds C(debian12).
  - The same function decides the preflight's C(distribution) check (C(blackwell.sglang.preflight_evaluate)), so a
    preflight PASS is a repository the C(cuda_toolchain) role finds.
options:
  _input:
    description: Ansible facts with C(distribution), C(distribution_version) and C(architecture) (C(ansible_facts)).
    type: dict
    required: true
  slug_map:
    description: 'Distribution to version to slug, C({"Debian": {"12": "debian12"}}) (C(sglang_stack_cuda_apt_distro_slugs)).'
    type: dict
    required: true
  arch_map:
    description: 'Architecture to repository directory, C({"x86_64": "x86_64", "aarch64": "sbsa"}).'
    type: dict
    required: true
  slug:
    description: A forced slug (a derivative on its base, a mirror); empty derives it.
    type: str
    default: ""
  supported:
    description: 'Optional C({architecture: [slug, ...]}) of the slugs NVIDIA publishes per architecture.'
    type: dict
"""

EXAMPLES = r"""
- name: Resolve the repository
  ansible.builtin.set_fact:
    repo: "{{ ansible_facts | blackwell.sglang.cuda_apt_repo(sglang_stack_cuda_apt_distro_slugs, sglang_stack_cuda_apt_arch_map) }}"
  # Debian 12.11 on x86_64: {"slug": "debian12", "arch": "x86_64", "path": "debian12/x86_64", "problem": ""}
"""

RETURN = r"""
_value:
  description:
    - C(slug), C(arch) (the repository directory, empty when unknown), C(path) (C(<slug>/<arch>)) and C(problem)
      (empty, or why there is no repository, naming the distribution, version, architecture and the known choices).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import apt_repository


def cuda_apt_repo(facts, slug_map, arch_map, slug="", supported=None):
    if not isinstance(facts, dict):
        raise AnsibleFilterError("cuda_apt_repo: expected the host's facts (a dict), got %r" % (facts,))
    for label, value in (("slug_map", slug_map), ("arch_map", arch_map)):
        if not isinstance(value, dict):
            raise AnsibleFilterError("cuda_apt_repo: %s must be a dict, got %r" % (label, value))
    return apt_repository(facts.get("distribution"), facts.get("distribution_version"), facts.get("architecture"),
                          slug_map, arch_map, slug or "", supported)


class FilterModule(object):
    def filters(self):
        return {"cuda_apt_repo": cuda_apt_repo}
