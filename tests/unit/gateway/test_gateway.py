"""The gateway plan, checks and argv (module_utils/_gateway.py), and the drain/undrain logic against a real smg.

The drain tests start the real ``smg launch`` (PyPI smg 1.13.0; a venv given by SGLANG_GATEWAY_TEST_SMG_PYTHON, or
the test venv's python when it has smg) on 127.0.0.1 in front of two stand-in SGLang servers
(tests/fixtures/benchmark/e2e/fake_sglang_server.py), bounded in time; they are skipped when no smg is installed.
"""

import json
import os
import re
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
    assert "sglang_stack_service_port" in str(exc.value)
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
    assert exc.value.variable == "sglang_stack_service_host"


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
        with pytest.raises(_gateway.GatewayError, match="not put into the gateway .*, so it stays out"):
            _gateway.add_worker(client, w1, timeout=8, poll=0.5, remove_on_failure=True, worker_api_key=KEY)
        assert _gateway.find_worker(client.workers(), w1) is None
        assert _gateway.audit(client.workers(), fleet["workers"])["routes_to"] == [fleet["workers"][0]]
    finally:
        down.unlink()
    assert _gateway.add_worker(client, w1, timeout=60, poll=0.5, worker_api_key=KEY)["changed"]


def _listed_while(client, url, seconds, poll=0.5):
    """Poll the gateway for ``seconds``; the times (s from now) at which it listed ``url``."""
    start = time.monotonic()
    seen = []
    while time.monotonic() - start < seconds:
        if _gateway.find_worker(client.workers(), url) is not None:
            seen.append(round(time.monotonic() - start, 1))
        time.sleep(poll)
    return seen


# smg 1.13.0 retries a pending registration every --worker-startup-check-interval: 30 s (its default, the role's too)
SMG_RETRY_S = 30


@needs_smg
@pytest.mark.slow
def test_real_smg_worker_given_up_at_undrain_stays_out_when_it_turns_healthy(fleet):
    """The undrain gives up on a worker that is not healthy in time; the worker passes /health by itself later (a
    model that finished loading): smg must not route to it. (Posting it while unhealthy would leave smg's
    registration retrying, and DELETE cannot cancel that: it was routed to 30 s later, tests/unit/gateway.)"""
    client, w0, w1 = fleet["client"], fleet["workers"][0], fleet["workers"][1]
    _gateway.remove_worker(client, w1, timeout=60, poll=0.3)
    down = fleet["tmp"] / "down1"
    down.write_text("still loading")
    try:
        with pytest.raises(_gateway.GatewayError) as exc:
            _gateway.add_worker(client, w1, timeout=6, poll=0.5, remove_on_failure=True, worker_api_key=KEY)
        assert "not healthy after 6s" in str(exc.value) and "stays out" in str(exc.value), exc.value
    finally:
        down.unlink()
    standins.wait_http(w1 + "/health")                   # healthy by itself from here on
    assert _listed_while(client, w1, SMG_RETRY_S + 10) == []
    served = {_complete(client.base_url)[1]["served_by"] for _i in range(10)}
    assert served == {"w0"}, served
    assert _gateway.audit(client.workers(), fleet["workers"])["routes_to"] == [w0]
    assert _gateway.add_worker(client, w1, timeout=60, poll=0.5, worker_api_key=KEY)["changed"]   # a play puts it back


class _FlipsUnhealthyOnPost(_gateway.Client):
    """The gateway's client, but the worker turns unhealthy right after the undrain's own /health probe passed and
    before smg's (the race a registration can be left pending by), until ``heal_after`` s after the POST."""

    def __init__(self, base_url, key, down, heal_after):
        super().__init__(base_url, key)
        self.down, self.heal_after, self.healed = down, heal_after, None

    def call(self, method, path, body=None):
        if (method, path) == ("POST", "/workers"):
            self.down.write_text("flapped")
            self.healed = threading.Timer(self.heal_after, self.down.unlink)
            self.healed.start()
        return super().call(method, path, body)


@needs_smg
@pytest.mark.slow
def test_real_smg_registration_completing_after_the_give_up_is_taken_out(fleet):
    client, w0, w1 = fleet["client"], fleet["workers"][0], fleet["workers"][1]
    _gateway.remove_worker(client, w1, timeout=60, poll=0.3)
    flaky = _FlipsUnhealthyOnPost(client.base_url, KEY, fleet["tmp"] / "down1", heal_after=5)
    began = time.monotonic()
    try:
        with pytest.raises(_gateway.GatewayError) as exc:
            _gateway.add_worker(flaky, w1, timeout=4, poll=0.5, remove_on_failure=True, worker_api_key=KEY,
                                pending_timeout=SMG_RETRY_S + 15)
    finally:
        flaky.healed.join(timeout=30)
    took = time.monotonic() - began
    # smg's retry registered it about 30 s after the POST; the module removed it and said so
    assert "its registration (smg worker id" in str(exc.value) and "taken out again" in str(exc.value), exc.value
    assert SMG_RETRY_S - 5 < took < SMG_RETRY_S + 30, took
    assert _listed_while(client, w1, 8) == []
    served = {_complete(client.base_url)[1]["served_by"] for _i in range(10)}
    assert served == {"w0"}, served
    assert _gateway.add_worker(client, w1, timeout=60, poll=0.5, worker_api_key=KEY)["changed"]


