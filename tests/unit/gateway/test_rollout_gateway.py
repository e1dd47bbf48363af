"""playbooks/rollout.yml itself, with the real gateway: two rollouts under load through the real smg.

Real: playbooks/rollout.yml's three plays as written (their block/rescue, the serial batches of its default
``sglang_rollout_serial``, the GPU health gate of play 1 with the healthy fixtures of test_health_gate.py, the
operator's health-check task, the stat of ``previous``, the stop), the role ``sglang_gateway`` (its drain and
undrain entry points, the modules sglang_gateway_worker and sglang_worker_inflight) and ``smg launch`` (PyPI smg
1.13.0, started with the role's launcher template; a venv given by SGLANG_GATEWAY_TEST_SMG_PYTHON, or this python
when it has smg) on 127.0.0.1, with the role's retry default (5: smg retries a failed request on another worker). With
retries off, 1 in about 900 paced requests (2 % of unpaced keep-alive ones) fail with smg's 500 "error sending request"
against the Python stand-in even with no rollout at all, so the drain is shown directly instead: at each SIGTERM the
gateway's ``GET /workers`` does not list the worker, no request is in flight to it or served by it while it is down,
and smg logs no failed send to it in that window.

Stood in (the same way as tests/unit/monitoring/test_health_gate.py, through tests/unit/_playbook_standins.py: each
heavy role call, in the playbook and in the task files of sglang_rollout and sglang_converge, replaced by a task of
the same name and conditions; those roles need a GPU host and are tested elsewhere): preflight, the stack roles,
sgl_kernel_sm120, fp4_probe, sglang_release (switch: ``sglang_release_switched: true``; rollback: a fact) and
sglang_service, whose main entry point here really restarts the host's stand-in worker
(tests/fixtures/gateway/worker_ctl.py: SIGTERM, wait, start again on the same port), as a restart of
sglang.service would. The workers are tests/fixtures/benchmark/e2e/fake_sglang_server.py (the network boundary).

Inventory: worker-1 and worker-2 (local connection, distinct ports) in sglang_servers, gw-1 (local connection) in
sglang_gateways. A paced load generator (fixed request count, 4 at a time, 30 s per-request timeout, stops by
itself, 127.0.0.1 only) sends completions through the gateway during each rollout.

1. Rollout 1 over both workers: every restart falls inside the load window, at each restart the gateway lists only
   the other worker, zero failed requests, both workers back and healthy at the end.
2. Rollout 2: worker-2's health check fails (injected as molecule/fleet/side_effect.yml does) and its stand-in
   answers /health 503 after every restart (--unhealthy-file): the rescue rolls it back and it stays out; smg's
   ``GET /workers`` lists only worker-1, the requests after are all served by worker-1, zero failed requests.
The figures are printed (``pytest -s``) and written to ``figures.json`` in the test's tmp_path.
"""

import calendar
import json
import os
import re
import subprocess
import sys
import threading
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
CTL = os.path.join(FIXTURES, "gateway", "worker_ctl.py")
KEY = "test-key-rollout-0123456789abcdef012"
HOSTS = ("worker-1", "worker-2")
INJECTED = ["/bin/sh", "-c", "echo injected health failure >&2; exit 1"]
pytestmark = pytest.mark.slow


SMG_PY = standins.smg_python()


