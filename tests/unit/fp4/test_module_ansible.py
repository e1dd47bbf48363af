"""blackwell.sglang.fp4_kernel_probe through real Ansible (AnsiballZ ships the runner to the target python).

This machine has no GPU, so the module must return device.present=false with the reason, and the shipped
reference must have run on the CPU of the target interpreter.
"""

import sys

import pytest

import ansible_run

pytest.importorskip("torch")


def _adhoc(args, check=False):
    return ansible_run.module("blackwell.sglang.fp4_kernel_probe", args, check=check, timeout=300,
                              env={"ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.json"})


@pytest.mark.slow
@pytest.mark.parametrize("check", [False, True], ids=["run", "check-mode"])
def test_module_without_gpu_returns_reason(check):
    res = _adhoc({"python": sys.executable, "m_list": [1, 9]}, check=check)
    assert not res.get("failed"), res.get("msg")
    assert res["changed"] is False
    assert res["device"]["present"] is False and "torch.cuda.is_available() is False" in res["device"]["reason"]
    assert res["reference"]["ok"] is True and res["reference"]["device"] == "cpu"
    assert res["recommended"]["fp4_gemm_backend"] is None
    assert res["probe"]["cleaned_up"] is True and res["probe"]["module_wall_s"] > 0
    assert set(res["fp4_paths_present"]) >= {"flashinfer.mm_fp4", "sgl_kernel.cutlass_scaled_fp4_mm"}


@pytest.mark.slow
def test_module_fails_cleanly_for_missing_python(tmp_path):
    res = _adhoc({"python": str(tmp_path / "venv" / "bin" / "python")})
    assert res["failed"] is True and "does not exist" in res["msg"]


@pytest.mark.slow
def test_module_rejects_bad_shape():
    res = _adhoc({"python": sys.executable, "shapes": [{"n": 128, "k": 100}]})
    assert res["failed"] is True and "multiple of 32" in res["msg"]