# roles/sglang_gateway/defaults/main.yml: health checks and retries the role launches smg with
ROLE_HEALTH = {"health_check_interval_secs": 10, "health_check_timeout_secs": 5, "health_failure_threshold": 3,
               "health_success_threshold": 2, "retry_max_retries": 5, "retry_initial_backoff_ms": 50}


def _defaults_match_the_role():
    import yaml                                                    # pylint: disable=import-outside-toplevel
    with open(os.path.join(ROOT, "roles", "sglang_gateway", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    return {k: defaults["sglang_gateway_" + k] for k in ROLE_HEALTH} == ROLE_HEALTH


@needs_smg
@pytest.mark.slow
def test_real_smg_crashed_worker_circuit_breaker_first_health_status_later(tmp_path):
    """A worker crashes (SIGKILL) under a steady load through smg with the role's health and retry settings and
    smg's own circuit-breaker defaults (10 failures open it): the breaker stops sending to it after a few failed
    sends and smg retries those on the other worker (no client error); GET /workers marks it unhealthy only after
    about interval x failure threshold (10 s x 3)."""
    assert _defaults_match_the_role()
    ports = [standins.free_port(), standins.free_port()]
    urls = ["http://127.0.0.1:%d" % p for p in ports]
    # not under `timeout`: the crash below must kill the server itself (stopped in `finally`)
    workers = [subprocess.Popen([sys.executable, FAKE, "--port", str(p), "--name", "w%d" % i,
                                 "--api-key", KEY, "--step-ms", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for i, p in enumerate(ports)]
    procs = list(workers)
    try:
        for url in urls:
            standins.wait_http(url + "/health")
        gw, gw_port, prom_port = standins.start_smg(SMG_PY, tmp_path, urls, KEY, settings=ROLE_HEALTH, lifetime_s=200)
        procs.append(gw)
        standins.wait_http("http://127.0.0.1:%d/health" % gw_port, timeout=60)
        client = _gateway.Client("http://127.0.0.1:%d" % gw_port, KEY)
        end = time.monotonic() + 60
        while time.monotonic() < end and _gateway.audit(client.workers(), urls)["routes_to"] != sorted(urls):
            time.sleep(0.3)
        records, stop = [], threading.Event()

        def load():                                             # about 10 requests/s, one at a time
            while not stop.is_set():
                sent = time.time()
                try:
                    records.append((sent, _complete(client.base_url, tokens=2)[1]["served_by"]))
                except Exception as exc:  # pylint: disable=broad-except
                    records.append((sent, "error: %s" % exc))
                time.sleep(0.1)
        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        time.sleep(3)
        crashed = time.time()
        workers[1].kill()
        breaker = unhealthy = None
        while time.time() - crashed < 60 and unhealthy is None:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % prom_port, timeout=5) as resp:
                metrics = resp.read().decode()
            if breaker is None and 'smg_worker_cb_state{worker="%s"} 1' % urls[1] in metrics:
                breaker = time.time() - crashed
            entry = _gateway.find_worker(client.workers(), urls[1])
            if entry is not None and not entry.get("is_healthy"):
                unhealthy = time.time() - crashed
            time.sleep(0.2)
        stop.set()
        thread.join(timeout=40)
    finally:
        standins.stop(procs)
    after = [r for r in records if r[0] > crashed]
    log = (tmp_path / "smg.log").read_text(errors="replace")
    sends = len(re.findall(r"Failed to send.*worker_url=%s" % re.escape(urls[1]), log))
    print("circuit breaker open %s s after the crash (%d failed sends to it, all retried), GET /workers unhealthy "
          "after %s s; %d requests after the crash, served by %s"
          % (breaker and round(breaker, 1), sends, unhealthy and round(unhealthy, 1), len(after),
             sorted({r[1] for r in after})))
    assert breaker is not None and unhealthy is not None, (breaker, unhealthy)
    assert breaker < unhealthy and sends <= 15, (breaker, unhealthy, sends)
    assert 15 <= unhealthy <= 40, unhealthy                      # 10 s x 3 checks, give or take one interval
    assert after and {r[1] for r in after} == {"w0"}, after        # retried on w0: no client saw the crash


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
