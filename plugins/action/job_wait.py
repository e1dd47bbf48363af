# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Action plugin of blackwell.sglang.job_wait: the flat, bounded wait of module_utils/_async_wait.py."""

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.blackwell.sglang.plugins.module_utils import _async_wait

display = Display()


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "jid": {"type": "str", "required": True},
            "log": {"type": "path"},
            "timeout": {"type": "float", "required": True},
            "poll_interval": {"type": "float", "default": 10.0},
            "progress_interval": {"type": "float", "default": 60.0},
            "progress_regex": {"type": "str", "default": r".*\[[0-9]+/[0-9]+\]"},
            "tail_lines": {"type": "int", "default": 60},
            "label": {"type": "str", "default": "job"},
            "final_tail_lines": {"type": "int", "default": 0},
        })
        try:
            _async_wait.validate(args["timeout"], args["poll_interval"], args["progress_interval"])
        except _async_wait.WaitConfigError as exc:
            raise AnsibleActionFail(str(exc))
        if args["tail_lines"] < 1:
            raise AnsibleActionFail("tail_lines must be >= 1, got %s" % args["tail_lines"])
        if args["final_tail_lines"] < 0:
            raise AnsibleActionFail("final_tail_lines must be >= 0, got %s" % args["final_tail_lines"])
        host = task_vars.get("inventory_hostname", "?")
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))

        def poll():
            res = self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                       module_args={"jid": args["jid"], "_async_dir": async_dir})
            if res.get("failed") and not res.get("finished") and "started" not in res:
                # the status file is unreadable (job id unknown): nothing more will come
                res["finished"] = True
            return res

        def tail(lines=None):
            if not args["log"]:
                return []
            res = self._execute_module(module_name="ansible.legacy.command", task_vars=task_vars,
                                       module_args={"argv": ["tail", "-n", str(lines or args["tail_lines"]),
                                                             args["log"]]})
            return (res.get("stdout") or "").splitlines()

        def emit(elapsed, finished, line):
            state = "finished" if finished else "running"
            shown = (line or "(no progress line yet)")[:200]
            display.display("%s: %s %s after %d s: %s" % (host, args["label"], state, elapsed, shown))

        out = _async_wait.wait(poll, time.monotonic, time.sleep, args["timeout"], args["poll_interval"],
                               args["progress_interval"], tail=tail, emit=emit)
        out["log_tail"] = "\n".join(tail(args["final_tail_lines"])) if args["final_tail_lines"] else ""
        self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(out)
        result["changed"] = False
        return result
