#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.managed_files: thin wrapper around module_utils._managed_files."""

from __future__ import annotations

DOCUMENTATION = r"""
module: managed_files
short_description: Check and put right a role's directories, files and removals in one module call
version_added: 0.1.0
description:
  - Does in one module run what a list of M(ansible.builtin.file), M(ansible.builtin.copy) and
    M(ansible.builtin.template) tasks does in one or two runs each; on a converged host that is one round trip per
    role instead of one or two per file.
  - Every entry is read and validated first (absolute path, octal mode, owner and group that exist, nothing of another
    type in the way); a bad entry fails naming it before anything on the host changes.
  - Directories are created (with missing parents) or get their mode, owner and group; files are compared byte for
    byte and written atomically (a temporary file in the same directory gets the content, the owner and the mode and
    is renamed over the destination); I(absent) removes files and links, never a directory.
  - Templates are rendered on the controller, with the P(ansible.builtin.template#lookup) lookup in I(content) (see
    EXAMPLES). A secret goes into a task of its own with C(no_log), so that the other files keep their diff.
  - Supports check mode and diff mode (the before and after text of every file whose content changes).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  owner:
    description: Owner of every entry that does not name its own; omitted, owners are not managed (see I(files)).
    type: str
  group:
    description: Group of every entry that does not name its own.
    type: str
  directories:
    description: Directories that must exist with this mode, owner and group, created in the order given.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path.
        type: path
        required: true
      mode:
        description: Octal mode as a string, for example C("0755") (an unquoted YAML C(0755) is read as those bits too).
        type: raw
        required: true
      owner:
        description:
          - Owner name; omitted, the task's I(owner).
          - Without either, a new entry belongs to the module's user and an existing one keeps its owner.
        type: str
      group:
        description: Group name; omitted, the task's I(group), and as for I(owner) without either.
        type: str
  files:
    description: Regular files that must have exactly this content (UTF-8), mode, owner and group.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description:
          - Absolute path; its directory must exist or be listed in I(directories).
          - In check mode a missing directory is reported, not an error (the task that would create it did not run).
        type: path
        required: true
      content:
        description: The whole content of the file.
        type: str
        required: true
      mode:
        description: Octal mode as a string, for example C("0644") (an unquoted YAML C(0644) is read as those bits too).
        type: raw
        required: true
      owner:
        description:
          - Owner name; omitted, the task's I(owner).
          - Without either, a new entry belongs to the module's user and an existing one keeps its owner.
        type: str
      group:
        description: Group name; omitted, the task's I(group), and as for I(owner) without either.
        type: str
  absent:
    description: Files or links that must not exist (a directory here is an error).
    type: list
    elements: path
    default: []
notes:
  - The result's C(changed_paths) lets a task react to one file only (see EXAMPLES, the daemon reload).
"""

EXAMPLES = r"""
- name: Write the environment file, the launcher and the unit
  blackwell.sglang.managed_files:
    owner: root
    group: root
    directories:
      - {path: /etc/sglang, mode: "0755"}
    files:
      - dest: /etc/sglang/sglang.env
        content: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
        mode: "0644"
      - dest: /etc/systemd/system/sglang.service
        content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
        mode: "0644"
    absent:
      - /etc/sglang/secrets.env
  register: written
  notify: Restart SGLang service

- name: Reload systemd only when the unit file changed
  ansible.builtin.systemd_service:
    daemon_reload: true
  when: "'/etc/systemd/system/sglang.service' in written.changed_paths"
"""

RETURN = r"""
changed_paths:
  description: The paths that were (in check mode, would be) created, rewritten, given other attributes or removed.
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/sglang.service]
results:
  description: One entry per directory, file and removal, in that order.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The entry's path.
      type: str
    kind:
      description: C(directory), C(file) or C(absent).
      type: str
    action:
      description: C(create), C(update) (content), C(attributes) (mode, owner or group only), C(remove) or C(none).
      type: str
    changed:
      description: Whether the action is anything but C(none).
      type: bool
    reasons:
      description: What differed, for example C(missing), C(content), C(mode 0600 -> 0644).
      type: list
      elements: str
  sample:
    - {path: /etc/sglang, kind: directory, action: none, changed: false, reasons: []}
    - {path: /etc/systemd/system/sglang.service, kind: file, action: update, changed: true, reasons: [content]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _managed_files as mf

_ATTRS = dict(mode=dict(type="raw", required=True), owner=dict(type="str"), group=dict(type="str"))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="dict", default=[],
                             options=dict(path=dict(type="path", required=True), **_ATTRS)),
            files=dict(type="list", elements="dict", default=[],
                       options=dict(dest=dict(type="path", required=True), content=dict(type="str", required=True),
                                    **_ATTRS)),
            absent=dict(type="list", elements="path", default=[]),
            owner=dict(type="str"),
            group=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for entry in params["directories"] + params["files"]:
        for attr in ("owner", "group"):
            if entry.get(attr) is None:
                entry[attr] = params[attr]
    try:
        actions = mf.plan(params["directories"], params["files"], params["absent"], check_mode=module.check_mode)
    except mf.PlanError as err:
        module.fail_json(msg="managed_files: %s; nothing was changed" % err)
    changed_paths = [a["path"] for a in actions if a["action"] != "none"]
    result = dict(changed=bool(changed_paths), changed_paths=changed_paths, results=mf.report(actions))
    if module._diff and changed_paths:
        result["diff"] = mf.diffs(actions)
    if not module.check_mode and changed_paths:
        try:
            mf.apply(actions)
        except OSError as err:
            module.fail_json(msg="managed_files: %s: %s" % (getattr(err, "filename", "") or "", err), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
