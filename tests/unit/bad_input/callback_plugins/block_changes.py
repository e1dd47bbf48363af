# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Test callback: stop ansible-playbook before the first task of a host-changing module (bad-input suite).

When a task whose action could change the host is about to start, the callback writes its action and name to
``$BAD_INPUT_BLOCK_LOG`` and ends the controller at once (exit 97), before any worker runs the task. The suite
asserts that a bad value is refused by an earlier task (nothing of the host can have changed) and, for good
values, that the run got as far as the first blocked task.
"""

from __future__ import annotations

import os
import sys

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: block_changes
type: aggregate
short_description: stop before the first host-changing task (tests only)
description: [Test double for the bad-input suite.]
"""

READ_ONLY = {
    "assert", "fail", "debug", "set_fact", "include_tasks", "import_tasks", "include_role", "import_role",
    "include_vars", "stat", "slurp", "getent", "meta", "validate_argument_spec", "setup", "gather_facts",
    "command", "shell", "script", "find", "set_stats", "add_host", "group_by", "noop", "pause", "wait_for_connection",
    "gpu_facts", "toolchain_facts", "host_facts", "sglang_server_args", "sglang_checkpoint_facts", "fp4_kernel_probe",
    "package_facts", "sglang_model_archive", "unknown_variables", "sglang_release_target",
}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "block_changes"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_task_start(self, task, is_conditional):
        action = (task.action or "").split(".")[-1]
        if action in READ_ONLY or os.environ.get("BAD_INPUT_BLOCK") == "0":   # "0": a rendering test on tmp files
            return
        # venv_stamp and sglang_release_seal compare; state=record writes a cache file, never in check mode (the
        # modules skip the write), so it is no host change in these --check runs
        if action in ("venv_stamp", "sglang_release_seal"):
            return
        # sglang_model_verify changes nothing in check mode (no stamp, manifest or rename) and nothing with plan: true
        if action == "sglang_model_verify" and (task.check_mode or (task.args or {}).get("plan")):
            return
        log = os.environ.get("BAD_INPUT_BLOCK_LOG")
        if log:
            with open(log, "a") as handle:
                handle.write("%s\t%s\n" % (task.action, task.get_name()))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(97)
