"""Bytes that are not UTF-8, through the modules as Ansible runs them (and, where the result carries text, through
ansible-playbook: the controller refuses a module result that is not UTF-8).

The rule (plugins/module_utils/_fs.py): a log (journal, dmesg, nvidia-smi output, build and tool output) is read
with replacement and the module goes on to its verdict; a source or record file (sources to patch, CMake files,
JSON records, manifests) is refused with a message naming the file and the byte offset, and nothing is written.
"""

import json
import os
import shutil
import sys

import pytest

from harness import ROOT, run_module, run_play

BAD = b"\xff\xfe"
GH = os.path.join(ROOT, "tests", "fixtures", "gpu_health")


def _no_traceback(result):
    text = json.dumps(result)
    assert "Traceback" not in text and "codec can't decode" not in text, text
    return result


def _patch_helpers():
    import importlib.util
    spec = importlib.util.spec_from_file_location("sgl_kernel_patch_trees", os.path.join(
        ROOT, "tests", "unit", "sgl_kernel_patch", "conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.make_tree, mod.snapshot


def _insert(path, marker, data=BAD):
    """Put ``data`` into the file right after the first ``marker``; returns the byte offset of ``data``."""
    with open(path, "rb") as handle:
        raw = handle.read()
    at = raw.index(marker) + len(marker)
    with open(path, "wb") as handle:
        handle.write(raw[:at] + data + raw[at:])
    return at


# --- sources and records: refused, naming the file and the offset ---------------------------------------------------

@pytest.mark.parametrize("where", ["CMakeLists.txt", "python/sgl_kernel/flash_attn.py", "cmake/extra.cmake"])
def test_kernel_patch_refuses_a_source_that_is_not_utf8(tmp_path, where):
    make_tree, snapshot = _patch_helpers()
    root, kdir = make_tree(tmp_path)
    path = os.path.join(kdir, where)
    if where.startswith("cmake/"):
        os.makedirs(os.path.dirname(path))
        with open(path, "wb") as handle:
            handle.write(b"# extension\nset(X 1)\n")
    offset = _insert(path, b"\n")
    before = snapshot(root)
    result = _no_traceback(run_module("sgl_kernel_patch", {"src": root}, tmp_path))
    assert result.get("failed") is True, result
    assert path in result["msg"] and "offset %d" % offset in result["msg"] and "0xff" in result["msg"], result["msg"]
    assert snapshot(root) == before                             # nothing written


def _kernel(tmp_path, cmake):
    k = tmp_path / "k"
    (k / "python" / "sgl_kernel").mkdir(parents=True)
    (k / "CMakeLists.txt").write_bytes(cmake)
    return k


def test_kernel_sources_refuses_a_cmake_file_that_is_not_utf8(tmp_path):
    k = _kernel(tmp_path, b"cmake_minimum_required(VERSION 3.26)\n# caf" + BAD + b"\n")
    result = _no_traceback(run_module("sgl_kernel_sources", {"src": str(k)}, tmp_path))
    assert result.get("failed") is True and str(k / "CMakeLists.txt") in result["msg"], result
    assert "offset 42" in result["msg"] and "line 2, column 6" in result["msg"], result["msg"]


@pytest.mark.parametrize("record", ["manifest.json", "repo-x/.blackwell-source.json"])
def test_kernel_sources_refuses_a_cache_record_that_is_not_utf8(tmp_path, record):
    k = _kernel(tmp_path, b"include(FetchContent)\nFetchContent_Declare(repo-x GIT_REPOSITORY https://github.com/a/x "
                          b"GIT_TAG main)\n")
    cache = tmp_path / "cache"
    (cache / "repo-x").mkdir(parents=True)
    (cache / record).write_bytes(b'{"tag": "v1' + BAD + b'"}')
    result = _no_traceback(run_module("sgl_kernel_sources", {"src": str(k), "cache": str(cache)}, tmp_path))
    assert result.get("failed") is True and str(cache / record) in result["msg"], result
    assert "offset 11" in result["msg"], result["msg"]


def _bench_run(tmp_path):
    from ansible_collections.blackwell.sglang.plugins.module_utils import _bench_report
    run_id = "20261130T120000Z"
    run_dir = tmp_path / "results" / "host-a" / run_id
    run_dir.mkdir(parents=True)
    record = dict((key, 1.0) for key in _bench_report.REQUIRED_KEYS)
    record.update(max_concurrency=8, completed=8)
    (run_dir / "c8.jsonl").write_text(json.dumps(record) + "\n")
    (run_dir / "run.json").write_text(json.dumps({"levels": [{"max_concurrency": 8, "num_prompts": 8}]}))
    return run_id, run_dir


@pytest.mark.parametrize("name", ["c8.jsonl", "run.json", "manifest.json"])
def test_bench_report_refuses_a_record_that_is_not_utf8(tmp_path, name):
    run_id, run_dir = _bench_run(tmp_path)
    path = run_dir / name
    if name == "manifest.json":
        path.write_text('{"release": "r1"}')
    _insert(str(path), b"{")
    result = _no_traceback(run_module("sglang_bench_report", {
        "results_dir": str(tmp_path / "results"), "run_id": run_id, "hosts": ["host-a"]}, tmp_path))
    assert result.get("failed") is True, result
    assert str(path) in result["msg"] and "offset 1" in result["msg"] and "not UTF-8" in result["msg"], result["msg"]
    assert not (tmp_path / "results" / "reports").exists()


def test_bench_report_skips_an_older_run_whose_record_is_not_utf8(tmp_path):
    """The current run is clean, the previous one is damaged: the report is written and says why it was passed
    over (only the current run must be clean)."""
    run_id, run_dir = _bench_run(tmp_path)
    old = run_dir.parent / "20261129T120000Z"
    shutil.copytree(str(run_dir), str(old))
    _insert(str(old / "c8.jsonl"), b"{")
    result = _no_traceback(run_module("sglang_bench_report", {
        "results_dir": str(tmp_path / "results"), "run_id": run_id, "hosts": ["host-a"], "plot": False}, tmp_path))
    assert not result.get("failed"), result
    report = json.loads((tmp_path / "results" / "reports" / run_id / "report.json").read_text())
    assert "not UTF-8" in json.dumps(report) and "20261129T120000Z" in json.dumps(report)


def _model(tmp_path):
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "qwen"}))
    return model


