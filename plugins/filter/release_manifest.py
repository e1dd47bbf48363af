# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.release_manifest``: a release's manifest.json as read from a host, and its model."""

from __future__ import annotations

DOCUMENTATION = r"""
name: release_manifest
short_description: Parse a release's manifest.json as slurp read it, and say which model the release served
version_added: "0.1.0"
description:
  - Calls C(module_utils/_fleet.read_manifest). Never fails; what is wrong with the file is returned as
    C(problem), naming the file (and the byte offset of bytes that are not UTF-8).
  - Used by C(sglang_release) C(tasks_from=rollback), to serve the release returned to with the model it recorded,
    and by C(sglang_audit), which reads each host's live manifest.
options:
  _input:
    description: The C(content) of an C(ansible.builtin.slurp) result (base64), or null when the file could not be read.
    type: str
    required: true
  path:
    description: The file's path, for the messages.
    type: str
    default: manifest.json
  error:
    description: Why the file could not be read (slurp's C(msg)), when the input is null.
    type: str
"""

EXAMPLES = r"""
- name: Read the manifest of the release to return to
  ansible.builtin.slurp:
    src: /opt/sglang/releases/0123456789ab/manifest.json
  register: raw
  failed_when: false

- name: Take its model
  ansible.builtin.set_fact:
    old_model: "{{ (raw.content | default(none) | blackwell.sglang.release_manifest(error=raw.msg | default(''))).model }}"
"""

RETURN = r"""
_value:
  description:
    - C(manifest) (the parsed object, C({}) when unusable), C(problem) (null or why the file is unusable) and
      C(model) - C(recorded) (bool - C(model.path) is a non-empty string), C(path), C(revision), C(manifest_digest),
      C(source), C(repository) (strings or null), C(service_env) (the environment the service ran the model with, null
      when the manifest does not record it) and C(problem) (null or why no model is known).
  type: dict
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._fleet import read_manifest


def release_manifest(content, path="manifest.json", error=None):
    return read_manifest(content, path=path, error=error or None)


class FilterModule(object):
    def filters(self):
        return {"release_manifest": release_manifest}
