#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.sglang_release_target: the checks before sglang_release moves `current`, in one read."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_release_target
short_description: Check the release `current` moves to (a switch to the staged release, or a rollback)
version_added: "0.1.0"
description:
  - O(move=switch) checks the staged release O(release_dir) before it is made live - a directory of
    C(<root>/releases) that exists (or check mode), O(current) a link or absent (never a real directory), and no
    failed-rollout marker O(failed_marker) in it (an earlier rollout rolled it back) unless O(allow_failed).
  - O(move=rollback) reads the O(current) and O(previous) links and chooses the release to return to (O(rollback_to)
    under C(<root>/releases), else the release O(previous) points to).
  - Refuses, naming the variable to set, a target or marker name that is not one release-directory name, no target
    release, a target that carries the failed-rollout marker O(failed_marker) (unless O(allow_failed)), and a target
    whose C(manifest.json) records no model (unless O(unrecorded_model=configured)).
  - Returns the release rolled back from, the one returned to, the model its manifest recorded, the service settings
    it was rendered with (KV-cache dtype and FP4 backend settings; C(module_utils/_fleet.read_manifest)) and its own
    FP4 probe result (O(probe_file) in the release directory). A rollback across a stack change so serves the old
    release with what decided its flags then, not with the new stack's settings and probe. Changes nothing; the role
    moves the links.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  move:
    description: C(switch) to O(release_dir), or C(rollback).
    type: str
    choices: [switch, rollback]
    default: rollback
  release_dir:
    description: The staged release to make live (C(sglang_release_dir)); required with O(move=switch).
    type: path
  root:
    description: The stack root (C(sglang_stack_root)); releases live in C(<root>/releases).
    type: path
    required: true
  current:
    description: The C(current) link (C(sglang_stack_current)).
    type: path
    required: true
  previous:
    description: The C(previous) link (C(sglang_stack_previous)); required with O(move=rollback).
    type: path
  rollback_to:
    description: A release id to return to (C(sglang_release_rollback_to)); empty = the release O(previous) points to.
    type: str
    default: ""
  failed_marker:
    description: Name of the failed-rollout marker file in a release directory (C(sglang_release_failed_marker)).
    type: str
    required: true
  allow_failed:
    description: Return to a release that carries the marker anyway (C(sglang_release_rollback_allow_failed)).
    type: bool
    default: false
  unrecorded_model:
    description: C(refuse) a release whose manifest records no model, or serve the C(configured) one.
    type: str
    choices: [refuse, configured]
    default: refuse
  probe_file:
    description:
      - The FP4 probe's result file in a release directory (fp4_probe's C(fp4_probe_result_file) there), read with
        O(move=rollback).
    type: str
    default: probe.json
  configured_model:
    description: The model configured now (C(sglang_stack_model_path)), for the messages.
    type: str
    default: ""
  host:
    description: The inventory name, for the messages.
    type: str
    default: this host
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - Read-only; never changes the host.
"""

EXAMPLES = r"""
- name: Choose and check the release to return to
  blackwell.sglang.sglang_release_target:
    root: /opt/sglang
    current: /opt/sglang/current
    previous: /opt/sglang/previous
    failed_marker: ROLLED_BACK
  register: target
"""

RETURN = r"""
from:
  description: The release C(current) points to now ("" when it is no link).
  returned: success
  type: str
to:
  description: The release directory C(current) moves to.
  returned: success
  type: str
model:
  description: The model the release returned to recorded (C(recorded), C(path), C(revision), C(manifest_digest),
    C(source), C(repository), C(service_env), C(problem)).
  returned: with O(move=rollback)
  type: dict
service:
  description:
    - The service settings the release returned to was rendered with (C(kv_cache_dtype), C(fp4_gemm_backend),
      C(moe_runner_backend), C(render_fp4_flags); "" = the role decided); null when its manifest records none (written
      before manifests did, or by a play without the service).
  returned: with O(move=rollback)
  type: dict
  sample: {kv_cache_dtype: "", fp4_gemm_backend: "", moe_runner_backend: "", render_fp4_flags: true}