def test_checkpoint_facts_refuses_a_config_that_is_not_utf8(tmp_path):
    model = _model(tmp_path)
    _insert(str(model / "config.json"), b'"model_type": "q')
    result = _no_traceback(run_module("sglang_checkpoint_facts", {"model_path": str(model)}, tmp_path))
    assert result.get("failed") is True and str(model / "config.json") in result["msg"], result
    assert "offset 17" in result["msg"], result["msg"]


def test_checkpoint_facts_names_the_offset_in_a_safetensors_header(tmp_path):
    model = _model(tmp_path)
    header = b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "__metadata__": {"x": "' + BAD + b'"}}'
    (model / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)
    result = _no_traceback(run_module("sglang_checkpoint_facts", {"model_path": str(model)}, tmp_path))
    assert result.get("failed") is True and "model.safetensors" in result["msg"], result
    assert "offset %d" % (8 + header.index(BAD)) in result["msg"], result["msg"]


def test_model_verify_refuses_a_manifest_that_is_not_utf8(tmp_path):
    model = _model(tmp_path)
    manifest = tmp_path / "manifest.json"
    manifest.write_bytes(b'{"format": 1, "files": {"config.json' + BAD + b'": {"size": 1}}}')
    result = _no_traceback(run_module("sglang_model_verify", {
        "path": str(model), "name": "m", "revision": "0" * 40, "allowed_roots": [str(tmp_path / "models")],
        "manifest_file": str(manifest), "state_dir": str(tmp_path / "state")}, tmp_path))
    assert result.get("failed") is True and str(manifest) in result["msg"] and "offset 36" in result["msg"], result


# --- logs: replaced, and the verdict still comes ---------------------------------------------------------------------

def test_gpu_health_verdict_from_a_kernel_log_that_is_not_utf8(tmp_path):
    klog = tmp_path / "kern.log"
    with open(os.path.join(GH, "kernel", "xid79_fell_off_bus.log"), "rb") as handle:
        klog.write_bytes(b"[    1.0] garbage " + BAD + b" from a driver\n" + handle.read())
    result = _no_traceback(run_module("gpu_health", {
        "kernel_log_source": "file", "kernel_log_path": str(klog),
        "nvidia_smi": os.path.join(GH, "smi_healthy_pro6000_x2", "nvidia-smi")}, tmp_path))
    assert not result.get("failed"), result
    assert result["status"] == "unhealthy" and [x["xid"] for x in result["xids"]] == [79], result["summary"]
    assert "since" not in result.get("msg", "")


def _bytes_wrapper(tmp_path, name, real, old, new):
    """An executable ``name`` that runs ``real`` and replaces ``old`` by ``new`` (bytes) in its output."""
    exe = tmp_path / "bin" / name
    exe.parent.mkdir(exist_ok=True)
    exe.write_text("#!%s\nimport subprocess, sys\nout = subprocess.run([%r] + sys.argv[1:], capture_output=True)\n"
                   "sys.stdout.buffer.write(out.stdout.replace(%r, %r))\nsys.exit(out.returncode)\n"
                   % (sys.executable, real, old, new))
    exe.chmod(0o755)
    return str(exe)


