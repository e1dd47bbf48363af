"""blackwell.sglang.torch_verify (torch_nightly's verification) on probe outputs: every problem named at once, the
venv that does not exist yet in check mode, and the probe run with the venv's interpreter."""

import pathlib
import sys

import ansible_run

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROBE = (ROOT / "roles" / "torch_nightly" / "files" / "torch_probe.py").read_text()
PIN = "2.12.0.dev20260307+cu130"
GOOD = {"version": PIN, "cuda": "13.0", "arch_list": ["sm_90", "sm_100", "sm_120"], "cuda_available": True,
        "device_caps": ["12.0"], "extras": {"torchvision": "0.27.0.dev20260307+cu130"}, "import_error": None}


def verify(tmp_path, probe, **args):
    base = {"python": "/opt/sglang/venv/bin/python", "probe": PROBE, "version": PIN, "cuda": "13.0",
            "extras": {"torchvision": "0.27.0.dev20260307+cu130"}, "nvcc_version": "13.0.88", "cached": probe}
    base.update(args)
    return ansible_run.module_file("torch_verify", base, tmp_path)


def test_a_matching_probe_passes_and_names_the_build(tmp_path):
    result = verify(tmp_path, GOOD)
    assert not result.get("failed"), result
    assert result["from_cache"] and result["installed"]["venv"] == "/opt/sglang/venv"
    assert result["installed"]["arch_list"] == GOOD["arch_list"]
    assert "GPU 12.0: sm_120 has SASS" in result["msg"]


def test_every_problem_is_named(tmp_path):
    probe = dict(GOOD, arch_list=["sm_80", "sm_90"], extras={"torchvision": None})
    result = verify(tmp_path, probe, nvcc_version="12.8.93", compute_caps=["12.0", "12.0"])
    assert result["failed"]
    msg = result["msg"]
    assert "torchvision is null, pinned 0.27.0.dev20260307+cu130" in msg
    assert "torch was built for CUDA 13.0 but the toolkit's nvcc is 12.8.93" in msg
    assert msg.count("cannot run on GPU 12.0") == 1 and "Use a cu128+ build" in msg


def test_another_torch_names_the_pin(tmp_path):
    result = verify(tmp_path, dict(GOOD, version="2.13.0+cpu", cuda=None), extras={})
    assert result["failed"]
    assert "/opt/sglang/venv has torch 2.13.0+cpu (torch.version.cuda=null" in result["msg"]
    assert "wanted %s with CUDA \"13.0\"" % PIN in result["msg"]


def test_no_venv_yet_is_no_failure(tmp_path):
    result = verify(tmp_path, None, python=str(tmp_path / "venv" / "bin" / "python"))
    assert not result.get("failed") and result["probed"] is False
    assert "torch is verified on the real converge" in result["msg"]


def test_the_probe_runs_with_the_interpreter(tmp_path):
    # this interpreter's torch (or none) is not the pin: the failure names what the probe found
    result = verify(tmp_path, None, python=sys.executable, extras={"no-such-dist": "1.0"})
    assert result["failed"] and result["from_cache"] is False
    assert result["probe"]["extras"] == {"no-such-dist": None}
    assert "no-such-dist is null, pinned 1.0" in result["msg"]
