"""The probe runner end to end on CPU, in real processes (fork server and one spawned child per step).

Faults are injected by the test doubles in fake_fp4_drivers.py through the runner's driver_module hook; the
runner, process isolation, timeouts, JSON protocol and verdicts are the production code.  Also: the module's
shipping path (ship_sources + execute_probe) with this venv's python, which has no GPU.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from ansible_collections.blackwell.sglang.plugins.module_utils import _fp4_probe_runner as runner

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_UTILS = os.path.join(HERE, "..", "..", "..", "plugins", "module_utils")
FAKES = ["gemm/fake_exact", "gemm/fake_slow_exact", "gemm/fake_nan", "gemm/fake_zeros_m150", "gemm/fake_garbage_row",
         "gemm/fake_unsupported", "gemm/fake_segfault", "gemm/fake_cuda_error"]


def _run(tmp_path, spec):
    for name in ("_fp4_probe_runner.py", "fp4_numerics.py", "nvfp4_reference.py"):
        shutil.copy(os.path.join(MODULE_UTILS, name), tmp_path / name)
    shutil.copy(os.path.join(HERE, "fake_fp4_drivers.py"), tmp_path / "fake_fp4_drivers.py")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, str(tmp_path / "_fp4_probe_runner.py"), "--spec", str(tmp_path / "spec.json"),
                           "--out", str(tmp_path / "out.json")], capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((tmp_path / "out.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("fork_server", [True, False], ids=["fork-server", "spawn"])
def test_faults_are_contained_and_classified(tmp_path, fork_server):
    spec = {"allow_cpu": True, "driver_module": "fake_fp4_drivers", "extra_backends": FAKES, "backends": FAKES,
            "shapes": [{"n": 128, "k": 256}], "m_list": [1, 9, 128, 150], "timeout_s": 120, "env_timeout_s": 120,
            "warmup": 1, "iters": 2, "fork_server": fork_server}
    res = _run(tmp_path, spec)
    assert res["probe"]["isolation"] == ("fork" if fork_server else "spawn")
    v = {k: b["verdict"] for k, b in res["backends"].items()}
    assert v == {
        "gemm/fake_exact": "ok", "gemm/fake_slow_exact": "ok", "gemm/fake_nan": "nan",
        "gemm/fake_zeros_m150": "zeros", "gemm/fake_garbage_row": "wrong_numerics",
        "gemm/fake_unsupported": "unsupported", "gemm/fake_segfault": "crash", "gemm/fake_cuda_error": "crash",
    }
    b = res["backends"]
    assert [c["m"] for c in b["gemm/fake_zeros_m150"]["failed_cases"]] == [150]
    assert [c["m"] for c in b["gemm/fake_nan"]["failed_cases"]] == [9, 128, 150]
    assert "row 77" in b["gemm/fake_garbage_row"]["reason"]
    assert "SIGSEGV" in b["gemm/fake_segfault"]["reason"]
    assert "illegal memory access" in b["gemm/fake_cuda_error"]["reason"]
    assert b["gemm/fake_unsupported"]["reason"].startswith("BackendSupportedError")
    ok_case = b["gemm/fake_exact"]["cases"][0]
    assert ok_case["time_us"] > 0 and ok_case["metrics"]["rel_err"] < 0.01 and ok_case["repeat_ok"]
    # every case was judged against the dequantized reference and reports cosine vs the bf16 product
    assert 0.97 < ok_case["metrics"]["cosine_vs_baseline"] < 0.9999
    rec = res["recommended"]
    # both exact fakes pass; the faster one (no sleep) wins; nothing that failed is named
    assert rec["fp4_gemm_backend"] == "fake_exact"
    assert [n for n, dummy_score in rec["ranking"]["fp4_gemm_backend"]] == ["fake_exact", "fake_slow_exact"]
    assert rec["moe_runner_backend"] is None
    assert res["reference"]["ok"] is True


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this checks the no-GPU path")
@pytest.mark.slow
@pytest.mark.parametrize("fork_server", [True, False], ids=["fork-server", "spawn"])
def test_hung_backend_is_killed_at_its_timeout(tmp_path, fork_server):
    keys = ["gemm/fake_hang", "gemm/fake_exact"]
    spec = {"allow_cpu": True, "driver_module": "fake_fp4_drivers", "extra_backends": keys, "backends": keys,
            "shapes": [{"n": 64, "k": 64}], "m_list": [1], "timeout_s": 15, "env_timeout_s": 120,
            "warmup": 0, "iters": 1, "fork_server": fork_server}
    res = _run(tmp_path, spec)
    hang = res["backends"]["gemm/fake_hang"]
    assert hang["verdict"] == "timeout" and "no result within 15 s" in hang["reason"]
    assert 14 < hang["wall_s"] < 60
    assert res["backends"]["gemm/fake_exact"]["verdict"] == "ok"  # the probe carried on after the hang
    assert res["recommended"]["fp4_gemm_backend"] == "fake_exact"


def test_probe_without_gpu_returns_reason_and_runs_cpu_reference(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    res = runner.execute_probe(sys.executable, {"env_timeout_s": 120, "timeout_s": 120}, str(workdir))
    assert res["device"]["present"] is False
    assert "torch.cuda.is_available() is False" in res["device"]["reason"]
    assert res["backends"] == {}
    assert res["recommended"]["fp4_gemm_backend"] is None and "not probed" in res["recommended"]["reasons"]["fp4_gemm_backend"]
    ref = res["reference"]
    assert ref["ok"] is True and ref["device"] == "cpu"
    assert all(c["roundtrip_exact"] and c["snr_db_a"] > 15 for c in ref["cases"])
    assert res["versions"]["torch"] and res["probe"]["runner_wall_s"] > 0
    # the shipped sources are the collection's own files
    for name in ("_fp4_probe_runner.py", "fp4_numerics.py", "nvfp4_reference.py"):
        with open(os.path.join(MODULE_UTILS, name)) as fh:
            assert (workdir / name).read_text() == fh.read()


def test_missing_interpreter_is_a_probe_error(tmp_path):
    with pytest.raises(runner.ProbeError, match="does not exist"):
        runner.execute_probe(str(tmp_path / "nope" / "python"), {}, str(tmp_path))


def test_runner_that_dies_is_a_probe_error(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho boom >&2\nexit 7\n")
    fake.chmod(0o755)
    with pytest.raises(runner.ProbeError) as err:
        runner.execute_probe(str(fake), {}, str(tmp_path))
    assert "exit status 7" in err.value.message and "boom" in err.value.output_tail


def test_json_safe_replaces_nonfinite():
    assert runner._json_safe({"a": [float("nan"), 1.0, float("inf")], "b": {"c": float("-inf")}}) == \
        {"a": [None, 1.0, None], "b": {"c": None}}
