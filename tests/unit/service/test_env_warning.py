"""Field report N01 as the service role warns about it (roles/sglang_service/tasks/validate.yml, the task as it is):
on compute capability 12.x a unit environment without TRITON_PTXAS_PATH lets Triton run its bundled ptxas, which
may not know sm_12Xa; preflight computes the variable (tests/unit/field_reports/test_preflight_kinds.py)."""

import ansible_run

TASK = "Warn about the service environment (TRITON_PTXAS_PATH on compute capability 12.x, N01)"
CASES = {  # name: (compute capability, sglang_service_nccl_env, sglang_service_extra_env, warns)
    "sm121_without": ("12.1", {"NCCL_P2P_DISABLE": "1"}, {}, True),
    "sm120_from_preflight": ("12.0", {"TRITON_PTXAS_PATH": "/usr/local/cuda/bin/ptxas"}, {}, False),
    "sm120_extra_env": ("12.0", {}, {"TRITON_PTXAS_PATH": "/opt/cuda/bin/ptxas"}, False),
    "hopper": ("9.0", {}, {}, False),
    "unknown": ("", {}, {}, False),
}


def test_triton_ptxas_warning_only_on_12x_without_the_variable(tmp_path):
    tasks = []
    for case, (cc, nccl_env, extra_env, _warns) in CASES.items():
        task = ansible_run.role_task("sglang_service", "validate.yml", TASK)
        task["name"] = "case " + case
        # the task's own vars (the rendered environment) stay; the case sets what the role's defaults would
        task["vars"] = dict(task.get("vars") or {}, sglang_service_compute_capability=cc,
                            sglang_service_nccl_env=nccl_env, sglang_service_extra_env=extra_env,
                            sglang_stack_service_env={}, sglang_service_model_env={})
        tasks.append(task)
    res = ansible_run.play(tmp_path, tasks)
    assert res.ok, res
    for case, (cc, _nccl, _extra, warns) in CASES.items():
        out = res.stdout.split("TASK [case %s]" % case, 1)[1].split("TASK [", 1)[0]
        if warns:
            assert "TRITON_PTXAS_PATH is not set for compute capability %s" % cc in out, out
            assert "sm_%sa (N01)" % cc.replace(".", "") in out, out
        else:
            assert "skipping: [localhost]" in out and "TRITON_PTXAS_PATH is not set" not in out, out
