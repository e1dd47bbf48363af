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