def _wait(predicate, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError("%s: not within %ss" % (what, timeout))


def _answers(url):
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


class Load:
    """A bounded, paced load on the gateway: ``count`` completions, request i sent at ``start + i / rate`` (or later
    when ``concurrency`` are already in flight), 30 s timeout each, until :meth:`release` (the rollout is over: the
    rest at ``release_rate``); stops by itself after ``count`` requests or ``max_seconds`` (requests not sent by then
    count as failed). 127.0.0.1 only.

    Paced so that the load spans the rollout without thousands of requests on 2 busy cores.
    """

    def __init__(self, url, count, rate, concurrency=4, max_seconds=150.0, max_tokens=8, release_rate=15.0):
        assert url.startswith("http://127.0.0.1:")
        self.url, self.count, self.rate, self.concurrency = url, count, rate, concurrency
        self.release_rate = release_rate
        self.pace = (0, 0.0, rate)        # (first index, its due time, rate) of the current pacing
        self.max_seconds = max_seconds
        self.body = json.dumps({"model": "fake-model", "prompt": "hello", "max_tokens": max_tokens}).encode()
        self.records = []                 # (sent_ts, done_ts, ok, served_by, error)
        self.lock = threading.Lock()
        self.next = 0
        self.threads = []
        self.t0 = None
        self.cond = threading.Condition(self.lock)

    def _one(self):
        req = urllib.request.Request(self.url + "/v1/completions", data=self.body, method="POST",
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
        sent = time.time()
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                payload = json.loads(resp.read())
            ok, who, err = bool(payload.get("choices")), payload.get("served_by"), None
        except Exception as exc:  # pylint: disable=broad-except
            ok, who, err = False, None, "%s: %s" % (type(exc).__name__, str(exc)[:120])
        with self.lock:
            self.records.append((sent, time.time(), ok, who, err))

    def _loop(self):
        while True:
            with self.cond:
                i = self.next
                if i >= self.count:
                    return
                self.next += 1
                while True:                        # wait for request i's turn (re-read after a release)
                    first, at, rate = self.pace
                    wait = self.t0 + at + max(0, i - first) / rate - time.monotonic()
                    if wait <= 0:
                        break
                    self.cond.wait(wait)
            if time.monotonic() - self.t0 > self.max_seconds:
                return
            self._one()

    def start(self):
        self.t0 = time.monotonic()
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _i in range(self.concurrency)]
        for thread in self.threads:
            thread.start()
        return self

    def release(self):
        """The rollout is over: the requests not yet sent go out at ``release_rate`` (the count stays)."""
        with self.cond:
            self.pace = (self.next, time.monotonic() - self.t0, self.release_rate)
            self.cond.notify_all()

    def join(self, timeout):
        end = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.1, end - time.monotonic()))
        assert not any(t.is_alive() for t in self.threads), "load generator still running after %ss" % timeout
        return self.summary()

    def summary(self):
        with self.lock:
            recs = list(self.records)
        served = {}
        errors = {}
        for rec in recs:
            if rec[2]:
                served[rec[3]] = served.get(rec[3], 0) + 1
            else:
                errors[rec[4]] = errors.get(rec[4], 0) + 1
        ok = sum(1 for r in recs if r[2])
        return {"requests": self.count, "ok": ok, "failed": self.count - ok, "unsent": self.count - len(recs),
                "errors": errors, "served_by": served,
                "first_ts": min(r[0] for r in recs) if recs else None, "last_ts": max(r[1] for r in recs) if recs else None,
                "window_s": round(max(r[1] for r in recs) - min(r[0] for r in recs), 1) if recs else 0.0}

    def during(self, begin, end):
        """The requests in flight at some moment of [begin, end]."""
        with self.lock:
            return [r for r in self.records if r[0] <= end and r[1] >= begin]


# ------------------------------------------------------------------------------------- rollout.yml with stand-ins

def _double(task):
    _key, _args, role, entry = standins.role_call(task)
    if role == "sglang_gateway" or (role, entry) == ("sglang_monitoring", "health"):
        return task                                   # real: the gateway role and the GPU health gate
    out = standins.without_call(task)
    facts = standins.stage_facts(role, entry, switched=True)
    if facts is not None:
        out["ansible.builtin.set_fact"] = facts
    elif (role, entry) == ("sglang_release", "rollback"):
        # the fact the real role publishes, for a release whose manifest recorded no model, settings or probe
        out["ansible.builtin.set_fact"] = {"sglang_release_rolled_back": {
            "to": "{{ sglang_stack_previous }}", "model": {"recorded": False, "path": None, "service_env": None},
            "service": None, "probe": None}}
    elif (role, entry) == ("sglang_service", "main"):
        # a restart of sglang.service: the stand-in worker stopped gracefully and started again on its port
        out["ansible.builtin.command"] = {"argv": "{{ test_ctl + (['restart'] if sglang_service_restart | bool else ['status'])"
                                                  " + [inventory_hostname] + (['--unhealthy'] if inventory_hostname in"
                                                  " test_broken_hosts else []) }}"}
        out["changed_when"] = "sglang_service_restart | bool"
    else:
        out["ansible.builtin.debug"] = {"msg": "stand-in for %s/%s" % (role, entry)}
    return out


