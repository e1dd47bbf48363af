"""The monitoring configuration: Prometheus config and alert rules rendered by Ansible from roles/sglang_prometheus
and checked with promtool (check config, check rules, test rules); the Grafana dashboard's queries against what
is really exported (the SGLang stand-in's /metrics, the collection's textfile writer); the stand-in's SGLang names
against SGLang's own collector; the textfile writer's values from a release manifest."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request

import pytest
import yaml

import ansible_run
from conftest import FIXTURES, ROOT

PROMTOOL = shutil.which("promtool")
ROLE = os.path.join(ROOT, "roles", "sglang_prometheus")
WRITER = os.path.join(ROOT, "roles", "sglang_monitoring", "files", "blackwell_sglang_textfile.py")
FAKE = os.path.join(FIXTURES, "benchmark", "e2e", "fake_sglang_server.py")
GH = os.path.join(FIXTURES, "gpu_health")
UPSTREAM = "/work/shared/upstream/sglang-2026-03-07-d28f35240a.tar.gz"
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus; "
                                                             "tests/sandbox/setup-host.sh installs it)")

TARGETS = {
    "sglang_prometheus_node_targets": [{"host": "gpu-a", "address": "10.0.0.11:9100"}, {"host": "gpu-b", "address": "10.0.0.12:9100"}],
    "sglang_prometheus_sglang_targets": [{"host": "gpu-a", "address": "10.0.0.11:30000"}, {"host": "gpu-b", "address": "10.0.0.12:30000"}],
    "sglang_prometheus_gateway_targets": [{"host": "gw-1", "address": "10.0.0.2:29000"}],
    "sglang_prometheus_dcgm_targets": [],
}


def _render(tmp_path, extra=None):
    """Render prometheus.yml and the rules with Ansible's own templating (role defaults + TARGETS)."""
    out = tmp_path / "etc"
    (out / "rules").mkdir(parents=True)
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_vars": {"file": os.path.join(ROLE, "defaults", "main.yml")}},
        {"ansible.builtin.copy": {"dest": str(out / "prometheus.yml"), "mode": "0644",
                                  "content": "{{ lookup('ansible.builtin.template', '%s/templates/prometheus.yml.j2') }}" % ROLE}},
        {"ansible.builtin.copy": {"dest": str(out / "rules" / "blackwell-sglang.rules.yml"), "mode": "0644",
                                  "content": "{{ lookup('ansible.builtin.template', '%s/templates/blackwell-sglang.rules.yml.j2') }}" % ROLE}},
    ]}]
    (tmp_path / "render.yml").write_text(yaml.safe_dump(play))
    # no ansible.cfg: the collection's callbacks and settings are not what the templates are checked with
    proc = ansible_run.playbook(tmp_path / "render.yml", tmp_path, extra_vars=dict(TARGETS, **(extra or {})), timeout=180,
                                env={"ANSIBLE_CONFIG": str(tmp_path / "none.cfg"), "ANSIBLE_LOCALHOST_WARNING": "0"})
    assert proc.returncode == 0, proc
    return out


def _promtool(*args):
    return subprocess.run([PROMTOOL] + list(args), capture_output=True, text=True, timeout=60, check=False)


