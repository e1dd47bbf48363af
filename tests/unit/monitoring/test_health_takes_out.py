"""The gateway takes an unhealthy worker out: the real playbooks/health.yml against a real smg.

Two stand-in SGLang workers (tests/fixtures/benchmark/e2e/fake_sglang_server.py, the network boundary) and the real
``smg launch`` (PyPI smg 1.13.0, the role's launcher; a venv given by SGLANG_GATEWAY_TEST_SMG_PYTHON, or this
python when it has smg) run on 127.0.0.1, bounded by ``timeout``. The inventory has two local-connection servers,
gpu-sick (the recorded Xid 79 kernel log, tests/fixtures/gpu_health/kernel/xid79_fell_off_bus.log, and an
nvidia-smi double that lists one of its two GPUs) and gpu-ok (a healthy boot), each the address of one stand-in,
and one gateway host. Nothing is stood in inside the play: gpu_health and sglang_gateway's drain entry point run
for real, the drain's DELETE goes to the real smg.
"""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.module_utils import _gateway
import _playbook_standins as standins
import ansible_run
from conftest import FIXTURES
GH = os.path.join(FIXTURES, "gpu_health")
FAKE = os.path.join(FIXTURES, "benchmark", "e2e", "fake_sglang_server.py")
KEY = "test-key-health-0123456789abcdef0123"
pytestmark = pytest.mark.slow


SMG_PY = standins.smg_python()


def _served_by(base_url, count=8):
    served = []
    for _i in range(count):
        req = urllib.request.Request(base_url + "/v1/completions", method="POST",
                                     data=json.dumps({"model": "fake-model", "prompt": "hi", "max_tokens": 2}).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
        with urllib.request.urlopen(req, timeout=30) as resp:
            served.append(json.loads(resp.read())["served_by"])
    return sorted(set(served))


@pytest.fixture(name="fleet")
def fixture_fleet(tmp_path):
    """Stand-ins for gpu-sick's and gpu-ok's workers, one real smg in front of both; all stopped at the end."""
    standins.require(SMG_PY)
    procs = []
    ports = {"gpu-sick": standins.free_port(), "gpu-ok": standins.free_port()}
    try:
        for host, port in ports.items():
            procs.append(subprocess.Popen(["timeout", "300", sys.executable, FAKE, "--port", str(port), "--name", host,
                                           "--api-key", KEY, "--step-ms", "5"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        workers = {host: "http://127.0.0.1:%d" % port for host, port in ports.items()}
        for url in workers.values():
            standins.wait_http(url + "/health")
        smg, gw_port, _prom = standins.start_smg(SMG_PY, tmp_path, list(workers.values()), KEY)
        procs.append(smg)
        client = _gateway.Client("http://127.0.0.1:%d" % gw_port, KEY)
        standins.wait_http(client.base_url + "/health", timeout=60)
        end = time.monotonic() + 60
        while time.monotonic() < end and _gateway.audit(client.workers(), list(workers.values()))["routes_to"] != sorted(workers.values()):
            time.sleep(0.5)
        assert _served_by(client.base_url) == ["gpu-ok", "gpu-sick"]     # both in before the sweep

        common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                  "sglang_monitoring_health_kernel_log_source": "file", "sglang_monitoring_health_expected_gpu_count": 2,
                  "sglang_gateway_api_key": KEY, "sglang_gateway_worker_address": "127.0.0.1"}
        servers = {
            "gpu-sick": {"sglang_monitoring_health_kernel_log_path": os.path.join(GH, "kernel", "xid79_fell_off_bus.log"),
                         "sglang_monitoring_nvidia_smi": os.path.join(GH, "smi_one_gone_pro6000_x2", "nvidia-smi"),
                         "sglang_gateway_worker_port": ports["gpu-sick"]},
            "gpu-ok": {"sglang_monitoring_health_kernel_log_path": os.path.join(GH, "kernel", "healthy_boot.log"),
                       "sglang_monitoring_nvidia_smi": os.path.join(GH, "smi_healthy_pro6000_x2", "nvidia-smi"),
                       "sglang_gateway_worker_port": ports["gpu-ok"]},
        }
        gateways = {"gw-1": {"sglang_gateway_host": "127.0.0.1", "sglang_gateway_port": gw_port}}
        inventory = {"all": {"vars": common, "children": {"sglang_servers": {"hosts": servers},
                                                          "sglang_gateways": {"hosts": gateways}}}}
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
        yield {"client": client, "workers": workers, "inventory": str(tmp_path / "inventory.yml")}
    finally:
        standins.stop(procs)


def _health(inventory, extra=None):
    proc = ansible_run.playbook(os.path.join(ansible_run.ROOT, "playbooks", "health.yml"), inventory=inventory,
                                extra_vars=extra)
    return proc, proc.out


def _drained_hosts(out):
    """Hosts for which the drain's DELETE task ran (changed or ok), read from ansible-playbook's default output."""
    block = out.split("TASK [blackwell.sglang.sglang_gateway : Take the worker out of every gateway]")
    hosts = set()
    for part in block[1:]:
        for line in part.split("TASK [")[0].splitlines():
            if line.startswith(("changed: [", "ok: [")):
                hosts.add(line.split("[", 1)[1].split("]", 1)[0].split(" -> ")[0])
    return sorted(hosts)


def test_health_sweep_takes_the_xid79_worker_out_of_the_real_gateway(fleet):
    client, workers = fleet["client"], fleet["workers"]

    # report only: nothing changes on the gateway
    proc, out = _health(fleet["inventory"], {"sglang_health_take_out": False})
    assert proc.returncode != 0 and "unhealthy: gpu-sick" in out, out
    assert _drained_hosts(out) == [], out
    assert _gateway.audit(client.workers(), list(workers.values()))["routes_to"] == sorted(workers.values())

    # the default acts: gpu-sick's worker is removed from the gateway, gpu-ok's is not touched
    proc, out = _health(fleet["inventory"])
    assert proc.returncode != 0 and "unhealthy: gpu-sick" in out, out       # the sweep still fails for the sick host
    assert _drained_hosts(out) == ["gpu-sick"], out
    assert "changed: [gpu-sick -> gw-1]" in out, out
    assert KEY not in out
    listed = client.workers()
    assert _gateway.find_worker(listed, workers["gpu-sick"]) is None, listed
    assert _gateway.is_routable(_gateway.find_worker(listed, workers["gpu-ok"])), listed
    assert _served_by(client.base_url) == ["gpu-ok"]

    # it stays out: smg's health checker does not bring it back (the stand-in itself still answers /health), and the
    # next sweep finds it out already (no change)
    time.sleep(3)
    assert _gateway.find_worker(client.workers(), workers["gpu-sick"]) is None
    proc, out = _health(fleet["inventory"])
    assert _drained_hosts(out) == ["gpu-sick"] and "changed: [gpu-sick -> gw-1]" not in out, out
    assert _served_by(client.base_url) == ["gpu-ok"]
