"""Every input checked against its type and range before the first host read, with the variable named: each role's
one input check (the role's first task, after Ansible's argument-spec validation) refuses the value; nothing of the
host was read before it (the failing task is that check) and nothing changed (no host-changing task started).
Each example of the issue comes with siblings: the other values of the same kind in the same role."""

import pytest

from harness import run_role

CHECK = "Check "          # every role's input check is named "Check the ... " and is its first task

FP4 = {"fp4_probe_force": True}     # without a GPU the probe is skipped: forced, it would read the parser next
GOOD_KEY = "k" * 40

CASES = [
    # (id, role, tasks_from, vars, needles)
    # fp4_probe: the shapes and the timeouts before "cannot read the installed SGLang's parser"
    ("fp4-k-not-multiple-of-32", "fp4_probe", None, dict(FP4, fp4_probe_shapes=[{"n": 256, "k": 500}]),
     ["fp4_probe_shapes[0].k must be a multiple of 32, got 500"]),
    ("fp4-n-zero", "fp4_probe", None, dict(FP4, fp4_probe_shapes=[{"n": 0, "k": 512}]), ["fp4_probe_shapes[0].n must be > 0"]),
    ("fp4-shape-missing-k", "fp4_probe", None, dict(FP4, fp4_probe_shapes=[{"n": 256}]), ["fp4_probe_shapes[0] needs n, k"]),
    ("fp4-shape-text", "fp4_probe", None, dict(FP4, fp4_probe_shapes=[{"n": 256, "k": "big"}]),
     ["fp4_probe_shapes[0].k must be a whole number, got 'big'"]),
    ("fp4-moe-top-k", "fp4_probe", None,
     dict(FP4, fp4_probe_moe_shapes=[{"hidden": 1024, "intermediate": 512, "experts": 2, "top_k": 4}]),
     ["fp4_probe_moe_shapes[0].top_k must be at most experts (2), got 4"]),
    ("fp4-timeout-zero", "fp4_probe", None, dict(FP4, fp4_probe_timeout=0), ["fp4_probe_timeout must be a whole number >= 1, got 0"]),
    ("fp4-total-timeout-negative", "fp4_probe", None, dict(FP4, fp4_probe_total_timeout=-1), ["fp4_probe_total_timeout", "got -1"]),
    ("fp4-parser-timeout-zero", "fp4_probe", None, dict(FP4, fp4_probe_parser_timeout=0), ["fp4_probe_parser_timeout", "got 0"]),
    ("fp4-m-zero", "fp4_probe", None, dict(FP4, fp4_probe_m_list=[1, 0]), ["fp4_probe_m_list[1] must be a whole number >= 1"]),
    ("fp4-device-negative", "fp4_probe", None, dict(FP4, fp4_probe_device_index=-1), ["fp4_probe_device_index", "got -1"]),
    ("fp4-mode-unquoted", "fp4_probe", None, dict(FP4, fp4_probe_result_dir_mode=755), ["fp4_probe_result_dir_mode", "octal"]),
    ("fp4-env-key", "fp4_probe", None, dict(FP4, fp4_probe_environment={"1BAD": "x"}), ["fp4_probe_environment", "'1BAD'"]),
    # sglang_release: the key's inputs before they are hashed
    ("release-cuda-latest", "sglang_release", None, {"sglang_stack_cuda_version": "latest"},
     ["sglang_stack_cuda_version must be a major.minor version", "'latest'"]),
    ("release-torch-latest", "sglang_release", None, {"sglang_stack_torch_version": "latest"},
     ["sglang_stack_torch_version must be a concrete version", "'latest'"]),
    ("release-flashinfer-main", "sglang_release", None, {"sglang_stack_flashinfer_version": "main"},
     ["sglang_stack_flashinfer_version", "'main'"]),
    ("release-cuda-three-parts", "sglang_release", None, {"sglang_stack_cuda_version": "13.0.1"},
     ["sglang_stack_cuda_version", "'13.0.1'"]),
    ("release-arch-plain", "sglang_release", None, {"sglang_stack_target_archs": ["sm_120"]}, ["sglang_stack_target_archs", "'sm_120'"]),
    ("release-ref-branch", "sglang_release", None, {"sglang_stack_sglang_ref": "main"},
     ["sglang_stack_sglang_ref must be a commit id", "sglang_stack_allow_floating_ref: true"]),
    ("release-owner-path", "sglang_release", None, {"sglang_release_owner": "../root"}, ["sglang_release_owner", "'../root'"]),
    # preflight: the contract's and the preflight's values before gpu_facts reads the host
    ("preflight-disk-negative", "preflight", None, {"preflight_min_disk_gb": -5}, ["preflight_min_disk_gb must be a number >= 0, got -5"]),
    ("preflight-shm-negative", "preflight", None, {"preflight_min_shm_gib": -1}, ["preflight_min_shm_gib", "got -1"]),
    ("preflight-gib-per-job-zero", "preflight", None, {"preflight_build_gib_per_job": 0}, ["preflight_build_gib_per_job", "> 0"]),
    ("preflight-gpu-index-negative", "preflight", None, {"preflight_gpu_indices": [0, -1]}, ["preflight_gpu_indices[1]"]),
    ("preflight-mem-fraction", "preflight", None, {"preflight_service_mem_fraction_static": 1.5},
     ["preflight_service_mem_fraction_static must be a number > 0 and < 1, got 1.5"]),
    ("preflight-glibc", "preflight", None, {"preflight_min_glibc": "new"}, ["preflight_min_glibc", "'new'"]),
    ("preflight-slug", "preflight", None, {"sglang_stack_cuda_apt_distro_slug": "Ubuntu 24.04"}, ["sglang_stack_cuda_apt_distro_slug", "'Ubuntu 24.04'"]),
    ("preflight-bad-driver-key", "preflight", None, {"preflight_known_bad_drivers": {"latest": "x"}},
     ["preflight_known_bad_drivers[0]", "'latest'"]),
    ("contract-cuda-latest", "preflight", None, {"sglang_stack_cuda_version": "latest"},
     ["sglang_stack_cuda_version must be a major.minor version", "'latest'"]),
    ("contract-torch-latest", "preflight", None, {"sglang_stack_torch_version": "latest"}, ["sglang_stack_torch_version", "'latest'"]),
    ("contract-tp-zero", "preflight", None, {"sglang_stack_service_tp_size": 0}, ["sglang_stack_service_tp_size must be a whole number >= 1"]),
    ("contract-port", "preflight", None, {"sglang_stack_service_port": 70000}, ["sglang_stack_service_port", "1-65535"]),
    ("contract-arch-plain", "preflight", None, {"sglang_stack_target_archs": ["sm_120"]}, ["sglang_stack_target_archs", "'sm_120'"]),
    ("contract-model-relative", "preflight", None, {"sglang_stack_model_path": "../models/x"},
     ["sglang_stack_model_path must be an absolute path or a Hugging Face repository id", "'../models/x'"]),
    ("contract-root-relative", "preflight", None, {"sglang_stack_root": "opt/sglang"}, ["sglang_stack_root", "absolute path"]),
    ("contract-repo-option", "preflight", None, {"sglang_stack_sglang_repo": "--upload-pack=x"}, ["sglang_stack_sglang_repo must be a URL"]),
    ("contract-ref-branch", "preflight", None, {"sglang_stack_sglang_ref": "main"},
     ["sglang_stack_sglang_ref must be a commit id", "'main'", "sglang_stack_allow_floating_ref: true"]),
    ("contract-ref-tag", "preflight", None, {"sglang_stack_sglang_ref": "v0.5.9"}, ["sglang_stack_sglang_ref", "'v0.5.9'"]),
    # sglang_service: every unit value, before the checkpoint or the release's SGLang is read
    ("service-restart-sec-negative", "sglang_service", None, {"sglang_service_restart_sec": -5},
     ["sglang_service_restart_sec must be a whole number >= 0, got -5"]),
    ("service-start-limit-burst-zero", "sglang_service", None, {"sglang_service_start_limit_burst": 0},
     ["sglang_service_start_limit_burst", "got 0"]),
    ("service-start-limit-interval-negative", "sglang_service", None, {"sglang_service_start_limit_interval_sec": -1},
     ["sglang_service_start_limit_interval_sec", "got -1"]),
    ("service-timeout-start-short", "sglang_service", None, {"sglang_service_timeout_start_sec": 60},
     ["sglang_service_timeout_start_sec must be a whole number >= 300, got 60"]),
    ("service-nofile-zero", "sglang_service", None, {"sglang_service_limit_nofile": 0}, ["sglang_service_limit_nofile", "got 0"]),
    ("service-health-timeout-short", "sglang_service", None, {"sglang_service_readiness_request_timeout": 1},
     ["sglang_service_readiness_request_timeout must be a number >= 5"]),
    ("service-mem-fraction-one", "sglang_service", None, {"sglang_service_mem_fraction_static": 1}, ["sglang_service_mem_fraction_static"]),
    ("service-context-zero", "sglang_service", None, {"sglang_service_context_length": 0}, ["sglang_service_context_length", "got 0"]),
    ("service-node-rank-negative", "sglang_service", None, {"sglang_service_node_rank": -1}, ["sglang_service_node_rank", "got -1"]),
    ("service-key-min-length", "sglang_service", None, {"sglang_service_api_key_min_length": 0},
     ["sglang_service_api_key_min_length must be a whole number >= 16, got 0"]),
    ("service-dist-init-addr", "sglang_service", None, {"sglang_service_dist_init_addr": "rank0 --evil"},
     ["sglang_service_dist_init_addr must be host:port"]),
    ("service-dist-port", "sglang_service", None, {"sglang_service_dist_init_port": 0}, ["sglang_service_dist_init_port", "1-65535"]),
    ("service-parser-shell", "sglang_service", None, {"sglang_service_tool_call_parser": "qwen3;id"},
     ["sglang_service_tool_call_parser", "'qwen3;id'"]),
    ("service-group-path", "sglang_service", None, {"sglang_service_supplementary_groups": ["video", "../x"]},
     ["sglang_service_supplementary_groups[1]", "'../x'"]),
    ("service-cc-latest", "sglang_service", None, {"sglang_service_compute_capability": "latest"}, ["sglang_service_compute_capability"]),
    ("service-key-masked", "sglang_service", None, {"sglang_service_api_key": GOOD_KEY, "sglang_service_restart_sec": -1},
     ["sglang_service_restart_sec"]),
    # sglang_gateway: the key's variable name and its siblings, in every entry point
    ("gateway-key-env-digit", "sglang_gateway", None, {"sglang_gateway_api_key_env": "1BAD"},
     ["sglang_gateway_api_key_env must be an environment variable name", "'1BAD'"]),
    ("gateway-key-env-space", "sglang_gateway", None, {"sglang_gateway_api_key_env": "SMG KEY"}, ["sglang_gateway_api_key_env"]),
    ("gateway-interval-zero", "sglang_gateway", None, {"sglang_gateway_health_check_interval_secs": 0},
     ["sglang_gateway_health_check_interval_secs", "got 0"]),
    ("gateway-endpoint-relative", "sglang_gateway", None, {"sglang_gateway_health_check_endpoint": "health"},
     ["sglang_gateway_health_check_endpoint", "'health'"]),
    ("gateway-scheme", "sglang_gateway", None, {"sglang_gateway_worker_scheme": "ftp"}, ["sglang_gateway_worker_scheme", "'ftp'"]),
    ("gateway-version-latest", "sglang_gateway", None, {"sglang_gateway_version": "latest"}, ["sglang_gateway_version", "'latest'"]),
    ("gateway-retries-negative", "sglang_gateway", None, {"sglang_gateway_retry_max_retries": -1}, ["sglang_gateway_retry_max_retries"]),
    ("gateway-drain-poll-zero", "sglang_gateway", "drain", {"sglang_gateway_drain_poll": 0}, ["sglang_gateway_drain_poll", "> 0"]),
    ("gateway-undrain-timeout-zero", "sglang_gateway", "undrain", {"sglang_gateway_undrain_timeout": 0},
     ["sglang_gateway_undrain_timeout", "got 0"]),
    # the other roles, one sibling of each kind
    ("cuda-version-latest", "cuda_toolchain", None, {"sglang_stack_cuda_version": "latest"},
     ["sglang_stack_cuda_version must be a major.minor version", "'latest'"]),
    ("cuda-version-old", "cuda_toolchain", None, {"sglang_stack_cuda_version": "12.4"}, ["sglang_stack_cuda_version must be 12.8 or later"]),
    ("cuda-verify-arch-plain", "cuda_toolchain", None, {"cuda_toolchain_verify_arch": "120"}, ["cuda_toolchain_verify_arch", "'120'"]),
    ("cuda-repo-url", "cuda_toolchain", None, {"cuda_toolchain_apt_repo_url": "ftp://mirror/cuda"}, ["cuda_toolchain_apt_repo_url"]),
    ("cuda-repo-base-url", "cuda_toolchain", None, {"cuda_toolchain_apt_repo_base_url": "ftp://mirror/cuda"},
     ["cuda_toolchain_apt_repo_base_url must be a http/https/file URL"]),
    ("cuda-retries-negative", "cuda_toolchain", None, {"cuda_toolchain_pip_retries": -1}, ["cuda_toolchain_pip_retries", "got -1"]),
    ("torch-index-url", "torch_nightly", None, {"torch_nightly_index_url": "download.pytorch.org"}, ["torch_nightly_index_url"]),
    ("torch-expected-cuda", "torch_nightly", None, {"torch_nightly_expected_cuda": "latest"}, ["torch_nightly_expected_cuda"]),
    ("torch-retries-negative", "torch_nightly", None, {"torch_nightly_pip_retries": -1}, ["torch_nightly_pip_retries"]),
    ("flashinfer-index-url", "flashinfer", None, {"flashinfer_cubin_index_url": "flashinfer.ai/whl"}, ["flashinfer_cubin_index_url"]),
    ("flashinfer-extra", "flashinfer", None, {"flashinfer_python_extras": ["cu13;x"]}, ["flashinfer_python_extras[0]"]),
    ("source-ref-branch", "sglang_source", None, {"sglang_stack_sglang_ref": "main"},
     ["sglang_stack_sglang_ref must be a commit id", "sglang_stack_allow_floating_ref"]),
    ("source-depth-negative", "sglang_source", None, {"sglang_source_depth": -1}, ["sglang_source_depth", "got -1"]),
    ("source-subdir-up", "sglang_source", None, {"sglang_source_package_subdir": "../python"}, ["sglang_source_package_subdir"]),
    ("kernel-build-timeout-short", "sgl_kernel_sm120", None, {"sgl_kernel_sm120_build_timeout": 30},
     ["sgl_kernel_sm120_build_timeout must be a whole number >= 60, got 30"]),
    ("kernel-gib-per-job-zero", "sgl_kernel_sm120", None, {"sgl_kernel_sm120_gib_per_job": 0}, ["sgl_kernel_sm120_gib_per_job"]),
    ("kernel-arch-plain", "sgl_kernel_sm120", None, {"sglang_stack_target_archs": ["sm_120"]}, ["sglang_stack_target_archs"]),
    ("model-workers-zero", "sglang_model", None, {"sglang_model_max_workers": 0}, ["sglang_model_max_workers", "got 0"]),
    ("model-endpoint", "sglang_model", None, {"sglang_model_hf_endpoint": "hf-mirror.internal"}, ["sglang_model_hf_endpoint"]),
    ("model-repo-id-space", "sglang_model", None, {"sglang_model_repo_id": "nvidia/Qwen 3"}, ["sglang_model_repo_id"]),
    ("bench-ratio", "sglang_benchmark", None, {"sglang_benchmark_range_ratio": 1.5}, ["sglang_benchmark_range_ratio", "<= 1"]),
    ("bench-input-len-zero", "sglang_benchmark", None, {"sglang_benchmark_input_len": 0}, ["sglang_benchmark_input_len", "got 0"]),
    ("bench-run-id", "sglang_benchmark", None, {"sglang_benchmark_run_id": "yesterday"}, ["sglang_benchmark_run_id", "'yesterday'"]),
    ("monitoring-interval", "sglang_monitoring", None, {"sglang_monitoring_facts_interval": "soon"},
     ["sglang_monitoring_facts_interval must be a systemd time span"]),
    ("monitoring-gpu-count-negative", "sglang_monitoring", "health", {"sglang_monitoring_health_expected_gpu_count": -1},
     ["sglang_monitoring_health_expected_gpu_count", "got -1"]),
    ("monitoring-since", "sglang_monitoring", "health", {"sglang_monitoring_health_since": "yesterday"},
     ["sglang_monitoring_health_since", "'yesterday'"]),
    ("prometheus-interval-systemd-style", "sglang_prometheus", None, {"sglang_prometheus_scrape_interval": "1min"},
     ["sglang_prometheus_scrape_interval must be a Prometheus duration", "'1min'"]),
    ("prometheus-kv-usage", "sglang_prometheus", None, {"sglang_prometheus_alert_kv_cache_usage": 1.5},
     ["sglang_prometheus_alert_kv_cache_usage"]),
    ("audit-root-relative", "sglang_audit", "read", {"sglang_stack_root": "opt/sglang"}, ["sglang_stack_root", "absolute path"]),
]