@needs_promtool
def test_promtool_checks_the_rendered_config_and_rules(tmp_path):
    out = _render(tmp_path)
    rules = _promtool("check", "rules", str(out / "rules" / "blackwell-sglang.rules.yml"))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS" in rules.stdout
    config = _promtool("check", "config", str(out / "prometheus.yml"))
    assert config.returncode == 0, config.stdout + config.stderr
    cfg = yaml.safe_load((out / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {"prometheus", "node", "sglang", "sglang_gateway", "dcgm", "sglang_readiness"}
    assert [sc["targets"] for sc in jobs["sglang"]["static_configs"]] == [["10.0.0.11:30000"], ["10.0.0.12:30000"]]
    assert jobs["sglang_gateway"]["static_configs"][0] == {"targets": ["10.0.0.2:29000"], "labels": {"host": "gw-1"}}
    assert jobs["sglang_readiness"]["static_configs"][0]["targets"] == ["http://10.0.0.11:30000/health"]
    names = [r["alert"] for g in yaml.safe_load((out / "rules" / "blackwell-sglang.rules.yml").read_text())["groups"]
             for r in g["rules"]]
    for alert in ("SGLangWorkerDown", "SGLangReadinessLost", "GPUXidSeen", "GPUFellOffTheBus", "GPUECCErrors",
                  "SGLangTTFTHigh", "SGLangQueueTimeHigh", "SGLangKVCacheUsageHigh", "FP4ProbeVerdictChanged"):
        assert alert in names


@needs_promtool
def test_no_targets_and_no_blackbox_is_still_valid(tmp_path):
    out = _render(tmp_path, {"sglang_prometheus_sglang_targets": [], "sglang_prometheus_gateway_targets": [],
                             "sglang_prometheus_blackbox": False})
    config = _promtool("check", "config", str(out / "prometheus.yml"))
    assert config.returncode == 0, config.stdout + config.stderr
    assert "sglang_readiness" not in (out / "prometheus.yml").read_text()


@needs_promtool
def test_alerts_fire_on_recorded_series(tmp_path):
    """promtool test rules: the alerts fire (and only then) on series shaped like the exporters' output."""
    out = _render(tmp_path, {"sglang_prometheus_alert_kv_cache_usage": 0.9, "sglang_prometheus_alert_for": "2m"})
    host = 'host="gpu-a"'
    tests = {"rule_files": [str(out / "rules" / "blackwell-sglang.rules.yml")], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            {"series": 'blackwell_sglang_gpu_xid_events{%s,xid="79",bus_id="0000:41:00.0"}' % host, "values": "0 0 1 1 1"},
            {"series": 'blackwell_sglang_gpu_fell_off_bus{%s}' % host, "values": "0 0 1 1 1"},
            {"series": 'blackwell_sglang_fp4_probe_pass{%s,backend="cudnn"}' % host, "values": "1 1 1 0 0"},
            {"series": 'sglang:token_usage{%s,model_name="m"}' % host, "values": "0.5 0.95 0.96 0.97 0.97"},
            {"series": 'up{job="sglang",%s}' % host, "values": "1 1 1 1 1"},
        ],
        "alert_rule_test": [
            {"eval_time": "1m", "alertname": "GPUFellOffTheBus", "exp_alerts": []},
            {"eval_time": "3m", "alertname": "GPUFellOffTheBus", "exp_alerts": [
                {"exp_labels": {"severity": "critical", "host": "gpu-a"},
                 "exp_annotations": {"summary": "a GPU on gpu-a fell off the bus (Xid 79)",
                                     "remedy": "drain the host, then reboot or power-cycle it; check PCIe seating and power if it recurs (N03)"}}]},
            {"eval_time": "3m", "alertname": "GPUXidSeen", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "host": "gpu-a", "xid": "79", "bus_id": "0000:41:00.0"},
                 "exp_annotations": {"summary": "Xid 79 on gpu-a GPU 0000:41:00.0 this boot (1 line(s))",
                                     "remedy": "ansible-playbook playbooks/health.yml names the remedy "
                                               "(Xid 79/119/154/8: reboot; 48/64/95: drain and replace)"}}]},
            {"eval_time": "2m", "alertname": "FP4ProbeVerdictChanged", "exp_alerts": []},
            {"eval_time": "4m", "alertname": "FP4ProbeVerdictChanged", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "host": "gpu-a", "backend": "cudnn"},
                 "exp_annotations": {"summary": "FP4 probe verdict of backend cudnn on gpu-a changed with the release",
                                     "remedy": "compare the manifests (playbooks/audit.yml); the recommended backends may have changed"}}]},
            {"eval_time": "2m", "alertname": "SGLangKVCacheUsageHigh", "exp_alerts": []},
            {"eval_time": "4m", "alertname": "SGLangKVCacheUsageHigh", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "host": "gpu-a"},
                 "exp_annotations": {"summary": "KV cache on gpu-a is 97% full (threshold 0.9)",
                                     "remedy": "requests queue and get retracted: add workers, lower max running requests or the context length"}}]},
            {"eval_time": "4m", "alertname": "SGLangWorkerDown", "exp_alerts": []},
        ]}]}
    (tmp_path / "rules_test.yml").write_text(yaml.safe_dump(tests))
    proc = _promtool("test", "rules", str(tmp_path / "rules_test.yml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- what is really exported ----------------------------------------------------------------------------------

def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape_fake():
    """Start the stand-in on 127.0.0.1 (stopped at the end, killed after 60 s anyway), send a few requests, scrape."""
    port = _free_port()
    proc = subprocess.Popen(["timeout", "60", sys.executable, FAKE, "--port", str(port), "--max-running", "2",
                             "--step-ms", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = "http://127.0.0.1:%d" % port
        for _i in range(50):
            try:
                urllib.request.urlopen(base + "/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        for _i in range(3):
            req = urllib.request.Request(base + "/generate", data=json.dumps(
                {"text": "a b c d", "sampling_params": {"max_new_tokens": 8}}).encode(), method="POST")
            urllib.request.urlopen(req, timeout=10).read()
        return urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _exposition_names(text):
    return set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )", text, re.M))


def _textfile_outputs(tmp_path):
    cur = tmp_path / "current"
    cur.mkdir()
    shutil.copy(os.path.join(FIXTURES, "monitoring", "manifest.json"), str(cur / "manifest.json"))
    out = tmp_path / "textfile"
    out.mkdir()
    lib = tmp_path / "lib" / "blackwell_gpu"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    for name in ("_gpu.py", "_gpu_health.py", "_journal.py"):
        shutil.copy(os.path.join(ROOT, "plugins", "module_utils", name), str(lib))
    first = subprocess.run([sys.executable, WRITER, "facts", "--current", str(cur), "--out", str(out)],
                           capture_output=True, text=True, timeout=60, check=True)
    again = subprocess.run([sys.executable, WRITER, "facts", "--current", str(cur), "--out", str(out)],
                           capture_output=True, text=True, timeout=60, check=True)
    subprocess.run([sys.executable, WRITER, "gpu", "--lib", str(lib.parent), "--out", str(out), "--expected", "2",
                    "--nvidia-smi", os.path.join(GH, "smi_one_gone_pro6000_x2", "nvidia-smi"),
                    "--kernel-log", os.path.join(GH, "kernel", "xid79_fell_off_bus.log")],
                   capture_output=True, text=True, timeout=60, check=True)
    return (first.stdout.strip(), again.stdout.strip(), (out / "blackwell_sglang.prom").read_text(),
            (out / "blackwell_sglang_gpu.prom").read_text())


def _real_sglang_names():
    names = {}
    with open(os.path.join(FIXTURES, "monitoring", "sglang_metric_names.txt")) as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                name, kind = line.split()
                names[name] = kind
    return names


def test_stand_in_exports_only_real_sglang_names():
    real = _real_sglang_names()
    text = _scrape_fake()
    exported = _exposition_names(text)
    assert exported, text
    for name in exported:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in real or (base in real and real[base] == "histogram"), name
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    for name, kind in declared.items():
        assert real[name] == kind, (name, kind, real[name])
    assert "sglang:time_to_first_token_seconds_bucket" in exported and "sglang:num_queue_reqs" in exported


@pytest.mark.skipif(not os.path.exists(UPSTREAM), reason="SGLang source bundle not on this machine")
def test_recorded_names_equal_sglangs_own_collector():
    with tarfile.open(UPSTREAM) as tar:
        member = tar.getmember("sglang/python/sglang/srt/observability/metrics_collector.py")
        src = tar.extractfile(member).read().decode()
    assert set(re.findall(r'name="(sglang:[A-Za-z0-9_]+)"', src)) == set(_real_sglang_names())


def test_textfile_facts_from_the_manifest(tmp_path):
    first, again, facts, gpu = _textfile_outputs(tmp_path)
    assert (first, again) == ("changed", "unchanged")           # the converge step is idempotent
    assert 'release_id="3f9c0a1b2d4e"' in facts and 'stack="original_20260307"' in facts
    assert 'kernel_build_key="5b1f0c2e9a77"' in facts and 'kv_cache_dtype="bf16"' in facts
    assert 'model_revision="0123abcd9876"' in facts
    assert 'blackwell_sglang_fp4_probe_pass{backend="cudnn"} 1' in facts
    assert 'blackwell_sglang_fp4_probe_pass{backend="trtllm"} 0' in facts
    assert 'blackwell_sglang_fp4_probe_verdict{backend="trtllm",verdict="unsupported"} 1' in facts
    assert re.search(r"^blackwell_sglang_last_converge_timestamp_seconds \d+", facts, re.M)
    assert 'blackwell_sglang_gpu_xid_events{xid="79",bus_id="0000:41:00.0"} 1' in gpu
    assert "blackwell_sglang_gpus_visible 1" in gpu and "blackwell_sglang_gpus_expected 2" in gpu
    assert "blackwell_sglang_gpu_host_health 2" in gpu and "blackwell_sglang_gpu_fell_off_bus 1" in gpu
    assert re.search(r'^blackwell_sglang_gpu_memory_used_bytes\{gpu="0",bus_id="0000:c1:00.0",[^}]*\} 95665782784', gpu, re.M)
    if PROMTOOL:
        for text in (facts, gpu):
            lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30,
                                  check=False)
            assert lint.returncode == 0, lint.stdout + lint.stderr


_PROMQL_WORDS = {"sum", "max", "min", "avg", "by", "without", "rate", "irate", "increase", "histogram_quantile", "le",
                 "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "time", "changes", "delta",
                 "max_over_time", "min_over_time", "avg_over_time", "count", "abs", "offset", "bool", "topk"}


def _query_metrics(expr):
    expr = re.sub(r"\{[^}]*\}", "", expr)                  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                 # ranges
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)
    expr = re.sub(r'"[^"]*"', "", expr)
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    return {w for w in words if w not in _PROMQL_WORDS and not re.match(r"^\d", w)}


def test_every_dashboard_query_uses_exported_metrics(tmp_path):
    with open(os.path.join(ROOT, "roles", "sglang_prometheus", "files", "blackwell-sglang-dashboard.json")) as handle:
        dash = json.load(handle)
    _node, _smi, facts, gpu = _textfile_outputs(tmp_path)
    exported = _exposition_names(_scrape_fake()) | _exposition_names(facts) | _exposition_names(gpu)
    exported |= {"up", "probe_success"}                     # Prometheus' own, the blackbox exporter's
    titles = set()
    for panel in dash["panels"]:
        titles.add(panel["title"])
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = _query_metrics(target["expr"])
            assert used, (panel["title"], target["expr"])
            missing = used - exported
            assert not missing, (panel["title"], target["expr"], missing)
    for want in ("TTFT", "Inter-token", "Running / queued", "KV-cache", "GPU memory", "GPU power", "GPU temperature",
                 "Xid", "throughput"):
        assert any(want in t for t in titles), want
