"""blackwell.sglang.apt_packages, the roles' one apt step: dpkg first, apt's lists and apt only for what is missing.

The host is a double: ``dpkg-query`` and ``find`` answer from a table, and the apt module's arguments are recorded.
"""

from __future__ import annotations

from unittest import mock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.blackwell.sglang.plugins.action import apt_packages as plugin


class Host:
    def __init__(self, installed=(), lists=True, dpkg_rc=None, apt_result=None):
        self.installed = set(installed)
        self.lists = lists
        self.dpkg_rc = dpkg_rc
        self.apt_result = apt_result if apt_result is not None else {"changed": True, "cache_updated": True}
        self.commands = []
        self.apt_calls = []

    def low_level(self, cmd, sudoable=True):
        self.commands.append(cmd)
        if cmd.startswith("dpkg-query"):
            names = cmd.split(" -- ", 1)[1].split()
            known = [n for n in names if n in self.installed]
            rc = self.dpkg_rc if self.dpkg_rc is not None else (0 if len(known) == len(names) else 1)
            return {"rc": rc, "stdout": "".join("%s=installed " % n for n in known), "stderr": "boom"}
        if cmd.startswith("find"):
            return {"rc": 0, "stdout": "/var/lib/apt/lists/x_Packages.lz4\n" if self.lists else "", "stderr": ""}
        raise AssertionError(cmd)

    def module(self, module_name=None, module_args=None, task_vars=None, **_kw):
        assert module_name == "ansible.legacy.apt"
        self.apt_calls.append(dict(module_args))
        return dict(self.apt_result)


def _run(host, args, check_mode=False, role="demo_role"):
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task._role.get_name.return_value = role
    action = plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=mock.MagicMock(),
                                 shared_loader_obj=None)
    with mock.patch.object(ActionBase, "run", return_value={}), \
            mock.patch.object(action, "_low_level_execute_command", side_effect=host.low_level), \
            mock.patch.object(action, "_execute_module", side_effect=host.module), \
            mock.patch.object(action, "_remove_tmp_path"):
        return action.run(task_vars={})


def test_missing_packages_reads_dpkgs_output():
    out = "git=installed curl=config-files "
    assert plugin.missing_packages(["git", "curl", "rsync", "git=1:2.43"], out) == ["curl", "rsync", "git=1:2.43"]
    assert plugin.missing_packages(["git"], "git=installed ") == []


@pytest.mark.parametrize("lists, refresh, want", [(True, False, 3600), (False, False, 0), (True, True, 0)])
def test_cache_valid_time(lists, refresh, want):
    assert plugin.cache_valid_time(lists, refresh, 3600) == want


def test_a_converged_host_costs_one_dpkg_call():
    host = Host(installed=["git", "curl"])
    res = _run(host, {"name": ["git", "curl"]})
    assert res["changed"] is False and res["missing"] == []
    assert len(host.commands) == 1 and host.commands[0].startswith("dpkg-query --show")
    assert host.apt_calls == []


def test_missing_packages_are_installed_with_the_whole_list():
    host = Host(installed=["git"])
    res = _run(host, {"name": ["git", "rsync"], "install_recommends": False})
    assert res["changed"] is True and res["missing"] == ["rsync"] and res["lists_found"] is True
    assert host.apt_calls == [{"name": ["git", "rsync"], "state": "present", "update_cache": True,
                               "cache_valid_time": 3600, "install_recommends": False}]


def test_no_package_lists_refresh_first():
    host = Host(lists=False)
    _run(host, {"name": ["rsync"]})
    assert host.apt_calls[0]["cache_valid_time"] == 0 and "install_recommends" not in host.apt_calls[0]


def test_refresh_when_asked():
    host = Host()
    _run(host, {"name": ["dcgm-exporter"], "refresh": True})
    assert host.apt_calls[0]["cache_valid_time"] == 0


def test_a_dry_run_on_a_bare_host_reports_instead_of_failing():
    host = Host(lists=False)
    res = _run(host, {"name": ["g++", "rsync"]}, check_mode=True)
    assert res["changed"] is True and not res.get("failed")
    assert res["msg"] == "demo_role: would refresh apt's package lists and install g++, rsync"
    assert host.apt_calls == []


def test_a_dry_run_with_lists_asks_apt():
    host = Host()
    res = _run(host, {"name": ["rsync"]}, check_mode=True)
    assert res["changed"] is True and len(host.apt_calls) == 1


def test_check_only_installs_nothing():
    host = Host(installed=["prometheus"])
    res = _run(host, {"name": ["prometheus", "prometheus-blackbox-exporter"], "check_only": True})
    assert res["missing"] == ["prometheus-blackbox-exporter"] and res["changed"] is False
    assert len(host.commands) == 1 and host.apt_calls == []


def test_an_apt_failure_names_the_role_and_the_packages():
    host = Host(installed=["git"], apt_result={"failed": True, "msg": "No package matching 'rsync' is available"})
    res = _run(host, {"name": ["git", "rsync"]}, role="sglang_source")
    assert res["failed"] is True
    assert res["msg"] == ("sglang_source: apt could not install git, rsync (not installed: rsync): "
                          "No package matching 'rsync' is available")


def test_the_role_can_be_named_explicitly():
    host = Host(apt_result={"failed": True, "msg": "x"})
    assert _run(host, {"name": ["rsync"], "role": "fleet copy"})["msg"].startswith("fleet copy: apt could not")


def test_a_host_without_dpkg_is_refused_with_the_role():
    with pytest.raises(AnsibleActionFail, match="demo_role: dpkg-query could not tell which of git are installed"):
        _run(Host(dpkg_rc=127), {"name": ["git"]})


def test_an_empty_list_does_nothing():
    host = Host()
    res = _run(host, {"name": []})
    assert res["changed"] is False and host.commands == []


def test_names_are_quoted_for_the_shell():
    host = Host()
    _run(host, {"name": ["g++", "libfoo=1.2 ; rm"]})
    assert "'libfoo=1.2 ; rm'" in host.commands[0]
