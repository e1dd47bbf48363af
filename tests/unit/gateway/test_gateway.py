"""The gateway plan, checks and argv (module_utils/_gateway.py), and the drain/undrain logic against a real smg.

The drain tests start the real ``smg launch`` (PyPI smg 1.13.0; a venv given by SGLANG_GATEWAY_TEST_SMG_PYTHON, or
the test venv's python when it has smg) on 127.0.0.1 in front of two stand-in SGLang servers
(tests/fixtures/benchmark/e2e/fake_sglang_server.py), bounded in time; they are skipped when no smg is installed.
"""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _gateway
import _playbook_standins as standins

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FAKE = os.path.join(ROOT, "tests", "fixtures", "benchmark", "e2e", "fake_sglang_server.py")
KEY = "test-key-0123456789abcdef0123456789"


# ------------------------------------------------------------------------------------------------ plan and checks

def test_plan_single_and_multinode_rank0_only():
    servers = [
        {"host": "a", "address": "10.0.0.1", "port": 30000},
        {"host": "m1", "address": "10.0.0.2", "port": 30000, "multinode_members": ["m1", "m2"]},
        {"host": "m2", "address": "10.0.0.3", "port": 30000, "multinode_members": ["m1", "m2"]},
    ]
    workers = _gateway.plan_workers(servers)
    assert [w["url"] for w in workers] == ["http://10.0.0.1:30000", "http://10.0.0.2:30000"]
    assert workers[1]["members"] == ["m1", "m2"]


def test_plan_explicit_rank0_wins_over_inventory_order():
    servers = [
        {"host": "m1", "address": "10.0.0.2", "port": 30000, "multinode_members": ["m1", "m2"], "ranks": {"m1": 1, "m2": 0}},
        {"host": "m2", "address": "fd00::3", "port": 30001, "multinode_members": ["m1", "m2"], "ranks": {"m1": 1, "m2": 0}},
    ]
    assert [w["url"] for w in _gateway.plan_workers(servers)] == ["http://[fd00::3]:30001"]


def test_plan_empty_group_names_the_variable():
    with pytest.raises(_gateway.GatewayError) as exc:
        _gateway.plan_workers([], "sglang_servers")
    assert exc.value.variable == "sglang_gateway_workers_group"
    assert "no hosts" in str(exc.value)


def test_plan_refuses_duplicate_url_and_bad_port():
    with pytest.raises(_gateway.GatewayError, match="both give"):
        _gateway.plan_workers([{"host": "a", "address": "h", "port": 1}, {"host": "b", "address": "h", "port": 1}])
    with pytest.raises(_gateway.GatewayError, match="sglang_gateway_worker_port"):
        _gateway.plan_workers([{"host": "a", "address": "h", "port": 70000}])


def _workers():
    return _gateway.plan_workers([{"host": "gpu1", "address": "10.0.0.1", "port": 30000},
                                  {"host": "gpu2", "address": "10.0.0.2", "port": 30000}])


def test_check_port_clash_with_sglang_on_the_same_host():
    with pytest.raises(_gateway.GatewayError) as exc:
        _gateway.check_settings("gpu1", _workers(), {"port": 30000, "prometheus_port": 29000, "policy": "cache_aware"},
                                server_ports={"gpu1": 30000, "gpu2": 30000})
    assert exc.value.variable == "sglang_gateway_port"
    assert "sglang_service_port" in str(exc.value)
    # a separate CPU host may use the port the workers use
    passed = _gateway.check_settings("cpu-gw", _workers(), {"port": 30000, "prometheus_port": 29000, "policy": "x"},
                                     server_ports={"gpu1": 30000, "gpu2": 30000})
    assert "gateway ports distinct" in passed


def test_check_gateway_ports_distinct():
    with pytest.raises(_gateway.GatewayError, match="sglang_gateway_port and sglang_gateway_prometheus_port"):
        _gateway.check_settings("gw", _workers(), {"port": 8000, "prometheus_port": 8000, "policy": "cache_aware"})


