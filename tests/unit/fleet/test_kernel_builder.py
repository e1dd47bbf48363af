"""Play 2 of playbooks/rollout.yml picks the kernel's builder in play order, whatever order its build-key group lists
the hosts in (group_by adds them as their results come in, which is not the play's order).

Real: the block "Build each build key once" of roles/sglang_rollout/tasks/build.yml, its vars and its report task
(the build itself, an include of sglang_converge's kernel stage, is left out), run by real ansible-playbook over three
local-connection hosts whose key group is written into the inventory in reverse order.
"""

import sys

import pytest
import yaml

import ansible_run

pytestmark = pytest.mark.slow


def _run(tmp_path, sealed=()):
    block = ansible_run.role_task("sglang_rollout", "build.yml", "Build each build key once")
    block["block"] = [t for t in block["block"] if t["name"] == "Report who builds what"]
    hosts = {h: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "sglang_stack_kernel_build_key": "k1", "sgl_kernel_sm120_fetch_dir": str(tmp_path / "cache"),
                 "sglang_converge_sealed": h in sealed} for h in ("gpu-a", "gpu-b", "gpu-c")}
    inventory = {"all": {"children": {
        "sglang_servers": {"hosts": hosts},
        # the order group_by could leave it in: the last host first
        "sgl_kernel_key_k1": {"hosts": {"gpu-c": {}, "gpu-b": {}, "gpu-a": {}}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    return ansible_run.play(tmp_path, [block], hosts="sglang_servers", inventory=str(tmp_path / "hosts.yml"))


def test_the_first_host_in_play_order_builds(tmp_path):
    result = _run(tmp_path)
    assert result.ok, result.out
    assert "build key k1: built here, 2 other host(s) reuse it" in result.out, result.out
    assert result.out.count("reuses the wheel built on gpu-a") == 2, result.out


def test_a_sealed_host_leaves_the_build_to_the_next(tmp_path):
    result = _run(tmp_path, sealed=("gpu-a",))
    assert result.ok, result.out
    assert result.out.count("reuses the wheel built on gpu-b") == 2, result.out


# ------------------------------------------------------------------ the key's other hosts install in play 2, at once

UPGRADE_KERNEL = "Install the sgl-kernel wheel for this key (from the artifact cache)"


def _log_instead(task, log, what, fail_on=()):
    """``task`` without its role call: it logs ``<host> <what>`` (its name, tags and ``when`` stay), then fails on
    ``fail_on``; a build that passes leaves a wheel in the cache, as the real one fetches it there."""
    out = {k: v for k, v in task.items() if k not in ("ansible.builtin.include_role", "ansible.builtin.import_role")}
    script = "echo '{{ inventory_hostname }} %s' >> %s" % (what, log)
    if fail_on:
        script += " && test {{ inventory_hostname }} != %s" % " -a {{ inventory_hostname }} != ".join(fail_on)
    if what == "build":
        script += " && mkdir -p {{ sgl_kernel_sm120_fetch_dir }}/k1 && touch {{ sgl_kernel_sm120_fetch_dir }}/k1/sgl_kernel.whl"
    out["ansible.builtin.shell"] = script
    return out


def _rollout_kernel(tmp_path, fail_build=(), fail_install=()):
    """Play 2's real block with the kernel stage logged instead of run, then play 3's real kernel task the same way;
    (result, {host: [what, ...]})."""
    log = tmp_path / "kernel.log"
    block = ansible_run.role_task("sglang_rollout", "build.yml", "Build each build key once")
    todo = [block]
    while todo:
        task = todo.pop()
        for key in ("block", "rescue"):
            for i, sub in enumerate(task.get(key) or []):
                if sub.get("name") == "Build the wheel and fetch it to the artifact cache":
                    task[key][i] = _log_instead(sub, log, "build", fail_build)
                elif sub.get("name") == "Install the wheel from the artifact cache, on every other host of the key at once":
                    task[key][i] = _log_instead(sub, log, "install", fail_install)
                else:
                    todo.append(sub)
    batch = _log_instead(ansible_run.role_task("sglang_rollout", "upgrade.yml", UPGRADE_KERNEL), log, "batch")
    hosts = {h: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "sglang_stack_kernel_build_key": "k1", "sgl_kernel_sm120_fetch_dir": str(tmp_path / "cache"),
                 "sglang_converge_sealed": False, "sglang_release_dir": "/opt/sglang/releases/r1"}
             for h in ("gpu-a", "gpu-b", "gpu-c")}
    inventory = {"all": {"children": {"sglang_servers": {"hosts": hosts},
                                      "sgl_kernel_key_k1": {"hosts": {"gpu-a": {}, "gpu-b": {}, "gpu-c": {}}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    plays = [{"name": "play 2", "hosts": "sglang_servers", "gather_facts": False, "tasks": [block]},
             {"name": "play 3", "hosts": "sglang_servers", "gather_facts": False, "serial": 1, "tasks": [batch]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    result = ansible_run.playbook(str(tmp_path / "play.yml"), tmp_path, inventory=str(tmp_path / "hosts.yml"))
    ran = {}
    for line in (log.read_text().splitlines() if log.exists() else []):
        host, what = line.split()
        ran.setdefault(host, []).append(what)
    return result, ran


def test_the_other_hosts_install_in_play_2_and_their_batches_skip_the_kernel_stage(tmp_path):
    result, ran = _rollout_kernel(tmp_path)
    assert result.ok, result.out
    assert ran == {"gpu-a": ["build"], "gpu-b": ["install"], "gpu-c": ["install"]}, ran


def test_a_failed_install_in_play_2_is_left_to_the_hosts_batch(tmp_path):
    result, ran = _rollout_kernel(tmp_path, fail_install=("gpu-c",))
    assert result.ok, result.out
    assert ran == {"gpu-a": ["build"], "gpu-b": ["install"], "gpu-c": ["install", "batch"]}, ran
    assert "its batch runs the kernel stage again" in result.out


def test_a_failed_build_fails_its_builder_and_nobody_installs_from_an_empty_cache(tmp_path):
    result, ran = _rollout_kernel(tmp_path, fail_build=("gpu-a",))
    assert not result.ok
    assert result.recap("gpu-a")["failed"] == 1, result.out
    # the others find no wheel in the cache: their batches' kernel stage decides, as before this change
    assert ran == {"gpu-a": ["build"], "gpu-b": ["batch"], "gpu-c": ["batch"]}, ran
