"""Modules and module_utils for real, on temporary trees and 127.0.0.1 servers the tests start and stop: malformed
input is a failure naming the file/parameter and the key, never a traceback; probes are bounded."""

import http.server
import json
import os
import sys
import threading

import pytest

from harness import ROOT, run_module

from ansible_collections.blackwell.sglang.plugins.module_utils import _readiness
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as tree


def _patch_helpers():
    """make_tree/snapshot of tests/unit/sgl_kernel_patch/conftest.py (fixture kernel trees)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("sgl_kernel_patch_trees", os.path.join(
        ROOT, "tests", "unit", "sgl_kernel_patch", "conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_tree, mod.snapshot


# --- checkpoint facts ---------------------------------------------------------------------------------------------

def _model(tmp_path, config=None, index=None):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen"} if config is None else config))
    if index is not None:
        (model / "model.safetensors.index.json").write_text(json.dumps(index))
    return str(model)


@pytest.mark.parametrize("config, index, needles", [
    ([1, 2], {"weight_map": {}}, ["config.json", "JSON object", "list"]),
    (None, {"weight_map": ["a.safetensors"]}, ["model.safetensors.index.json", "weight_map"]),
    (None, {"weight_map": {"w": "a.safetensors"}, "metadata": {"total_size": "lots"}},
     ["model.safetensors.index.json", "metadata.total_size", "'lots'"]),
    (None, {"weight_map": {"w": "../outside.safetensors"}}, ["weight_map", "outside the model directory", "../outside"]),
    (None, {"weight_map": {"w": "/etc/passwd"}}, ["weight_map", "outside the model directory", "/etc/passwd"]),
    (None, {"weight_map": {"w": "a.safetensors"}, "metadata": [1]}, ["metadata", "JSON object"]),
], ids=["config-list", "weight-map-list", "total-size-text", "shard-dotdot", "shard-absolute", "metadata-list"])
def test_checkpoint_facts_names_file_and_key(tmp_path, config, index, needles):
    result = run_module("sglang_checkpoint_facts", {"model_path": _model(tmp_path, config, index)}, tmp_path)
    assert result.get("failed") is True and "Traceback" not in json.dumps(result), result
    assert all(n in result["msg"] for n in needles), result["msg"]


# --- benchmark report -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("meta, needles", [
    ([1, 2, 3], ["run.json", "JSON object"]),
    ({"levels": [{"max_concurrency": "many", "num_prompts": 8}]}, ["run.json", "levels[0].max_concurrency", "'many'"]),
    ({"levels": "all"}, ["run.json", "'levels'", "must be a list"]),
    ({"failures": "none"}, ["run.json", "'failures'"]),
], ids=["run-json-list", "level-text", "levels-string", "failures-string"])
def test_bench_report_names_run_json_key(tmp_path, meta, needles):
    run_id = "20261130T120000Z"
    run_dir = tmp_path / "results" / "host-a" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps(meta))
    from ansible_collections.blackwell.sglang.plugins.module_utils import _bench_report
    record = dict((key, 1.0) for key in _bench_report.REQUIRED_KEYS)
    record.update(max_concurrency=8, completed=8)
    (run_dir / "c8.jsonl").write_text(json.dumps(record) + "\n")
    result = run_module("sglang_bench_report", {"results_dir": str(tmp_path / "results"), "run_id": run_id,
                                                "hosts": ["host-a"]}, tmp_path)
    assert result.get("failed") is True and "Traceback" not in json.dumps(result), result
    assert all(n in result["msg"] for n in needles), result["msg"]


# --- FP4 probe shapes, host facts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, needles", [
    ({"shapes": [{"n": "wide", "k": 64}]}, ["shapes[0].n", "'wide'"]),
    ({"shapes": [{"n": 128, "k": 48}]}, ["shapes[0].k", "multiple of 32"]),
    ({"shapes": [{"n": -128, "k": 64}]}, ["shapes[0].n", "> 0"]),
    ({"moe_shapes": [{"hidden": 64, "intermediate": "x", "experts": 4, "top_k": 2}]}, ["moe_shapes[0].intermediate", "'x'"]),
    ({"moe_shapes": [{"hidden": 64, "intermediate": 64, "experts": 2, "top_k": 3}]}, ["moe_shapes[0].top_k", "at most experts"]),
    ({"timeout": 0}, ["timeout must be a number > 0, got 0.0"]),
    ({"total_timeout": -1}, ["total_timeout", "> 0"]),
    ({"env_timeout": 0}, ["env_timeout", "> 0"]),
    ({"iters": 0}, ["iters must be a whole number >= 1"]),
    ({"m_list": [1, 0]}, ["m_list[1] must be a whole number >= 1"]),
    ({"device_index": -1}, ["device_index", ">= 0"]),
], ids=["shape-text", "shape-k", "shape-negative", "moe-text", "moe-top-k", "timeout-zero", "total-timeout-negative",
        "env-timeout-zero", "iters-zero", "m-zero", "device-negative"])
def test_fp4_probe_shapes(tmp_path, args, needles):
    result = run_module("fp4_kernel_probe", dict({"python": sys.executable}, **args), tmp_path)
    assert result.get("failed") is True and "Traceback" not in json.dumps(result), result
    assert all(n in result["msg"] for n in needles), result["msg"]


def test_host_facts_disk_path_number(tmp_path):
    result = run_module("host_facts", {"disk_paths": {"models": 5}}, tmp_path)
    assert result.get("failed") is True and "disk_paths.models" in result["msg"] and "5" in result["msg"], result


# --- bounded probes ---------------------------------------------------------------------------------------------------

def _hanging(tmp_path, name):
    exe = tmp_path / name
    exe.write_text("#!/bin/sh\nexec sleep 30\n")
    exe.chmod(0o755)
    return str(exe)


def test_hanging_nvidia_smi_is_a_timeout_finding(tmp_path):
    result = run_module("gpu_facts", {"nvidia_smi": _hanging(tmp_path, "nvidia-smi"), "probe_timeout": 1,
                                      "topology": False, "pcie": False}, tmp_path, timeout=30)
    assert not result.get("failed"), result
    assert result["error"] == "timeout" and "timed out after 1" in result["reason"], result
    assert result["gpu_count"] == 0


def test_hanging_torch_probe_is_bounded(tmp_path):
    result = run_module("toolchain_facts", {"python": _hanging(tmp_path, "python"), "probe_timeout": 1,
                                            "cuda_home": str(tmp_path / "nocuda")}, tmp_path, timeout=30)
    assert not result.get("failed"), result
    assert "timed out after 1" in json.dumps(result["torch"]), result["torch"]


def test_probe_timeout_must_be_positive(tmp_path):
    result = run_module("gpu_facts", {"nvidia_smi": _hanging(tmp_path, "nvidia-smi"), "probe_timeout": 0}, tmp_path)
    assert result.get("failed") is True and "probe_timeout" in result["msg"], result


# --- patch module: verify markers and block, all-or-nothing -------------------------------------------------------------

def test_half_patched_flash_attn_is_refused(tmp_path):
    make_tree, snapshot = _patch_helpers()
    root, kdir = make_tree(tmp_path)
    assert not run_module("sgl_kernel_patch", {"src": root}, tmp_path).get("failed")
    flash = os.path.join(kdir, "python", "sgl_kernel", "flash_attn.py")
    text = open(flash).read()
    begin = text.index(tree._FA3_BEGIN)
    end = text.index(tree._FA3_END)
    with open(flash, "w") as fh:           # the block is gone, the begin marker stays
        fh.write(text[:begin + len(tree._FA3_BEGIN)] + "\n" + text[end + len(tree._FA3_END):])
    before = snapshot(root)
    result = run_module("sgl_kernel_patch", {"src": root}, tmp_path)
    assert result.get("failed") is True and "half-patched" in result["msg"] and "flash_attn.py" in result["msg"], result
    assert snapshot(root) == before


def test_patch_commit_restores_on_a_failed_rename(tmp_path):
    make_tree, snapshot = _patch_helpers()
    root, _kdir = make_tree(tmp_path)
    before = snapshot(root)
    result = tree.plan(root)
    assert len([f for f in result["files"].values() if f.changed]) >= 2
    calls = []

    def flaky_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        os.replace(src, dst)

    with pytest.raises(OSError):
        tree.commit(result, _replace=flaky_replace)
    assert snapshot(root) == before           # the first file was put back; no temp files left


# --- readiness ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["http://a b/health", "ftp://127.0.0.1/health", "http://user:pw@127.0.0.1:1/health",
                                 "http://127.0.0.1:99999/health", "http://;id;/health"])
def test_readiness_url_is_validated(tmp_path, url):
    result = run_module("sglang_readiness", {"unit": "sglang.service", "url": url}, tmp_path)
    assert result.get("failed") is True and result["msg"].startswith("url ") and url in result["msg"], result


def test_flapping_health_does_not_reset_the_stall_timer():
    """A /health that alternates 200/503 for ever ends as 'stalled' after stall_timeout (fake clock), and the
    result keeps what /health answered."""
    now = [0.0]
    answers = iter([200, 503] * 10000)
    result = _readiness.wait_ready(
        http_get=lambda timeout: (next(answers), None), read_journal=lambda: [], unit_state=lambda: ("activating", "start"),
        clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s), successes=3, interval=5.0,
        stall_timeout=60.0, max_wait=100000.0)
    assert result["reason"] == "stalled" and result["elapsed"] < 200, result
    assert result["health_answers"]["200"] > 1 and result["health_answers"]["503"] > 1


class _Flapping(http.server.BaseHTTPRequestHandler):
    count = [0]

    def do_GET(self):  # noqa: N802 (http.server API)
        self.count[0] += 1
        self.send_response(200 if self.count[0] % 2 else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_readiness_module_keeps_health_answers_and_masks_the_key(tmp_path):
    """The module for real against a 127.0.0.1 server that flaps, with systemctl/journalctl test doubles on PATH
    (a unit that failed, a journal line carrying the key): the failure message says what /health answered and no
    line carries the key."""
    key = "sk-" + "z" * 37
    server = http.server.HTTPServer(("127.0.0.1", 0), _Flapping)
    server.timeout = 0.5
    stop = threading.Event()

    def serve():                         # bounded: at most 100 requests, and stops with the test
        for _i in range(100):
            if stop.is_set():
                return
            server.handle_request()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "systemctl").write_text("#!/bin/sh\nfor a; do case $a in --property=ActiveState) echo ActiveState=failed;;"
                                      " --property=SubState) echo SubState=failed;; esac; done\n")
    (bindir / "journalctl").write_text("#!/bin/sh\necho \"server_args=ServerArgs(model_path='/m', api_key='%s', port=1)\"\n"
                                       "echo \"launch with --api-key %s\"\necho '-- cursor: s=1'\n" % (key, key))
    for exe in bindir.iterdir():
        exe.chmod(0o755)
    try:
        result = run_module("sglang_readiness", {
            "unit": "sglang.service", "url": "http://127.0.0.1:%d/health" % server.server_port, "interval": 0.1,
            "stall_timeout": 1, "max_wait": 5, "start_grace": 0, "mask": [key]}, tmp_path,
            env={"PATH": "%s:%s" % (bindir, os.environ["PATH"])})
    finally:
        stop.set()
        thread.join(5)
        server.server_close()
    assert result.get("failed") is True, result
    text = json.dumps(result)
    assert key not in text and "********" in text, text
    assert "/health answered: last" in result["msg"], result["msg"]
