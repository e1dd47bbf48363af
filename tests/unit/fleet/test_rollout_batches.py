"""The rollout play's batches (playbooks/rollout.yml, play 3): its real ``serial``, ``max_fail_percentage`` and ``vars``
keywords after the real first and last tasks of roles/sglang_rollout/tasks/stage.yml (the settings check, the
grouping of the staged hosts), run by real ansible-playbook over three local-connection hosts.

The rollout play's own tasks are replaced by one that logs ``ansible_play_batch`` (and, with ``fail_on``, fails on
those hosts): the batches are what Ansible made of the keywords, not a re-computation of them. Play keywords see no
inventory variables, so the inventory's values must reach ``serial`` through the staged hosts.
"""

import json
import os
import sys

import pytest
import yaml

import ansible_run

pytestmark = pytest.mark.slow
HOSTS = ("gpu-a", "gpu-b", "gpu-c")
CHECK = "Check the rollout's settings (batches, failure budget, health checks) before anything is staged"


def _rollout_play():
    with open(os.path.join(ansible_run.ROOT, "playbooks", "rollout.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    (play,) = [p for p in plays if "serial" in p]
    return play


def _run(tmp_path, group_vars=None, host_vars=None, extra=None, fail_on=()):
    """The stage play's check and grouping, then the rollout play's keywords; (result, the batches in order)."""
    log = tmp_path / "batches.log"
    inventory = {"all": {"vars": dict(group_vars or {}),
                         "children": {"sglang_servers": {"hosts": {}}}}}
    for host in HOSTS:
        inventory["all"]["children"]["sglang_servers"]["hosts"][host] = dict(
            {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
             "sglang_rollout_health_checks": []},
            **(host_vars or {}).get(host, {}))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    stage = {"name": "stage (the grouping tasks only)", "hosts": "sglang_servers", "gather_facts": False,
             "tasks": [ansible_run.role_task("sglang_rollout", "stage.yml", CHECK),
                       ansible_run.role_task("sglang_rollout", "stage.yml", "Group the staged hosts")]}
    rollout = dict(_rollout_play(), tasks=[
        {"name": "log the batch", "run_once": True, "ansible.builtin.shell": "echo '{{ ansible_play_batch | to_json }}' >> %s" % log},
        {"name": "fail here", "ansible.builtin.fail": {"msg": "injected"}, "when": "inventory_hostname in %s" % list(fail_on)},
        {"name": "after the failure", "ansible.builtin.debug": {"msg": "{{ inventory_hostname }} went on"}},
    ])
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump([stage, rollout], sort_keys=False))
    result = ansible_run.playbook(str(path), tmp_path, inventory=str(tmp_path / "hosts.yml"), extra_vars=extra)
    batches = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result, batches


def test_without_settings_the_playbooks_canary_batches(tmp_path):
    result, batches = _run(tmp_path)
    assert result.ok, result.out
    assert batches == [["gpu-a"], ["gpu-b"], ["gpu-c"]]     # [1, "25%", "100%"] of three hosts


def test_the_inventorys_batches_are_the_ones_the_play_uses(tmp_path):
    """group_vars/all reach the play keywords (the play used to take the playbook's default, silently)."""
    result, batches = _run(tmp_path, group_vars={"sglang_rollout_serial": [1, "100%"]})
    assert result.ok, result.out
    assert batches == [["gpu-a"], ["gpu-b", "gpu-c"]]


@pytest.mark.parametrize("budget, gpu_c_runs", [(50, True), (None, False)])
def test_the_inventorys_failure_budget_is_the_one_the_play_uses(tmp_path, budget, gpu_c_runs):
    """One host of a batch of two fails: with the inventory's budget 50 the other goes on; with the default 0 the
    failure stops the play there, before the batch's other host goes on."""
    settings = {"sglang_rollout_serial": [1, 2]}
    if budget is not None:
        settings["sglang_rollout_max_fail_percentage"] = budget
    result, batches = _run(tmp_path, group_vars=settings, fail_on=("gpu-b",))
    assert not result.ok                                        # gpu-b failed either way
    assert batches == [["gpu-a"], ["gpu-b", "gpu-c"]]
    assert ("NO MORE HOSTS LEFT" not in result.out) == gpu_c_runs, result.out
    assert ("gpu-c went on" in result.out) == gpu_c_runs, result.out


def test_extra_vars_win_as_everywhere(tmp_path):
    result, batches = _run(tmp_path, group_vars={"sglang_rollout_serial": [1, "100%"]}, extra={"sglang_rollout_serial": ["100%"]})
    assert result.ok, result.out
    assert batches == [list(HOSTS)]


def test_a_host_whose_batches_differ_is_refused_before_anything_is_staged(tmp_path):
    result, batches = _run(tmp_path, host_vars={"gpu-b": {"sglang_rollout_serial": [2]}})
    assert not result.ok
    assert "are one for the fleet" in result.out and "the values of gpu-a" in result.out and "[[2], null]" in result.out, result.out
    assert batches == [["gpu-a"], ["gpu-c"]]                    # gpu-b never reached the rollout play


@pytest.mark.parametrize("settings, name", [({"sglang_rollout_serial": ["all"]}, "sglang_rollout_serial"),
                                            ({"sglang_rollout_serial": [0, "25%"]}, "sglang_rollout_serial"),
                                            ({"sglang_rollout_max_fail_percentage": 150}, "sglang_rollout_max_fail_percentage")])
def test_a_bad_batch_or_budget_is_named_by_the_check_not_by_a_traceback(tmp_path, settings, name):
    result, batches = _run(tmp_path, group_vars=settings)
    assert not result.ok
    assert name in result.out and "Traceback" not in result.out and "Unexpected Exception" not in result.out, result.out
    assert batches == []
