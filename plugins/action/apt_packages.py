# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Action plugin of blackwell.sglang.apt_packages: the roles' one apt step (dpkg first, apt only for what is missing).

One quick dpkg call on a converged host instead of listing apt's package lists and opening apt's cache, the slow part
of an apt task that has nothing to do: the look at the lists and apt, with its cache refresh, run only when a package
is not installed.
"""

from __future__ import annotations

import shlex

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# dpkg prints name=status for each package it knows ("installed", "config-files", ...)
_DPKG_FORMAT = "--showformat=${Package}=${db:Status-Status} "
# a fresh image has no package lists, however recent the cache directory looks: apt must refresh before it installs
_LISTS_DIR = "/var/lib/apt/lists"


def missing_packages(names, dpkg_stdout):
    """The names dpkg does not report as installed, in the caller's order (a version pin ``name=1.2`` or a name
    dpkg does not know counts as missing, so apt decides as before)."""
    installed = {tok[:-len("=installed")] for tok in dpkg_stdout.split() if tok.endswith("=installed")}
    return [name for name in names if name not in installed]


def cache_valid_time(lists_found, refresh, valid_time):
    """apt's cache_valid_time: 0 (refresh now) without package lists or when asked, else the caller's age."""
    return 0 if refresh or not lists_found else valid_time


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = True

    def _run_cmd(self, argv):
        res = self._low_level_execute_command(" ".join(shlex.quote(a) for a in argv), sudoable=False)
        return res.get("rc"), res.get("stdout", ""), res.get("stderr", "")

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "name": {"type": "list", "elements": "str", "required": True},
            "role": {"type": "str"},
            "refresh": {"type": "bool", "default": False},
            "cache_valid_time": {"type": "int", "default": 3600},
            "install_recommends": {"type": "bool"},
            "check_only": {"type": "bool", "default": False},
        })
        names = [n for n in args["name"] if n]
        role = args["role"] or (self._task._role.get_name(include_role_fqcn=False) if self._task._role else "apt_packages")
        result.update(changed=False, missing=[], lists_found=None, cache_updated=False)
        if not names:
            result["msg"] = "%s: no packages to check" % role
            return result

        # read-only and cheap: it runs in check mode too, so a dry run says what a real run would install
        rc, out, err = self._run_cmd(["dpkg-query", "--show", _DPKG_FORMAT, "--"] + names)
        if rc not in (0, 1):   # 1: dpkg does not know one of them (not installed)
            raise AnsibleActionFail("%s: dpkg-query could not tell which of %s are installed (rc %s): %s"
                                    % (role, ", ".join(names), rc, (err or out).strip()))
        missing = missing_packages(names, out)
        result["missing"] = missing
        if not missing or args["check_only"]:
            result["msg"] = ("%s: not installed: %s" % (role, ", ".join(missing)) if missing
                             else "%s: installed already: %s" % (role, ", ".join(names)))
            return result

        rc, out, _err = self._run_cmd(["find", _LISTS_DIR, "-maxdepth", "1", "-type", "f", "-name", "*_Packages*",
                                       "-print", "-quit"])
        lists_found = rc == 0 and bool(out.strip())
        result["lists_found"] = lists_found
        if self._task.check_mode and not lists_found:
            # apt in check mode does not refresh, and without lists it knows no package: it would fail for a host
            # that a real run installs on without trouble
            result.update(changed=True, msg="%s: would refresh apt's package lists and install %s"
                          % (role, ", ".join(missing)))
            return result

        apt_args = {"name": names, "state": "present", "update_cache": True,
                    "cache_valid_time": cache_valid_time(lists_found, args["refresh"], args["cache_valid_time"])}
        if args["install_recommends"] is not None:
            apt_args["install_recommends"] = args["install_recommends"]
        apt = self._execute_module(module_name="ansible.legacy.apt", module_args=apt_args, task_vars=task_vars)
        self._remove_tmp_path(self._connection._shell.tmpdir)
        for key in ("changed", "cache_updated", "cache_update_time", "stdout", "stderr", "diff", "warnings"):
            if key in apt:
                result[key] = apt[key]
        if apt.get("failed"):
            result.update(failed=True, rc=apt.get("rc"),
                          msg="%s: apt could not install %s (not installed: %s): %s"
                          % (role, ", ".join(names), ", ".join(missing), apt.get("msg", "").strip()))
            return result
        result["msg"] = "%s: installed %s" % (role, ", ".join(missing))
        return result