def test_check_policy_against_installed_choices():
    with pytest.raises(_gateway.GatewayError) as exc:
        _gateway.check_settings("gw", _workers(), {"port": 8000, "policy": "fastest"},
                                policies=["random", "round_robin", "cache_aware"])
    assert exc.value.variable == "sglang_gateway_policy"
    assert "round_robin" in str(exc.value)


def test_check_loopback_worker_behind_remote_gateway():
    with pytest.raises(_gateway.GatewayError) as exc:
        _gateway.check_settings("gw", _workers(), {"port": 8000, "policy": "cache_aware"},
                                server_binds={"gpu1": "127.0.0.1", "gpu2": "0.0.0.0"})
    assert exc.value.variable == "sglang_service_host"


def test_render_args_and_no_key_in_argv():
    argv = _gateway.render_args({"host": "0.0.0.0", "port": 8000, "policy": "round_robin", "prometheus_port": 29000,
                                 "retry_max_retries": 3, "log_level": "", "extra_args": ["--disable-circuit-breaker"]},
                                _workers())
    assert argv[:4] == ["--host", "0.0.0.0", "--port", "8000"]
    at = argv.index("--worker-urls")
    assert argv[at + 1:at + 3] == ["http://10.0.0.1:30000", "http://10.0.0.2:30000"]
    assert "--retry-max-retries" in argv and "--log-level" not in argv
    with pytest.raises(_gateway.GatewayError, match="never in argv"):
        _gateway.render_args({"host": "h", "port": 1, "policy": "p", "extra_args": ["--api-key", "x"]}, _workers())


def test_inflight_parsers():
    assert _gateway.inflight_from_load([{"dp_rank": 0, "num_reqs": 2}, {"dp_rank": 1, "num_reqs": 3}]) == 5
    text = 'sglang:num_running_reqs{model_name="m"} 4.0\nsglang:num_queue_reqs{model_name="m"} 1.0\n'
    assert _gateway.inflight_from_metrics(text) == 5
    with pytest.raises(_gateway.GatewayError):
        _gateway.inflight_from_metrics("other_metric 1\n")


def test_audit_diff():
    listed = [{"url": "http://a:1", "is_healthy": True, "status": "ready"},
              {"url": "http://b:1/", "is_healthy": False, "status": "ready"},
              {"url": "http://x:1", "is_healthy": True, "status": "ready"}]
    res = _gateway.audit(listed, ["http://a:1", "http://b:1", "http://c:1"])
    assert res["routes_to"] == ["http://a:1", "http://x:1"]
    assert res["unhealthy"] == ["http://b:1"] and res["missing"] == ["http://c:1"]
    assert res["unexpected"] == ["http://x:1"] and not res["in_sync"]


# ------------------------------------------------------------------------------------------ against a real smg