def _hosts_in_task(out, name):
    """Hosts that ran (ok/changed/failed) the task ``name`` in any batch, read from the default callback's output
    (the header may name the role the task is in: ``TASK [<role> : <name>]``)."""
    hosts = set()
    for part in re.split(r"TASK \[(?:[\w.]+ : )?%s\]" % re.escape(name), out)[1:]:
        for line in part.split("TASK [")[0].splitlines():
            if line.startswith(("changed: [", "ok: [", "failed: [", "fatal: [")):
                hosts.add(line.split("[", 1)[1].split("]", 1)[0].split(" -> ")[0])
    return sorted(hosts)


@pytest.fixture(name="fleet")
def fixture_fleet(tmp_path):
    """Two stand-in workers (worker_ctl.py) and the real smg in front of them; the inventory; all stopped at the end."""
    standins.require(SMG_PY)
    run = tmp_path / "run"
    run.mkdir()
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    key_file.chmod(0o600)
    ports = {host: standins.free_port() for host in HOSTS}
    gw_port = standins.free_port()
    cfg = {"fake": FAKE, "python": sys.executable, "dir": str(run), "key_file": str(key_file),
           "gateway": "http://127.0.0.1:%d" % gw_port, "hosts": ports, "step_ms": 5, "lifetime_s": 300}
    (tmp_path / "ctl.json").write_text(json.dumps(cfg))
    ctl = [sys.executable, CTL, "--config", str(tmp_path / "ctl.json")]
    workers = {host: "http://127.0.0.1:%d" % port for host, port in ports.items()}
    smg = None
    try:
        for host in HOSTS:
            subprocess.run(ctl + ["start", host], check=True, timeout=60)
        smg, _port, _prom = standins.start_smg(SMG_PY, tmp_path, [workers[h] for h in HOSTS], KEY, port=gw_port,
                                               env={"TZ": "UTC"})
        client = _gateway.Client(cfg["gateway"], KEY)
        _wait(lambda: _answers(cfg["gateway"] + "/health"), 60, "smg /health")
        _wait(lambda: _gateway.audit(client.workers(), list(workers.values()))["routes_to"] == sorted(workers.values()),
              60, "smg routes to both workers")

        previous = tmp_path / "previous"
        (tmp_path / "old").mkdir()
        previous.symlink_to(tmp_path / "old")          # a release to roll back to (the rescue's stat is real)
        (tmp_path / "artifacts" / "k1").mkdir(parents=True)   # play 2's artifact cache (empty: "built here")
        common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                  "test_ctl": ctl, "test_broken_hosts": [],
                  # the GPU health gate (real) reads the healthy fixtures of test_health_gate.py
                  "sglang_monitoring_health_kernel_log_source": "file",
                  "sglang_monitoring_health_expected_gpu_count": 2,
                  "sglang_monitoring_health_kernel_log_path": os.path.join(GH, "kernel", "healthy_boot.log"),
                  "sglang_monitoring_nvidia_smi": os.path.join(GH, "smi_healthy_pro6000_x2", "nvidia-smi"),
                  # what play 1 keeps as facts (set by the roles the stand-ins replace)
                  "sglang_stack_root": str(tmp_path), "sglang_stack_current": str(tmp_path / "current"),
                  "sglang_stack_previous": str(previous), "sglang_release_id": "new",
                  "sglang_release_dir": str(tmp_path / "new"), "sglang_stack_cuda_env_file": "/dev/null",
                  "sglang_stack_venv": str(tmp_path / "venv"), "sglang_stack_flashinfer_version": "0.6.5",
                  "sgl_kernel_sm120_fetch_dir": str(tmp_path / "artifacts"),
                  # the gateway role (real), bounded for the test
                  "sglang_gateway_api_key": KEY, "sglang_gateway_worker_address": "127.0.0.1",
                  "sglang_gateway_drain_timeout": 30, "sglang_gateway_drain_remove_timeout": 30,
                  "sglang_gateway_undrain_timeout": 6, "sglang_gateway_drain_poll": 0.5}
        servers = {host: {"sglang_gateway_worker_port": ports[host]} for host in HOSTS}
        gateways = {"gw-1": {"sglang_gateway_host": "127.0.0.1", "sglang_gateway_port": gw_port}}
        inventory = {"all": {"vars": common, "children": {"sglang_servers": {"hosts": servers},
                                                          "sglang_gateways": {"hosts": gateways}}}}
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
        standins.standin_playbook("rollout.yml", tmp_path, _double)      # tmp_path/rollout.yml and its roles/
        yield {"client": client, "workers": workers, "ctl": ctl, "tmp": tmp_path, "run": run}
    finally:
        for host in HOSTS:
            subprocess.run(ctl + ["stop", host], check=False, timeout=60)
        if smg is not None:
            standins.stop([smg])


