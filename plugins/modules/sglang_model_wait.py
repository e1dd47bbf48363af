#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_wait
short_description: Wait a bounded time for a background model download and report its progress
version_added: "0.1.0"
description:
  - Reads the progress record that C(blackwell.sglang.sglang_model_fetch) writes (O(progress_file)) for at most
    O(timeout) seconds and returns as soon as the download finished or failed, or when the time is up, with a
    one-line RV(msg) (bytes done / total, rate, time left).
  - Meant for a flat, bounded loop (C(loop) + C(loop_control.break_when)) in the play, so progress shows up every
    O(timeout) seconds and the whole wait is bounded by the loop length.
  - A record that says C(running) while its process is gone counts as finished (failed).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  progress_file:
    description: The JSON progress record.
    type: path
    required: true
  timeout:
    description: Seconds to wait in this call at most.
    type: int
    default: 30
  started:
    description: Epoch seconds the download started (for the elapsed time in RV(msg)); 0 leaves it out.
    type: float
    default: 0
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
"""

EXAMPLES = r"""
- name: Wait for the download, progress every 30 s, at most 24 h
  blackwell.sglang.sglang_model_wait:
    progress_file: /var/lib/blackwell-sglang/model/progress.json
    timeout: 30
  loop: "{{ range(2880) | list }}"
  loop_control:
    label: "{{ wait.msg | default('starting') }}"
    break_when: wait.finished | default(false)
  register: wait
"""

RETURN = r"""
finished:
  description: The download is no longer running (done or failed).
  returned: always
  type: bool
state:
  description: C(running), C(done), C(failed), or C(unknown) (no record yet).
  returned: always
  type: str
msg:
  description: "One line of progress, e.g. C(download: 1.2 GiB / 4.0 GiB (30%), 85.3 MiB/s, 40 s left)."
  returned: always
  type: str
progress:
  description: The record (C(bytes_done), C(bytes_total), C(rate_bytes_per_s), C(phase), C(result)).
  returned: always
  type: dict
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _model


def read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def alive(pid):
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError):
        return False
    return True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            progress_file=dict(type="path", required=True),
            timeout=dict(type="int", default=30),
            started=dict(type="float", default=0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    deadline = time.time() + max(params["timeout"], 0)
    record = None
    while True:
        record = read(params["progress_file"])
        if record and record.get("state") in ("done", "failed"):
            break
        if record and record.get("pid") and not alive(record["pid"]):
            record = dict(record, state="failed", result={"msg": "the fetch process %s is gone" % record["pid"]})
            break
        if time.time() >= deadline:
            break
        time.sleep(min(2.0, max(deadline - time.time(), 0.05)))
    state = record.get("state", "unknown") if record else "unknown"
    msg = _model.progress_message(record) if record else "waiting for the download to start"
    if params["started"]:
        msg += ", %d s elapsed" % (time.time() - params["started"])
    if state in ("done", "failed"):
        msg = "%s (%s)" % (msg, state)
    module.exit_json(changed=False, finished=state in ("done", "failed"), state=state, msg=msg, progress=record or {})


if __name__ == "__main__":
    main()
