"""Field report N01 as the service role warns about it (the sglang_server_args module's plan, which the role's check
runs): on compute capability 12.x a unit environment without TRITON_PTXAS_PATH lets Triton run its bundled ptxas,
which may not know sm_12Xa; preflight computes the variable (tests/unit/field_reports/test_preflight_kinds.py)."""

import ansible_run

CASES = {  # name: (compute capability, sglang_service_nccl_env, sglang_service_extra_env, warns)
    "sm121_without": ("12.1", {"NCCL_P2P_DISABLE": "1"}, {}, True),
    "sm120_from_preflight": ("12.0", {"TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas"}, {}, False),
    "sm120_extra_env": ("12.0", {}, {"TRITON_PTXAS_PATH": "/opt/cuda/bin/ptxas"}, False),
    "hopper": ("9.0", {}, {}, False),
    "unknown": ("", {}, {}, False),
}


def test_triton_ptxas_warning_only_on_12x_without_the_variable(tmp_path):
    for case, (cc, nccl_env, extra_env, warns) in CASES.items():
        result = ansible_run.module_file("sglang_server_args", {
            "python": str(tmp_path / "no-venv" / "python"), "compute_capability": cc, "_ansible_check_mode": True,
            "settings": {"model_path": "/srv/models/m", "kv_cache_dtype": "bf16"},
            "fp4_backends": {"fp4_gemm_backend": "flashinfer_cutlass", "moe_runner_backend": "flashinfer_cutlass"},
            "env": nccl_env, "extra_env": extra_env}, tmp_path)
        assert not result.get("failed"), (case, result)
        assert result["validation"] == "skipped", result   # check mode without a venv: the plan only
        texts = [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings", [])]
        found = [w for w in texts if "TRITON_PTXAS_PATH is not set" in w]
        if warns:
            assert found and "compute capability %s" % cc in found[0] and "sm_%sa (N01)" % cc.replace(".", "") in found[0]
        else:
            assert not found, (case, found)