SMG_PY = standins.smg_python()
needs_smg = pytest.mark.skipif(SMG_PY is None, reason="no smg installed (set SGLANG_GATEWAY_TEST_SMG_PYTHON to a venv with smg 1.13.0)")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Two stand-in workers and one real smg on 127.0.0.1; all stopped at the end (and bounded by timeout)."""
    procs = []
    tmp = tmp_path_factory.mktemp("gw")
    ports = [standins.free_port(), standins.free_port()]
    workers = ["http://127.0.0.1:%d" % p for p in ports]
    for i, port in enumerate(ports):
        procs.append(subprocess.Popen(["timeout", "300", sys.executable, FAKE, "--port", str(port), "--name", "w%d" % i,
                                       "--api-key", KEY, "--step-ms", "20", "--unhealthy-file", str(tmp / ("down%d" % i))],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for url in workers:
        standins.wait_http(url + "/health")
    # the role's launcher, rendered the way the template is (the key from the environment)
    gw, gw_port, prom_port = standins.start_smg(SMG_PY, tmp, workers, KEY)
    procs.append(gw)
    standins.wait_http("http://127.0.0.1:%d/health" % gw_port, timeout=60)
    client = _gateway.Client("http://127.0.0.1:%d" % gw_port, KEY)
    end = time.monotonic() + 60
    while time.monotonic() < end and not all(_gateway.is_routable(_gateway.find_worker(client.workers(), u)) for u in workers):
        time.sleep(0.5)
    yield {"client": client, "workers": workers, "tmp": tmp, "gw": gw, "prom": prom_port}
    standins.stop(procs)


def _complete(port_url, key=KEY, tokens=4):
    req = urllib.request.Request(port_url + "/v1/completions", method="POST",
                                 data=json.dumps({"model": "fake-model", "prompt": "hi", "max_tokens": tokens}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.status, json.loads(resp.read())


@needs_smg
def test_real_smg_lists_both_workers_and_key_not_in_argv(fleet):
    listed = fleet["client"].workers()
    assert _gateway.audit(listed, fleet["workers"])["in_sync"]
    with open("/proc/%d/cmdline" % fleet["gw"].pid, "rb") as fh:
        assert KEY.encode() not in fh.read()
    # the gateway gates the data plane with the key
    with pytest.raises(urllib.error.HTTPError) as exc:
        _complete(fleet["client"].base_url, key="wrong")
    assert exc.value.code == 401


@needs_smg
def test_real_smg_drain_and_undrain(fleet):
    client, w0 = fleet["client"], fleet["workers"][0]
    # a slow request in flight on w0 while it is drained: the drain waits for it, the request succeeds
    results = []

    def slow():
        results.append(_complete(w0, tokens=60))     # straight to the worker: 60 x 20 ms
    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.3)
    removed = _gateway.remove_worker(client, w0, timeout=60, poll=0.3)
    assert removed["changed"] and _gateway.find_worker(client.workers(), w0) is None
    idle = _gateway.wait_idle(_gateway.Client(w0, KEY), timeout=30, poll=0.2)
    thread.join(timeout=30)
    assert idle["idle"] and idle["source"] == "/get_load"
    assert results and results[0][0] == 200
    # while out, every request through the gateway goes to w1
    served = set(_complete(client.base_url)[1]["served_by"] for _i in range(6))
    assert served == {"w1"}
    assert _gateway.remove_worker(client, w0)["changed"] is False          # idempotent
    added = _gateway.add_worker(client, w0, timeout=60, poll=0.5, worker_api_key=KEY)
    assert added["changed"] and _gateway.is_routable(_gateway.find_worker(client.workers(), w0))
    assert _gateway.add_worker(client, w0, timeout=60)["changed"] is False
    served = set(_complete(client.base_url)[1]["served_by"] for _i in range(6))
    assert served == {"w0", "w1"}


@needs_smg
def test_real_smg_unhealthy_worker_stays_out(fleet):
    client, w1 = fleet["client"], fleet["workers"][1]
    _gateway.remove_worker(client, w1, timeout=60, poll=0.3)
    down = fleet["tmp"] / "down1"
    down.write_text("injected")
    try:
        with pytest.raises(_gateway.GatewayError, match="taken out again"):
            _gateway.add_worker(client, w1, timeout=8, poll=0.5, remove_on_failure=True, worker_api_key=KEY)
        assert _gateway.find_worker(client.workers(), w1) is None
        assert _gateway.audit(client.workers(), fleet["workers"])["routes_to"] == [fleet["workers"][0]]
    finally:
        down.unlink()
    assert _gateway.add_worker(client, w1, timeout=60, poll=0.5, worker_api_key=KEY)["changed"]


@needs_smg
def test_real_smg_parser_introspection():
    out = subprocess.run([SMG_PY, "-c", _gateway.INTROSPECT_SCRIPT, json.dumps(["--policy", "fastest"])],
                         capture_output=True, text=True, timeout=120, check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert "cache_aware" in data["policies"] and "round_robin" in data["policies"]
    assert "fastest" in data["parse_error"]
    ok = subprocess.run([SMG_PY, "-c", _gateway.INTROSPECT_SCRIPT,
                         json.dumps(_gateway.render_args({"host": "127.0.0.1", "port": 8000, "policy": "cache_aware"},
                                                         [{"url": "http://10.0.0.1:30000"}]))],
                        capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(ok.stdout.strip().splitlines()[-1])["parse_error"] is None