probe:
  description:
    - The FP4 probe result of the release returned to (its O(probe_file)), as fp4_probe wrote it; null when the file
      is missing or not a JSON object.
  returned: with O(move=rollback)
  type: dict
marker:
  description: Whether the release moved to carries the failed-rollout marker (moved to with O(allow_failed)).
  returned: success
  type: bool
served_with:
  description:
    - One line for the operator naming the model and the service settings the release returned to is served with,
      for example C(release 20261203T101500Z-ab12 recorded model /srv/models/m (revision <sha>, manifest digest
      <sha256>\); it is served with it, with the service settings it recorded (kv_cache_dtype=, fp4_gemm_backend=,
      moe_runner_backend=, render_fp4_flags=true\) and its own probe result).
  returned: with O(move=rollback)
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _fleet
from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs


def _link(path):
    """Where a link points (resolved, as stat's lnk_source), "" when ``path`` is no link."""
    return os.path.realpath(path) if os.path.islink(path) else ""


def _read(path):
    """(bytes or None, why it could not be read)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(), None
    except (IOError, OSError) as exc:
        return None, "file not found" if not os.path.exists(path) else str(exc)


def _read_probe(path):
    """The probe result a release directory holds (a JSON object), or None."""
    raw, _error = _read(path)
    try:
        probe = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    return probe if isinstance(probe, dict) else None


def marker_reason(raw, default=""):
    """The reason a marker records: the role writes JSON; one written by hand is shown as it is (300 characters).
    A JSON marker without a reason gives ``default`` (None: the marker's text)."""
    text = (raw or b"").decode("utf-8", "replace").strip()
    if text.startswith("{") and text.endswith("}"):
        try:
            return str(json.loads(text).get("reason", text if default is None else default))
        except (ValueError, AttributeError):
            pass
    return text if len(text) <= 300 else text[:297] + "..."


def check_switch(module, p, releases):
    """The staged release may be made live: its place, the `current` link and its marker."""
    new = p["release_dir"]
    problems = _inputs.problems({"sglang_release_dir (its name)": os.path.basename(new),
                                 "sglang_release_failed_marker": p["failed_marker"]}, "name_component")
    if os.path.dirname(new) != releases:
        problems.append("sglang_release_dir %s is not a directory of %s" % (json.dumps(new), releases))
    if problems:
        module.fail_json(msg="; ".join(problems))
    current = p["current"]
    if os.path.lexists(current) and not os.path.islink(current):
        module.fail_json(msg="cannot switch %s to %s: %s exists and is not a symlink (move it away first)"
                         % (current, new, current))
    if not os.path.isdir(new) and not module.check_mode:
        module.fail_json(msg="cannot switch %s to %s: %s does not exist (run the main entry point first)"
                         % (current, new, new))
    marker_path = os.path.join(new, p["failed_marker"])
    marker = os.path.lexists(marker_path)
    if marker and not p["allow_failed"]:
        module.fail_json(msg="refusing to make release %s live on %s: an earlier rollout rolled it back (%s: %s). "
                             "`current` is unchanged. Fix the cause and run again with "
                             "-e sglang_release_rollback_allow_failed=true, or change the stack (a new release id)."
                         % (os.path.basename(new), p["host"], marker_path, marker_reason(_read(marker_path)[0], None)))
    module.exit_json(changed=False, marker=marker, **{"from": _link(current), "to": new})


def main():
    module = AnsibleModule(
        argument_spec=dict(
            move=dict(type="str", choices=["switch", "rollback"], default="rollback"),
            release_dir=dict(type="path"),
            root=dict(type="path", required=True),
            current=dict(type="path", required=True),
            previous=dict(type="path"),
            rollback_to=dict(type="str", default=""),
            failed_marker=dict(type="str", required=True),
            allow_failed=dict(type="bool", default=False),
            unrecorded_model=dict(type="str", choices=["refuse", "configured"], default="refuse"),
            configured_model=dict(type="str", default=""),
            probe_file=dict(type="str", default="probe.json"),
            host=dict(type="str", default="this host"),
        ),
        required_if=[("move", "switch", ["release_dir"]), ("move", "rollback", ["previous"])],
        supports_check_mode=True,
    )
    p = module.params
    releases = os.path.join(p["root"], "releases")
    if p["move"] == "switch":
        check_switch(module, p, releases)
    names = {"sglang_release_failed_marker": p["failed_marker"]}
    if p["rollback_to"]:
        names["sglang_release_rollback_to"] = p["rollback_to"]
    problems = _inputs.problems(names, "name_component")
    if problems:
        module.fail_json(msg="%s (no '../', no '/': it would name a path outside %s)" % ("; ".join(problems), releases))

    came_from = _link(p["current"])
    target = os.path.join(releases, p["rollback_to"]) if p["rollback_to"] else _link(p["previous"])
    if not target or not os.path.isdir(target):
        why = ("release %s does not exist" % target) if target else (
            "%s is not a link to a release (an automatic rollback removes it, as it would name the failed release)"
            % p["previous"])
        module.fail_json(msg="nothing to roll back to on %s: %s; pass -e sglang_release_rollback_to=<release id> with one "
                             "of the release ids listed in %s/" % (p["host"], why, releases))
    release = os.path.basename(target.rstrip("/"))
    marker_path = os.path.join(target, p["failed_marker"])
    marker = os.path.lexists(marker_path)
    if marker and not p["allow_failed"]:
        reason = marker_reason(_read(marker_path)[0])
        module.fail_json(msg="refusing to roll %s back to release %s: it failed before and carries %s (reason: %s); "
                             "nothing was changed. Choose another release with -e sglang_release_rollback_to=<release id> "
                             "(ids: %s/), or return to this one anyway with -e sglang_release_rollback_allow_failed=true"
                         % (p["host"], release, marker_path, reason or "not recorded", releases))

    manifest_path = os.path.join(target, "manifest.json")
    raw, error = _read(manifest_path)
    read = _fleet.read_manifest(raw, path=manifest_path, error=error, encoded=False)
    model, service = read["model"], read["service"]
    if not model["recorded"] and p["unrecorded_model"] != "configured":
        module.fail_json(msg="refusing to roll %s back to release %s: the model it served is not known (%s), and starting "
                             "it with the model configured now (%s) may start it on another release's model. Nothing was "
                             "changed. Run again with -e sglang_release_rollback_unrecorded_model=configured to serve the "
                             "configured model (set sglang_stack_model_path or sglang_service_model_path to that "
                             "release's model first if it differs), or choose another release with "
                             "-e sglang_release_rollback_to=<release id> (ids: %s/)"
                         % (p["host"], release, model["problem"], p["configured_model"] or "none configured", releases))
    if model["recorded"]:
        served_with = "release %s recorded model %s (revision %s, manifest digest %s); it is served with it%s" % (
            release, model["path"], model.get("revision") or "not recorded", model.get("manifest_digest") or "not recorded",
            "" if model.get("service_env") is not None else " and the configured service environment (none recorded)")
    else:
        served_with = "release %s: %s; served with the configured model %s (sglang_release_rollback_unrecorded_model=" \
                      "configured)" % (release, model["problem"], p["configured_model"] or "(none)")
        module.warn(served_with)
    probe = _read_probe(os.path.join(target, p["probe_file"]))
    if service is None:
        served_with += "; it records no service settings: the configured ones are rendered"
    else:
        served_with += ", with the service settings it recorded (%s)" % ", ".join(
            "%s=%s" % (key, str(value).lower() if isinstance(value, bool) else value) for key, value in sorted(service.items()))
    served_with += " and its own probe result" if probe is not None else \
        "; no probe result in it (%s): the backends are chosen without one" % p["probe_file"]
    module.exit_json(changed=False, served_with=served_with,
                     **{"from": came_from, "to": target, "model": model, "service": service, "probe": probe,
                        "marker": marker})


if __name__ == "__main__":
    main()