BATCH = {case_id: (role, tasks_from, overrides) for case_id, role, tasks_from, overrides, _needles in CASES}


@pytest.mark.parametrize("case_id, role, tasks_from, overrides, needles", CASES, ids=[c[0] for c in CASES])
def test_refused_by_the_roles_first_check(batches, tmp_path, case_id, role, tasks_from, overrides, needles):
    run = batches.run("inputs_first", BATCH, case_id,
                      lambda got: got.refused_by(CHECK, *needles) and GOOD_KEY not in got.whole, tmp_path)
    assert run.refused_by(CHECK, *needles), (run.failed_task(), run)
    assert GOOD_KEY not in run.whole, "the API key is masked in the message"


def test_wrong_type_in_the_contract_is_named_as_a_type_error(tmp_path):
    """TP "eight" is a wrong type of the contract's variable, reported before anything else reads it (not TP 0, not a
    multi-node error)."""
    run = run_role(tmp_path, "preflight", {"sglang_stack_service_tp_size": "eight"})
    assert run.refused_by(CHECK, "stack contract (roles/sglang_stack): argument 'sglang_stack_service_tp_size'",
                          "unable to convert to int"), run
    assert "multi-node" not in run.out and "tp_size must be >= 1" not in run.out, run


@pytest.mark.parametrize("overrides, needles", [
    ({"sglang_stack_target_archs": "sm_120a", "sglang_stack_kernel_patches": ["nope"]}, ["sglang_stack_kernel_patches", "nope"]),
    ({"sglang_stack_allow_floating_ref": "maybe"}, ["sglang_stack_allow_floating_ref"]),
], ids=["patch-choice", "switch-not-bool"])
def test_contract_type_and_choice_siblings(tmp_path, overrides, needles):
    run = run_role(tmp_path, "preflight", overrides)
    assert run.refused_by(CHECK, "stack contract (roles/sglang_stack)", *needles), run


def test_unknown_preset_is_named(tmp_path):
    run = run_role(tmp_path, "preflight", {"sglang_stack_preset": "newest"})
    assert run.refused_before_change('sglang_stack_preset is "newest"', "original_20260307, current"), run


def test_a_floating_ref_is_accepted_when_asked_for(tmp_path):
    """sglang_stack_allow_floating_ref: true lets a branch through the input checks (the sandbox's mirror)."""
    run = run_role(tmp_path, "preflight", {"sglang_stack_sglang_ref": "main", "sglang_stack_allow_floating_ref": True})
    assert "must be a commit id" not in run.out, run
    assert "Read GPUs, driver, topology and PCIe P2P state" in run.out, run
