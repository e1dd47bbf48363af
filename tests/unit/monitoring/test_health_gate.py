"""The GPU health gate in the real playbooks: playbooks/rollout.yml (all three plays) and playbooks/health.yml,
run by real ansible-playbook over two local-connection hosts.

gpu-sick has the recorded Xid 79 kernel log (tests/fixtures/gpu_health/kernel/xid79_fell_off_bus.log) and an
nvidia-smi double that lists one of its two GPUs; gpu-ok is healthy. The gate (sglang_monitoring tasks_from:
health, the gpu_health module) runs for real; every other role include is replaced by a stand-in with the same
name and conditions (the roles need a GPU host; in the playbook and in the task files of the chain roles it calls,
tests/unit/_playbook_standins.py), the sglang_service stand-in appends to a per-host log, so the
test sees which host reached the rollout's service step.
"""

import os
import sys

import pytest
import yaml

import _playbook_standins as standins
import ansible_run
from conftest import FIXTURES

GH = os.path.join(FIXTURES, "gpu_health")
pytestmark = pytest.mark.slow


def _double(task, log_dir):
    _key, _args, role, entry = standins.role_call(task)
    if (role, entry) == ("sglang_monitoring", "health"):
        return task                                   # the real gate
    out = standins.without_call(task)
    facts = standins.stage_facts(role, entry, switched=False)
    if facts is not None:
        out["ansible.builtin.set_fact"] = facts
    elif role == "sglang_service":
        out["ansible.builtin.shell"] = "echo '%s' >> %s/{{ inventory_hostname }}.log" % (entry, log_dir)
        out["changed_when"] = False
    elif role == "sglang_gateway":                    # tests/unit/monitoring/test_health_takes_out.py: the real one
        out["ansible.builtin.shell"] = "echo '%s' >> %s/{{ inventory_hostname }}.gateway" % (entry, log_dir)
        out["changed_when"] = False
    else:
        out["ansible.builtin.debug"] = {"msg": "stand-in for %s/%s" % (role, entry)}
    return out


def _run(tmp_path, playbook, extra=None):
    log_dir = tmp_path / "service"
    log_dir.mkdir()
    play = standins.standin_playbook(playbook, tmp_path, lambda task: _double(task, log_dir))
    with open(play) as handle:
        plays = yaml.safe_load(handle)
    for each in plays:
        each["gather_facts"] = False
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays))
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "sglang_monitoring_health_kernel_log_source": "file",
              "sglang_monitoring_health_expected_gpu_count": 2,
              # what play 1 keeps as facts (set by the roles the stand-ins replace)
              "sglang_stack_root": str(tmp_path), "sglang_stack_current": str(tmp_path / "current"),
              "sglang_stack_previous": str(tmp_path / "previous"), "sglang_release_id": "new",
              "sglang_release_dir": str(tmp_path / "new"), "sglang_stack_cuda_env_file": "/dev/null",
              "sglang_stack_venv": str(tmp_path / "venv"), "sglang_stack_flashinfer_version": "0.6.5",
              "sgl_kernel_sm120_fetch_dir": str(tmp_path / "artifacts")}
    hosts = {
        "gpu-sick": {"sglang_monitoring_health_kernel_log_path": os.path.join(GH, "kernel", "xid79_fell_off_bus.log"),
                     "sglang_monitoring_nvidia_smi": os.path.join(GH, "smi_one_gone_pro6000_x2", "nvidia-smi")},
        "gpu-ok": {"sglang_monitoring_health_kernel_log_path": os.path.join(GH, "kernel", "healthy_boot.log"),
                   "sglang_monitoring_nvidia_smi": os.path.join(GH, "smi_healthy_pro6000_x2", "nvidia-smi")},
    }
    inventory = {"all": {"vars": common, "children": {"sglang_servers": {"hosts": hosts}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    proc = ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "inventory.yml", extra_vars=extra)
    service = {h: (log_dir / ("%s.log" % h)).read_text().split() if (log_dir / ("%s.log" % h)).exists() else []
               for h in hosts}
    for host in hosts:                                # the gateway entry points each host reached, in order
        gateway = log_dir / ("%s.gateway" % host)
        service["gateway:" + host] = gateway.read_text().split() if gateway.exists() else []
    return proc, service


def test_rollout_skips_the_host_with_xid_79_and_rolls_out_the_other(tmp_path):
    proc, service = _run(tmp_path, "rollout.yml", extra={"sglang_rollout_serial": ["100%"]})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out                   # the skipped host shows as failed in the recap
    assert "GPU health gate: gpu-sick is unhealthy and is left out of this run" in out, out
    assert "Xid 79 on 0000:41:00.0: GPU has fallen off the bus" in out, out
    assert "reboot or power-cycle the host" in out
    # gpu-sick never reached a later step; gpu-ok went through the whole rollout
    assert service["gpu-sick"] == [], service
    assert service["gpu-ok"] == ["multinode", "check", "main"], (service, out)
    # the skipped host is taken out of the gateways (and never put back); gpu-ok is drained and undrained by play 3
    assert service["gateway:gpu-sick"] == ["drain"], service
    assert service["gateway:gpu-ok"] == ["drain", "undrain"], service
    recap = out[out.index("PLAY RECAP"):]
    assert "gpu-ok" in recap and "failed=0" in [line for line in recap.splitlines() if "gpu-ok" in line][0].replace(" ", "")


def test_rollout_stop_mode_stops_every_host(tmp_path):
    proc, service = _run(tmp_path, "rollout.yml", extra={"sglang_rollout_serial": ["100%"],
                                                         "sglang_monitoring_health_action": "stop"})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "GPU health gate: stopping before any change; gpu-sick is not healthy" in out, out
    assert service == {"gpu-sick": [], "gpu-ok": [], "gateway:gpu-sick": ["drain"], "gateway:gpu-ok": []}


def test_health_sweep_prints_the_table(tmp_path):
    proc, service = _run(tmp_path, "health.yml")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out                   # an unhealthy host fails the sweep at the end
    lines = [line.strip().strip('",') for line in out.splitlines()]
    row = [line for line in lines if line.startswith("gpu-sick ")]
    assert row and row[0].split()[:4] == ["gpu-sick", "unhealthy", "1/2", "79"], out
    ok = [line for line in lines if line.startswith("gpu-ok ")]
    assert ok and ok[0].split()[:4] == ["gpu-ok", "healthy", "2/2", "-"], out
    assert "unhealthy: gpu-sick" in out
    assert service["gateway:gpu-sick"] == ["drain"] and service["gateway:gpu-ok"] == [], service
