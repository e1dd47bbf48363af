"""What the monitoring scenario promises, read from the running Prometheus in the container: every target up, the
collection's own metrics with the values of the release manifest sglang_release wrote, the stand-in worker's SGLang
metrics, the nvidia-smi collector's GPU metrics (after the GPU policy set the power limit), the alert rules loaded.

The last test exports the dashboard panels' data (range queries of the last minutes) to
.cache/monitoring/dashboard-data.json for tests/sandbox/render_dashboard.py (the PNG in docs/operations.md)."""

import json
import time
import urllib.parse

PROM = "http://127.0.0.1:9090"


def _get(host, path, params=None):
    url = PROM + path + ("?" + urllib.parse.urlencode(params) if params else "")
    out = host.run("curl -sf --max-time 20 %s", url)
    assert out.rc == 0, (url, out.stderr)
    return json.loads(out.stdout)


def _query(host, expr):
    return _get(host, "/api/v1/query", {"query": expr})["data"]["result"]


def _wait(host, expr, check, timeout=120):
    result = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        result = _query(host, expr)
        if check(result):
            return result
        time.sleep(3)
    raise AssertionError("%s: %r" % (expr, result))


def test_services_run(host):
    for unit in ("prometheus-node-exporter", "prometheus", "prometheus-blackbox-exporter", "sglang"):
        assert host.service(unit).is_running, unit
    for timer in ("blackwell-sglang-facts.timer", "blackwell-sglang-gpu-metrics.timer"):
        assert host.service(timer).is_enabled, timer


def test_every_target_is_up(host):
    deadline = time.time() + 120
    while True:
        active = _get(host, "/api/v1/targets")["data"]["activeTargets"]
        jobs = {(t["labels"]["job"], t["health"]) for t in active}
        if all(t["health"] == "up" for t in active) and {j for j, _job in jobs} >= {"node", "sglang", "sglang_readiness"}:
            break
        assert time.time() < deadline, [(t["labels"]["job"], t["health"], t.get("lastError")) for t in active]
        time.sleep(3)
    # our configuration owns the job list: one node target per exporter, with the host label (Debian's example
    # prometheus.yml, never run, would add localhost:9100 without it)
    node = [(t["labels"]["instance"], t["labels"].get("host")) for t in active if t["labels"]["job"] == "node"]
    assert node == [("127.0.0.1:9100", "bw-monitoring-1")], node
    assert all("host" in t["labels"] for t in active if t["labels"]["job"] != "prometheus"), active
    assert _wait(host, 'probe_success{job="sglang_readiness"}', lambda r: r and r[0]["value"][1] == "1")


def test_release_facts_have_the_manifest_values(host):
    manifest = json.loads(host.file("/opt/sglang/current/manifest.json").content_string)
    info = _wait(host, "blackwell_sglang_release_info", lambda r: len(r) == 1)[0]["metric"]
    assert info["release_id"] == manifest["release"]["id"] == host.file("/opt/sglang/current").linked_to.split("/")[-1]
    assert info["stack"] == "original_20260307"
    assert info["kernel_build_key"] == "5b1f0c2e9a77"
    assert info["kv_cache_dtype"] == "bf16"
    assert info["model_revision"] == "0123abcd9876"
    assert info["sglang_commit"] == "d28f35240a28de1e09967975e258b3dd7e74924f"
    passes = {r["metric"]["backend"]: r["value"][1] for r in _query(host, "blackwell_sglang_fp4_probe_pass")}
    assert passes == {"flashinfer_cudnn": "1", "flashinfer_cutlass": "1", "flashinfer_trtllm": "0"}
    converge = float(_query(host, "blackwell_sglang_last_converge_timestamp_seconds")[0]["value"][1])
    assert abs(converge - host.file("/opt/sglang/current/manifest.json").mtime.timestamp()) < 1


def test_stand_in_worker_metrics_arrive(host):
    _wait(host, "sum(sglang:num_requests_total)", lambda r: r and float(r[0]["value"][1]) > 0)
    ttft = _wait(host, "sglang:time_to_first_token_seconds_count", lambda r: r and float(r[0]["value"][1]) > 0)
    assert ttft[0]["metric"]["job"] == "sglang" and ttft[0]["metric"]["host"] == "bw-monitoring-1"


def test_gpu_metrics_after_the_policy(host):
    assert _wait(host, "blackwell_sglang_gpus_visible", lambda r: r and r[0]["value"][1] == "2")
    limits = _wait(host, "blackwell_sglang_gpu_power_limit_watts", lambda r: len(r) == 2)
    assert sorted(r["value"][1] for r in limits) == ["450", "450"]       # the GPU policy's power limit, read back
    assert _query(host, "blackwell_sglang_gpu_host_health")[0]["value"][1] == "0"
    assert _query(host, 'blackwell_sglang_gpu_xid_events{xid="any"}')[0]["value"][1] == "0"


def test_rules_loaded_and_nothing_fires(host):
    groups = _get(host, "/api/v1/rules")["data"]["groups"]
    names = {r["name"] for g in groups for r in g["rules"]}
    assert {"SGLangWorkerDown", "GPUFellOffTheBus", "FP4ProbeVerdictChanged", "SGLangKVCacheUsageHigh"} <= names
    firing = [a for a in _get(host, "/api/v1/alerts")["data"]["alerts"] if a["state"] == "firing"]
    assert [a["labels"]["alertname"] for a in firing if a["labels"]["alertname"] != "SGLangKVCacheUsageHigh"] == []


def test_export_dashboard_data(host, repo_root):
    """Range data of every dashboard query (last 4 minutes, 5 s step) for the PNG in docs/operations.md."""
    with open(repo_root / "roles" / "sglang_prometheus" / "files" / "blackwell-sglang-dashboard.json") as handle:
        dash = json.load(handle)
    end = time.time()
    out = {"end": end, "panels": []}
    for panel in dash["panels"]:
        entry = {"title": panel["title"], "targets": []}
        for target in panel["targets"]:
            data = _get(host, "/api/v1/query_range", {"query": target["expr"], "start": end - 240, "end": end,
                                                      "step": 5})["data"]["result"]
            entry["targets"].append({"expr": target["expr"], "legend": target.get("legendFormat", ""), "result": data})
        out["panels"].append(entry)
    dest = repo_root / ".cache" / "monitoring"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "dashboard-data.json").write_text(json.dumps(out))
    with_data = [p["title"] for p in out["panels"] if any(t["result"] for t in p["targets"])]
    assert len(with_data) == len(out["panels"]), set(p["title"] for p in out["panels"]) - set(with_data)
