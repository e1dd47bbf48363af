"""Every role alone, with its defaults and the inventory's minimum, in --check against localhost: it reports.

"Reports" means the run ends (rc 0), or a task of the role refuses with its message (an assert, a fail, a module's
own failure such as a missing systemd or an unreachable repository on this machine). "Crashes" means Ansible itself
stops on the role: an undefined variable, a template or conditional that cannot be evaluated, an unresolvable
module, a module's traceback. A role that crashes on a fresh host with its defaults is what a new user meets first
(cuda_toolchain read an undefined name on every host lacking g++; the preflight crashed on the default empty model
path), and no inventory of the test suite shows it: theirs set every variable.

The inventory minimum is what inventories/blackwell/hosts.yml asks for: one host in sglang_servers (also in
sglang_gateways and sglang_prometheus, as on a one-box setup), its address and interpreter; no group_vars. Modules
run for real in check mode: the roles' probes are read-only (check_mode: false only on reads), everything else
is simulated.
"""

from __future__ import annotations

import pathlib
import re
import sys

import pytest
import yaml

import ansible_run

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "meta" / "main.yml").is_file())
# What Ansible prints when it cannot run a task at all (ansible-core 2.19 wording and the older one)
CRASH = re.compile(r"is undefined|Error while resolving value|Finalization of task args|template error|"
                   r"Syntax error in template|Error while evaluating conditional|The conditional check .* failed|"
                   r"couldn't resolve module|MODULE FAILURE|Traceback \(most recent call last\)|"
                   r"Unexpected (templating type error|failure during module execution|Exception)|"
                   r"recursive loop detected", re.I)


def _run(tmp_path, role):
    host = {"ansible_host": "127.0.0.1", "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = {"all": {"children": {group: {"hosts": {"box-01": host}}
                                      for group in ("sglang_servers", "sglang_gateways", "sglang_prometheus")}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    play = [{"name": role + " alone", "hosts": "sglang_servers", "gather_facts": True,
             "roles": ["blackwell.sglang." + role]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    return ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "hosts.yml", check=True,
                                env={"ANSIBLE_REMOTE_TEMP": str(tmp_path / "remote-tmp")}, cwd=tmp_path, timeout=600)


def test_the_crash_pattern_knows_ansibles_wording():
    assert CRASH.search("[ERROR]: Task failed: Finalization of task args for 'ansible.builtin.apt' failed: Error while "
                        "resolving value for 'name': 'cuda_toolchain__system_packages' is undefined")
    assert not CRASH.search("[ERROR]: Task failed: Action failed: sglang_model settings are incomplete")


def test_every_role_is_listed():
    assert len(ROLES) >= 18 and {"cuda_toolchain", "preflight", "sglang_converge"} <= set(ROLES)


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
def test_role_alone_reports_and_does_not_crash(tmp_path, role):
    proc = _run(tmp_path, role)
    out = proc.out
    assert "PLAY RECAP" in out, out[-4000:]
    crash = CRASH.search(out)
    assert not crash, "%s crashed with its defaults (%s):\n%s" % (role, crash.group(0), out[-6000:])
    assert proc.returncode in (0, 2), out[-4000:]
    if proc.returncode == 2:
        # a refusal says what it refused: the failed task's message
        assert re.search(r"fatal: \[box-01\]: FAILED! => .*\"msg\": \"[^\"]{10,}", out), out[-4000:]
