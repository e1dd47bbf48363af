"""sglang_service in --check against localhost, host-changing modules blocked: every bad value is refused by a
named check before the first task that could change the host."""

import pytest

from harness import run_role

KEY = "k" * 40
BASE = {"sglang_service_model_path": "/srv/models/none", "sglang_service_python": "/nonexistent/venv/bin/python",
        "sglang_service_start": "never", "sglang_service_inspect_checkpoint": False,
        "sglang_service_fp4_gemm_backend": "flashinfer_cudnn", "sglang_service_moe_runner_backend": "flashinfer_cutlass",
        "sglang_service_kv_cache_dtype": "bf16"}

CASES = [
    # (id, overrides, needles the refusal names)
    ("rw-path-newline", {"sglang_service_read_write_paths": ["/srv/x\nExecStartPre=+/bin/sh -c id"]},
     ["sglang_service_read_write_paths", "a newline"]),
    ("rw-path-dollar", {"sglang_service_read_write_paths": ["/srv/$HOME"]}, ["sglang_service_read_write_paths", "must not contain"]),
    ("ro-path-relative", {"sglang_service_read_only_paths": ["models"]}, ["sglang_service_read_only_paths", "'models'"]),
    ("extra-env-newline", {"sglang_service_extra_env": {"FOO": "a\nLD_PRELOAD=/tmp/x.so"}},
     ["sglang_service_extra_env", "a newline"]),
    ("extra-env-key", {"sglang_service_extra_env": {"BAD KEY": "1"}}, ["sglang_service_extra_env", "'BAD KEY'"]),
    ("nccl-env-key", {"sglang_service_nccl_env": {"NCCL-P2P": "1"}}, ["sglang_service_nccl_env", "'NCCL-P2P'"]),
    ("computed-env-cr", {"sglang_stack_service_env": {"NCCL_P2P_DISABLE": "1\rX=2"}},
     ["sglang_stack_service_env", "a carriage return"]),
    ("api-key-newline", {"sglang_service_api_key": KEY + "\nEVIL=1"}, ["sglang_service_api_key", "a newline"]),
    ("model-path-nul", {"sglang_service_model_path": "/srv/m\x00x"}, ["sglang_service_model_path", "NUL"]),
    ("no-proxy-newline", {"sglang_service_no_proxy": ["127.0.0.1", "localhost", "0.0.0.0", "::1", "a\nb"]},
     ["sglang_service_no_proxy", "a newline"]),
    ("host-code", {"sglang_stack_service_host": "127.0.0.1\"; import os; os.system('id'); \""},
     ["sglang_stack_service_host", "IP address or a host name"]),
    ("host-space", {"sglang_stack_service_host": "evil host"}, ["sglang_stack_service_host", "'evil host'"]),
    ("user-root", {"sglang_service_user": "root"}, ["sglang_service_user", "root"]),
    ("group-root", {"sglang_service_group": "root"}, ["sglang_service_group", "root"]),
    ("user-path", {"sglang_service_user": "../sglang"}, ["sglang_service_user", "'../sglang'"]),
    ("short-key-any", {"sglang_stack_service_host": "0.0.0.0", "sglang_service_api_key": "abc"},
     ["sglang_service_api_key has 3 characters", "0.0.0.0"]),
    ("port-zero", {"sglang_stack_service_port": 0}, ["sglang_stack_service_port", "1-65535"]),
    ("port-high", {"sglang_stack_service_port": 70000}, ["sglang_stack_service_port", "70000"]),
    ("interval-zero", {"sglang_service_readiness_interval": 0}, ["sglang_service_readiness_interval", "> 0"]),
    ("smoke-negative", {"sglang_service_smoke_timeout": -1}, ["sglang_service_smoke_timeout", "got -1"]),
    ("python-relative", {"sglang_service_python": "venv/bin/python"}, ["sglang_service_python", "absolute path"]),
    ("credential-name", {"sglang_service_api_key_credential": "../../etc/shadow"},
     ["sglang_service_api_key_credential", "single name"]),
    ("extra-args-secret-abbrev", {"sglang_service_extra_args": ["--api-k", "literal"]},
     ["--api-k (--api-key)", "world-readable"]),
    ("extra-args-admin-secret", {"sglang_service_extra_args": ["--admin-api-key=literal"]},
     ["--admin-api-key", "world-readable"]),
    ("extra-args-newline", {"sglang_service_extra_args": ["--served-model-name", "a\nExecStartPre=+/bin/id"]},
     ["sglang_service_extra_args", "a newline"]),
    ("api-key-env-gone", {"sglang_service_extra_args": ["--api-key", "${SGLANG_API_KEY}"]}, ["--api-key", "systemd credential"]),
]


BATCH = {case_id: ("sglang_service", None, dict(BASE, **overrides)) for case_id, overrides, _needles in CASES}


@pytest.mark.parametrize("case_id, overrides, needles", CASES, ids=[c[0] for c in CASES])
def test_service_refuses_before_any_change(batches, tmp_path, case_id, overrides, needles):
    run = batches.run("service_role", BATCH, case_id, lambda got: got.refused_before_change(*needles), tmp_path)
    assert run.refused_before_change(*needles), run


def test_service_good_values_reach_the_first_change(tmp_path):
    """The same play with good values gets past every check and stops only at the first host-changing task, and
    says which computed safety flag the inventory overrides."""
    run = run_role(tmp_path, "sglang_service", dict(
        BASE, sglang_stack_service_args=["--disable-custom-all-reduce"], sglang_service_extra_args=["--disable-custom-all-reduce"],
        sglang_stack_service_env={"NCCL_P2P_DISABLE": "1"}, sglang_service_nccl_env={"NCCL_P2P_DISABLE": "0"},
        sglang_service_read_write_paths=["/srv/with space"]))
    assert run.blocked is not None and "group" in run.blocked, run
    assert "overrides computed safety settings: flag --disable-custom-all-reduce, env NCCL_P2P_DISABLE" in run.out, run
