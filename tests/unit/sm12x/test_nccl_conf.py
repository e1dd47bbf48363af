"""NCCL config files NCCL applies without logging them (field report S03, F-S03), through the real entry points:
host_facts' reader and the preflight_sm12x filter (WARN ``nccl_conf_unmanaged_keys``), and sglang_readiness's
reading of the unit (User, Environment, EnvironmentFiles) into the waiter's ``nccl_conf_override`` verdict.

The files live in a dict read through ``read_text`` (the reader's own seam): a path that is not in it is missing.
The account is this process's own (the passwd home is what NCCL uses, not ``$HOME``)."""

import os
import pwd

from ansible_collections.blackwell.sglang.plugins.filter.preflight_sm12x import preflight_sm12x
from ansible_collections.blackwell.sglang.plugins.module_utils import _nccl_conf, _readiness
from ansible_collections.blackwell.sglang.plugins.modules import sglang_readiness

# F-S03: the file left in the image (keys and values from aicad-nccl-optimization#1)
F_S03 = "NCCL_IB_USE_INLINE=1\nNCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS=1\n"
INIT_COMPLETE = ("<host>:<pid>:<pid> [0] NCCL INFO comm <addr> rank 0 nranks 2 cudaDev 0 busId <bus> commId <id> "
                 "- Init COMPLETE")
