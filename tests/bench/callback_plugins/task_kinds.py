# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Benchmark-only callback (tests/bench): one TSV line per task result, for where a run's time goes.

Not part of the collection: the benchmarks enable it with ANSIBLE_CALLBACK_PLUGINS=tests/bench/callback_plugins and
ANSIBLE_CALLBACKS_ENABLED=...,task_kinds, and TASK_KINDS_TSV=<file>. Columns: host, status (ok, changed, skipped,
failed), kind, seconds (wall time from the task's start to this host's result, so for one host the task's time),
action, role, task name, matched (``true``/``false`` for a result with a ``matched`` key, as venv_stamp's
checks; empty otherwise). kind is ``controller`` for actions that never run a module on the host (assert, set_fact,
debug, include_*, meta, validate_argument_spec ...), ``skipped`` for skipped tasks and ``module`` for the rest.
Loop items are not listed separately: the task's line carries the whole loop.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: task_kinds
type: aggregate
short_description: Benchmark helper, one TSV line per task result (tests/bench only)
description:
  - Writes host, status, kind (controller, module, skipped), seconds, action, role and task name of every task result
    to the file named by the environment variable C(TASK_KINDS_TSV).
requirements:
  - enabled in ANSIBLE_CALLBACKS_ENABLED
"""

import os
import time

from ansible.plugins.callback import CallbackBase

# actions handled on the controller only (no module run on the host)
CONTROLLER_ACTIONS = frozenset(
    "ansible.builtin." + name for name in (
        "assert", "set_fact", "debug", "fail", "include_tasks", "import_tasks", "include_role", "import_role", "meta",
        "validate_argument_spec", "add_host", "group_by", "set_stats", "include_vars", "pause"))


def kind_of(action, status):
    """``skipped``, ``controller`` or ``module`` (see the module docstring)."""
    if status == "skipped":
        return "skipped"
    name = action if "." in action else "ansible.builtin." + action
    return "controller" if name in CONTROLLER_ACTIONS else "module"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_kinds"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        path = os.environ.get("TASK_KINDS_TSV")
        self._out = open(path, "a", encoding="utf-8") if path else None
        self._start = time.monotonic()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start = time.monotonic()

    v2_playbook_on_handler_task_start = v2_playbook_on_task_start

    def _line(self, result, status):
        if self._out is None:
            return
        task = result._task
        role = task._role.get_name() if task._role else "-"
        name = task.get_name().replace("\t", " ").replace("\n", " ")
        if status == "ok" and result._result.get("changed"):
            status = "changed"
        matched = result._result.get("matched")
        matched = "" if matched is None else str(bool(matched)).lower()
        self._out.write("\t".join([result._host.get_name(), status, kind_of(task.action, status),
                                   "%.3f" % (time.monotonic() - self._start), task.action, role, name, matched]) + "\n")
        self._out.flush()

    def v2_runner_on_ok(self, result):
        self._line(result, "ok")

    def v2_runner_on_skipped(self, result):
        self._line(result, "skipped")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._line(result, "failed")
