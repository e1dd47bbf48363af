"""State of the gateway after converge, idempotence and the two rollouts of the side effect."""

import json
import shlex

import testinfra

GW = testinfra.get_host("podman://bw-gateway-gw-1")
KEY = "gateway-scenario-key-0123456789abcdef"


def _get(path, port=8000, key=KEY):
    code = ("import urllib.request; r = urllib.request.Request('http://127.0.0.1:%d%s', headers={'Authorization': "
            "'Bearer %s'}); print(urllib.request.urlopen(r, timeout=10).read().decode())" % (port, path, key))
    return GW.check_output("python3 -c %s" % shlex.quote(code))


def test_gateway_unit_active_unprivileged():
    svc = GW.service("sglang-gateway")
    assert svc.is_running and svc.is_enabled
    user = GW.check_output("systemctl show -p User --value sglang-gateway")
    assert user == "sglang-gateway"
    pid = GW.check_output("systemctl show -p MainPID --value sglang-gateway")
    assert GW.check_output("stat -c %%U /proc/%s" % pid) == "sglang-gateway"


def test_key_file_root_only_and_not_in_argv():
    f = GW.file("/etc/sglang-gateway/secrets.env")
    assert f.user == "root" and f.mode == 0o600
    pid = GW.check_output("systemctl show -p MainPID --value sglang-gateway")
    assert KEY not in GW.check_output("tr '\\0' ' ' < /proc/%s/cmdline" % pid)
    assert KEY not in GW.file("/etc/systemd/system/sglang-gateway.service").content_string


def test_pinned_smg_installed():
    assert GW.check_output("/opt/sglang-gateway/venv/bin/python -c 'import importlib.metadata as m; print(m.version(\"smg\"))'") == "1.13.0"


def test_health_and_metrics_endpoints():
    _get("/health")                                   # urlopen raises on anything but 2xx
    assert "smg_" in _get("/metrics", port=29000)


def test_gateway_routes_only_to_healthy_worker_after_failed_rollout():
    workers = json.loads(_get("/workers"))["workers"]
    assert len(workers) == 1
    assert workers[0]["is_healthy"] and workers[0]["status"] == "ready"


def test_side_effect_figures_recorded():
    data = json.loads(GW.file("/root/gateway-scenario.json").content_string)
    assert data["rollout_1_load"]["failed"] == 0 and data["rollout_1_load"]["ok"] == 2400
    assert data["rollout_2_load"]["failed"] == 0
    assert len(data["rollout_1_load"]["served_by"]) == 2