ME = pwd.getpwuid(os.getuid())
RTX = {"gpu_count": 1, "gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                 "compute_cap": "12.0"}]}


def files(mapping):
    return mapping.get


def conf_check(found, nccl_env=None, service_env=None):
    result = preflight_sm12x(RTX, {}, {"nccl_conf": found},
                             {"nccl_env": nccl_env or {}, "service_env": service_env or {}})
    return dict((c["name"], c) for c in result["checks"])["nccl_conf_unmanaged_keys"], result


def test_the_leftover_system_file_warns_naming_the_file_and_both_keys():
    found = _nccl_conf.collect(ME.pw_name, "", files({"/etc/nccl.conf": F_S03}))
    assert found["searched"] == [os.path.join(ME.pw_dir, ".nccl.conf"), "/etc/nccl.conf"]
    check, result = conf_check(found)
    assert check["status"] == "warn"
    for word in ("/etc/nccl.conf", "NCCL_IB_USE_INLINE", "NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS"):
        assert word in check["message"]
    assert "sglang_service_nccl_env" in check["remedy"]
    assert result["nccl_conf_files"] == {
        "/etc/nccl.conf": ["NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS", "NCCL_IB_USE_INLINE"]}


def test_a_key_the_service_sets_is_not_in_effect():
    found = _nccl_conf.collect(ME.pw_name, "", files({"/etc/nccl.conf": F_S03}))
    check = conf_check(found, nccl_env={"NCCL_IB_USE_INLINE": "0"})[0]
    assert check["status"] == "warn" and "NCCL_IB_USE_INLINE" not in check["message"]
    both = conf_check(found, nccl_env={"NCCL_IB_USE_INLINE": "0"},
                      service_env={"NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS": "0"})[0]
    assert both["status"] == "pass" and "service environment, which wins" in both["message"]


def test_no_file_passes_and_names_where_it_looked():
    check, result = conf_check(_nccl_conf.collect("no-such-account-xyz", "", files({})))
    assert check["status"] == "pass" and check["message"] == "no NCCL config file (/etc/nccl.conf)"
    assert result["nccl_conf_files"] == {}
    not_read = conf_check(None)[0]
    assert not_read["status"] == "pass" and "not read" in not_read["message"]


def test_nccl_conf_file_replaces_the_home_file_and_wins_over_the_system_file():
    home = os.path.join(ME.pw_dir, ".nccl.conf")
    disk = {home: "NCCL_DEBUG=INFO\n", "/srv/nccl.conf": "NCCL_IB_USE_INLINE=0\n", "/etc/nccl.conf": F_S03}
    found = _nccl_conf.collect(ME.pw_name, "/srv/nccl.conf", files(disk))
    assert [f["found_by"] for f in found["files"]] == ["NCCL_CONF_FILE", "system"]
    in_effect = _nccl_conf.effective(found["files"])
    assert in_effect["NCCL_IB_USE_INLINE"] == {"value": "0", "file": "/srv/nccl.conf"}
    assert in_effect["NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS"]["file"] == "/etc/nccl.conf"
    assert "NCCL_DEBUG" not in in_effect
    # without NCCL_CONF_FILE the home file is read first
    assert [f["found_by"] for f in _nccl_conf.collect(ME.pw_name, "", files(disk))["files"]] == ["home", "system"]


def test_nccl_parses_lines_as_nccl_does():
    assert _nccl_conf.parse("# comment\nNCCL_A=1\nno equals sign\nNCCL_A=2\nNCCL_B=x=y\r\n\n") == {
        "NCCL_A": "1", "NCCL_B": "x=y"}


SHOW = ("User=%s\nEnvironment=NCCL_DEBUG=WARN \"NCCL_X=a b\"\n"
        "EnvironmentFiles=/etc/blackwell-sglang/sglang.env (ignore_errors=no)\n" % ME.pw_name)


def test_the_unit_context_reads_the_units_account_and_environment():
    disk = {"/etc/nccl.conf": F_S03, "/etc/blackwell-sglang/sglang.env": 'NCCL_IB_USE_INLINE="0"\n'}
    assert _nccl_conf.unit_context(SHOW, files(disk)) == {"/etc/nccl.conf": ["NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS"]}
    conf_file = {"/etc/blackwell-sglang/sglang.env": "NCCL_CONF_FILE=/srv/n.conf\n", "/srv/n.conf": "NCCL_P2P_LEVEL=SYS\n"}
    assert _nccl_conf.unit_context(SHOW, files(conf_file)) == {"/srv/n.conf": ["NCCL_P2P_LEVEL"]}
    assert _nccl_conf.unit_context("", files({})) == {}
    assert _nccl_conf.unit_context("Environment=\"unbalanced\nUser=\n", files({})) == {}


class FakeModule(object):
    """The two AnsibleModule calls unit_nccl_conf makes; run_command answers as ``systemctl show`` would."""

    def __init__(self, show, rc=0):
        self.show, self.rc, self.argv = show, rc, None

    def get_bin_path(self, name, required=False):
        return "/usr/bin/" + name

    def run_command(self, argv, check_rc=False):
        self.argv = argv
        return self.rc, self.show, ""


def _stalled(context):
    clock = {"t": 0.0}

    def sleep(seconds):
        clock["t"] += seconds

    lines = [INIT_COMPLETE]
    return _readiness.wait_ready(
        http_get=lambda timeout: (None, "refused: connection refused"), read_journal=lambda: lines and [lines.pop()],
        unit_state=lambda: ("activating", "start"), clock=lambda: clock["t"], sleep=sleep, stall_timeout=60.0,
        max_wait=600.0, tp_size=2, classify_context=dict(context, argv=[]))


def test_readiness_blames_the_file_it_found_for_the_hang_after_init_complete():
    module = FakeModule("User=%s\nEnvironment=\nEnvironmentFiles=\n" % ME.pw_name)
    context = _nccl_conf.unit_context(module.show, files({"/etc/nccl.conf": F_S03}))
    result = _stalled({"nccl_conf_files": context})
    assert result["cause"]["cause"] == "nccl_conf_override"
    assert "/etc/nccl.conf (NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS, NCCL_IB_USE_INLINE)" in result["cause"]["summary"]
    # the same hang without such a file stays B28's P2P hang
    assert _stalled({"nccl_conf_files": _nccl_conf.unit_context(module.show, files({}))})["cause"]["cause"] == \
        "nccl_p2p_hang"


def test_the_module_asks_systemd_for_the_units_account_and_environment():
    module = FakeModule("User=\nEnvironment=\nEnvironmentFiles=\n")
    sglang_readiness.unit_nccl_conf(module, "sglang.service")
    assert module.argv[1:3] == ["show", "sglang.service"]
    assert {"--property=User", "--property=Environment", "--property=EnvironmentFiles"} <= set(module.argv)
    assert sglang_readiness.unit_nccl_conf(FakeModule("", rc=1), "sglang.service") == {}