def _rollout(fleet, extra):
    began = time.monotonic()
    proc = ansible_run.playbook(fleet["tmp"] / "rollout.yml", fleet["tmp"], inventory=fleet["tmp"] / "inventory.yml",
                                extra_vars=extra, timeout=150)
    out = proc.out
    fleet["runs"] = fleet.get("runs", 0) + 1
    (fleet["tmp"] / ("rollout-%d.log" % fleet["runs"])).write_text(out)     # kept in tmp_path for a failed run
    return proc, out, round(time.monotonic() - began, 1)


def _smg_send_failures(fleet):
    """(epoch second, worker URL) of each "Failed to send" smg logged (timestamps in UTC, second resolution)."""
    out = []
    for line in (fleet["tmp"] / "smg.log").read_text(errors="replace").splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        found = re.search(r"Failed to send.*worker_url=(\S+)", line)
        if found:
            stamp = calendar.timegm(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
            out.append((stamp, found.group(1)))
    return out


def _check_restarts(fleet, load, res, restarts):
    """Each restart inside the load window, with its worker out of the gateway and no request to it meanwhile."""
    failures = _smg_send_failures(fleet)
    for rec in restarts:
        url = fleet["workers"][rec["host"]]
        other = fleet["workers"][[h for h in HOSTS if h != rec["host"]][0]]
        assert [w["url"] for w in rec["gateway_at_stop"]] == [other], rec       # drained; the other one is in
        assert rec["gateway_at_stop"][0]["is_healthy"], rec
        assert res["first_ts"] < rec["stop_ts"] and rec["up_ts"] < res["last_ts"], (rec, res)   # inside the load
        during = load.during(rec["stop_ts"], rec["up_ts"])
        assert all(r[2] and r[3] != rec["host"] for r in during), during
        sent_to_it = [f for f in failures if f[1] == url and int(rec["stop_ts"]) <= f[0] <= int(rec["up_ts"]) + 1]
        assert not sent_to_it, (rec, sent_to_it)
        rec["requests_during_restart"] = len(during)
    return len(failures)


def _restarts(fleet, since):
    path = fleet["run"] / "restarts.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [r for r in recs if r["stop_ts"] >= since]


# every host checks its own worker's /health; the hosts in test_broken_hosts get the injected failure first
CHECKS = ("{{ ([%s] if inventory_hostname in test_broken_hosts else []) + [test_ctl + ['probe', inventory_hostname]] }}"
          % json.dumps(INJECTED))


def test_rollout_yml_drains_through_the_real_gateway(fleet):
    client, workers, figures = fleet["client"], fleet["workers"], {}

    # ---- rollout 1: both workers, one at a time (the default serial [1, '25%', '100%'] makes two batches of one)
    begin = time.time()
    load = Load(client.base_url, count=450, rate=5.0).start()
    proc, out, took = _rollout(fleet, {"sglang_rollout_health_checks": CHECKS})
    rollout_end = time.time()
    load.release()
    res = load.join(timeout=120)
    restarts = _restarts(fleet, begin)
    figures["rollout_1"] = {"playbook_s": took, "load": res, "restarts": restarts}
    print("rollout 1: playbook %ss rc=%s; load %s" % (took, proc.returncode, json.dumps(res)))
    assert proc.returncode == 0, out
    assert _hosts_in_task(out, "blackwell.sglang.sglang_gateway : Take the worker out of every gateway") == list(HOSTS), out
    assert [r["host"] for r in restarts] == list(HOSTS), (restarts, out)          # each restarted once, in order
    figures["rollout_1"]["smg_send_failures_retried"] = _check_restarts(fleet, load, res, restarts)
    assert restarts[0]["up_ts"] < restarts[1]["stop_ts"]
    assert rollout_end < res["last_ts"], "the load ended before the rollout did"
    assert res["failed"] == 0 and res["ok"] == res["requests"], res
    assert set(res["served_by"]) == set(HOSTS), res
    listed = client.workers()
    assert all(_gateway.is_routable(_gateway.find_worker(listed, url)) for url in workers.values()), listed
    assert KEY not in out

    # ---- rollout 2: worker-2's new release fails its health check, and it cannot come back healthy
    begin = time.time()
    load = Load(client.base_url, count=450, rate=5.0).start()
    proc, out, took = _rollout(fleet, {"sglang_rollout_health_checks": CHECKS, "test_broken_hosts": ["worker-2"]})
    rollout_end = time.time()
    load.release()
    res = load.join(timeout=120)
    restarts = _restarts(fleet, begin)
    print("rollout 2: playbook %ss rc=%s; load %s" % (took, proc.returncode, json.dumps(res)))
    assert proc.returncode != 0, out
    assert "injected health failure" in out, out
    assert "rollout stopped at worker-2 (rolled back to" in out, out
    assert _hosts_in_task(out, "Roll this host back to its previous release") == ["worker-2"], out
    # the rescue's undrain gave up on worker-2 and said why (ignored: the worker stays out), worker-1's passed
    undrain = re.split(r"TASK \[(?:[\w.]+ : )?Put the worker back into every gateway and wait until it is healthy there\]", out)
    assert any("failed: [worker-2" in part.split("TASK [")[0] and "...ignoring" in part.split("TASK [")[0]
               for part in undrain[1:]), out
    # worker-1 restarted once, worker-2 twice (new release, then the release rolled back to), each one after a drain
    assert [r["host"] for r in restarts] == ["worker-1", "worker-2", "worker-2"], restarts
    # worker-2 is out of the gateway at both of its restarts (drained in the block; the rescue did not put it back)
    retried = _check_restarts(fleet, load, res, restarts)
    assert rollout_end < res["last_ts"], "the load ended before the rollout did"
    assert res["failed"] == 0 and res["ok"] == res["requests"], res
    listed = client.workers()
    assert [w["url"] for w in listed] == [workers["worker-1"]], listed                # smg's GET /workers
    assert _gateway.is_routable(listed[0]), listed
    after = Load(client.base_url, count=20, rate=20.0).start().join(timeout=60)
    assert after["failed"] == 0 and after["served_by"] == {"worker-1": 20}, after
    figures["rollout_2"] = {"playbook_s": took, "load": res, "restarts": restarts, "gateway_workers_after": listed,
                            "requests_after": after, "smg_send_failures_retried": retried}
    print("rollout 2: GET /workers after: %s; 20 requests after: %s" % ([w["url"] for w in listed], after["served_by"]))
    for name in ("rollout_1", "rollout_2"):
        print("%s: smg send failures (retried by smg, cumulative): %s" % (name, figures[name]["smg_send_failures_retried"]))
        print("%s restarts: %s" % (name, [(r["host"], round(r["up_ts"] - r["stop_ts"], 2), r.get("requests_during_restart"))
                                          for r in figures[name]["restarts"]]))
    (fleet["tmp"] / "figures.json").write_text(json.dumps(figures, indent=1))