def test_gpu_health_verdict_when_nvidia_smi_and_journal_print_bytes_that_are_not_utf8(tmp_path):
    scenario = tmp_path / "smi"
    shutil.copytree(os.path.join(GH, "smi_healthy_pro6000_x2"), str(scenario))     # the double reads its own dir
    smi = _bytes_wrapper(tmp_path, "nvidia-smi", str(scenario / "nvidia-smi"), b"Workstation", b"Work\xffstation")
    log = tmp_path / "journal.txt"
    with open(os.path.join(GH, "kernel", "xid79_fell_off_bus.log"), "rb") as handle:
        log.write_bytes(BAD + b"\n" + handle.read())
    journalctl = tmp_path / "bin" / "journalctl"
    journalctl.write_text("#!/bin/sh\ncat %s\n" % log)
    journalctl.chmod(0o755)
    result = _no_traceback(run_module("gpu_health", {"kernel_log_source": "journal", "nvidia_smi": smi}, tmp_path,
                                      env={"PATH": "%s:%s" % (tmp_path / "bin", os.environ["PATH"])}))
    assert not result.get("failed"), result
    assert [x["xid"] for x in result["xids"]] == [79] and result["gpu_count"] == 2, result
    assert any("\ufffd" in (g.get("name") or "") for g in result["gpus"]), result["gpus"]


def test_readiness_journal_that_is_not_utf8_reaches_the_controller(tmp_path):
    """Through ansible-playbook: a journal line with bytes that are not UTF-8 is replaced in the module, so the
    controller accepts the result (it refuses one that is not UTF-8) and the cause is still classified."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    journal = bindir / "journal.txt"
    journal.write_bytes(b"model said \xff\xfe\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
                        b"-- cursor: s=1\n")
    (bindir / "journalctl").write_text("#!/bin/sh\ncat %s\n" % journal)
    (bindir / "systemctl").write_text("#!/bin/sh\nfor a; do case $a in --property=ActiveState) echo ActiveState=failed;;"
                                      " --property=SubState) echo SubState=failed;; esac; done\n")
    for name in ("journalctl", "systemctl"):
        (bindir / name).chmod(0o755)
    task = {"name": "wait", "blackwell.sglang.sglang_readiness": {
        "unit": "sglang.service", "url": "http://127.0.0.1:9/health", "interval": 0.1, "stall_timeout": 1,
        "max_wait": 5, "start_grace": 0, "kernel_log": False}, "register": "ready", "ignore_errors": True}
    show = {"name": "show", "ansible.builtin.debug": {"msg": "CAUSE={{ ready.cause.cause }} LINES={{ ready.last_lines | length }}"}}
    # the readiness wait is not read-only for the suite's block_changes callback: load no test callback here
    (tmp_path / "no-callbacks").mkdir()
    run = run_play(tmp_path, [task, show], check=False, env={
        "PATH": "%s:%s" % (bindir, os.environ["PATH"]), "ANSIBLE_CALLBACK_PLUGINS": str(tmp_path / "no-callbacks")})
    assert run.rc == 0, run
    assert "Refusing to deserialize" not in run.out and "CAUSE=illegal_memory_access" in run.out, run


def test_gpu_facts_kernel_log_that_is_not_utf8_reaches_the_controller(tmp_path):
    """gpu_facts reads journalctl -k when nvidia-smi fails; a kernel log with bytes that are not UTF-8 still gives
    facts the controller accepts."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate "
                                       "with the NVIDIA driver.'\nexit 9\n")
    (bindir / "journal.txt").write_bytes(b"\xff\xfe\nNVRM: Xid (PCI:0000:01:00): 79, pid=1, name=python3, GPU has "
                                         b"fallen off the bus.\n")
    (bindir / "journalctl").write_text("#!/bin/sh\ncat %s\n" % (bindir / "journal.txt"))
    for name in ("journalctl", "nvidia-smi"):
        (bindir / name).chmod(0o755)
    task = {"name": "facts", "blackwell.sglang.gpu_facts": {"nvidia_smi": str(bindir / "nvidia-smi"), "topology": False,
                                                            "pcie": False, "probe_timeout": 10},
            "register": "facts"}
    show = {"name": "show", "ansible.builtin.debug": {"msg": "FACTS={{ facts.error | default('') }}"}}
    run = run_play(tmp_path, [task, show], check=False, env={"PATH": "%s:%s" % (bindir, os.environ["PATH"])})
    assert run.rc == 0, run
    assert "Refusing to deserialize" not in run.out and "FACTS=" in run.out, run


def test_venv_stamp_that_is_not_utf8_is_no_stamp(tmp_path):
    """A stamp only saves work: one that is not UTF-8 is a miss (never trusted) and is written again."""
    stamp = tmp_path / "stamp.json"
    stamp.write_bytes(b'{"format": 1, "inputs": "\xff"}')
    check = _no_traceback(run_module("venv_stamp", {"path": str(stamp), "inputs": {"a": 1}}, tmp_path))
    assert check.get("failed") is not True and check["matched"] is False, check
    record = _no_traceback(run_module("venv_stamp", {"path": str(stamp), "inputs": {"a": 1}, "state": "record"},
                                      tmp_path))
    assert record.get("failed") is not True and record["written"] is True, record
    assert json.loads(stamp.read_text())["inputs"]
