"""Every other role in --check against localhost, host-changing modules blocked: bad values are refused by a
named check before the first task that could change the host."""

import pytest

CASES = [
    # (id, role, tasks_from, vars, needles)
    ("src-ref-shell", "sglang_source", None, {"sglang_stack_sglang_ref": "main; rm -rf /"},
     ["sglang_stack_sglang_ref", "'main; rm -rf /'", "whitespace"]),
    ("src-ref-option", "sglang_source", None, {"sglang_stack_sglang_ref": "--upload-pack=touch /tmp/x"},
     ["sglang_stack_sglang_ref", "starts with '-'"]),
    ("src-ref-dotdot", "sglang_source", None, {"sglang_stack_sglang_ref": "../.."}, ["sglang_stack_sglang_ref", "'..'"]),
    ("src-refspec-option", "sglang_source", None, {"sglang_source_refspec": "--upload-pack=x"}, ["sglang_source_refspec", "leading '-'"]),
    ("src-repo-option", "sglang_source", None, {"sglang_stack_sglang_repo": "--upload-pack=touch /tmp/x"},
     ["sglang_stack_sglang_repo must be a URL"]),
    ("src-repo-creds-masked", "sglang_source", None, {"sglang_stack_sglang_repo": "https://bob:s3cret-token@git.example/x y"},
     ["sglang_stack_sglang_repo must be a URL", "https://bob:********@git.example"]),
    ("src-dest-relative", "sglang_source", None, {"sglang_stack_source_dir": "src/sglang"}, ["sglang_stack_source_dir", "absolute path"]),
    ("src-venv-empty", "sglang_source", None, {"sglang_stack_venv": ""}, ["sglang_stack_venv", "absolute path, got ''"]),
    ("src-extra-req-marker", "sglang_source", None, {"sglang_source_extra_requirements": ["numpy; os_name=='posix'"]},
     ["sglang_source_extra_requirements", "no ';' markers"]),
    ("src-build-env-key", "sglang_source", None, {"sglang_source_build_env": {"SGLANG BUILD RUST EXTS": "none"}},
     ["sglang_source_build_env", "'SGLANG BUILD RUST EXTS' is not an environment variable name"]),
    ("fi-latest", "flashinfer", None, {"sglang_stack_flashinfer_version": "latest"}, ["sglang_stack_flashinfer_version", "'latest'"]),
    ("fi-venv-empty", "flashinfer", None, {"sglang_stack_venv": ""}, ["sglang_stack_venv", "absolute path"]),
    ("fi-protected-shell", "flashinfer", None, {"flashinfer_protected_packages": ["torch; touch /tmp/pwned"]},
     ["flashinfer_protected_packages", "'torch; touch /tmp/pwned'"]),
    ("fi-timeout-zero", "flashinfer", None, {"flashinfer_pip_async_timeout": 0}, ["flashinfer_pip_async_timeout", ">= 1, got 0"]),
    ("torch-undated-nightly", "torch_nightly", None, {"sglang_stack_torch_version": "2.12.0.dev+cu130"},
     ["sglang_stack_torch_version", "dated nightly", "2.12.0.dev+cu130"]),
    ("torch-latest", "torch_nightly", None, {"sglang_stack_torch_version": "latest"}, ["sglang_stack_torch_version", "\"latest\""]),
    ("torch-venv-empty", "torch_nightly", None, {"sglang_stack_venv": ""}, ["sglang_stack_venv", "absolute path"]),
    # the rules across pins, checked once every pin is well-formed
    ("torch-cpu-build-cuda-expected", "torch_nightly", None, {"sglang_stack_torch_version": "2.13.0+cpu"},
     ["sglang_stack_torch_version=2.13.0+cpu is a non-CUDA build", "torch_nightly_expected_cuda=\"13.0\""]),
    ("torch-extra-unpinned", "torch_nightly", None, {"torch_nightly_extra_packages": ["torchvision>=0.27"]},
     ["torch_nightly_extra_packages must be exact name==version pins"]),
    ("torch-extra-other-date", "torch_nightly", None,
     {"sglang_stack_torch_version": "2.12.0.dev20260307+cu130",
      "torch_nightly_extra_packages": ["torchvision==0.27.0.dev20260308+cu130"]},
     ["Nightly extras must be built on torch's date (dev20260307)"]),
    ("torch-wheelhouse-without-the-wheel", "torch_nightly", None, {"torch_nightly_wheelhouse": "/nonexistent/wheelhouse"},
     ["/nonexistent/wheelhouse has no torch-", "wheelhouse mode installs torch only from there"]),
    ("torch-extra-marker", "torch_nightly", None, {"torch_nightly_extra_packages": ["torchvision==0.27.0.dev20260307; python_version>'3'"]},
     ["torch_nightly_extra_packages", "no ';' markers"]),
    ("cuda-pip-venv-empty", "cuda_toolchain", None, {"sglang_stack_cuda_install_method": "pip", "cuda_toolchain_pip_venv": ""},
     ["cuda_toolchain_pip_venv", "absolute path"]),
    ("cuda-pip-package-shell", "cuda_toolchain", None,
     {"sglang_stack_cuda_install_method": "pip", "cuda_toolchain_pip_packages": ["nvidia-cuda-nvcc==13.0.*; rm -rf /"]},
     ["cuda_toolchain_pip_packages", "no ';' markers"]),
    ("cuda-method-yum", "cuda_toolchain", None, {"sglang_stack_cuda_install_method": "yum"},
     ["sglang_stack_cuda_install_method must be apt, pip or existing, got 'yum'"]),
    ("cuda-env-file-relative", "cuda_toolchain", None, {"sglang_stack_cuda_env_file": "cuda.env"},
     ["sglang_stack_cuda_env_file", "absolute path"]),
    ("cuda-timeout-negative", "cuda_toolchain", None, {"cuda_toolchain_pip_timeout": -3}, ["cuda_toolchain_pip_timeout", "got -3"]),
    ("kernel-cmake-space", "sgl_kernel_sm120", None, {"sgl_kernel_sm120_extra_cmake_args": ["-DFOO=a b"]},
     ["sgl_kernel_sm120_extra_cmake_args", "'-DFOO=a b'", "without whitespace"]),
    ("kernel-patch-unknown", "sgl_kernel_sm120", None, {"sglang_stack_kernel_patches": ["cccl_include", "no_such_patch"]},
     ["sglang_stack_kernel_patches", "a patch of blackwell.sglang.sgl_kernel_patch", "'no_such_patch'"]),
    ("kernel-src-relative", "sgl_kernel_sm120", None, {"sglang_stack_source_dir": "src/sglang"},
     ["sglang_stack_source_dir", "absolute path"]),
    ("kernel-log-dotdot", "sgl_kernel_sm120", None, {"sgl_kernel_sm120_log_dir": "/var/log/../../etc"},
     ["sgl_kernel_sm120_log_dir", "'..'"]),
    ("release-rollback-dotdot", "sglang_release", "rollback", {"sglang_release_rollback_to": "../../etc"},
     ["sglang_release_rollback_to", "'../../etc'"]),
    ("release-rollback-unrecorded-choice", "sglang_release", "rollback",
     {"sglang_release_rollback_unrecorded_model": "inventory"},
     ["sglang_release_rollback_unrecorded_model", "refuse, configured"]),
    ("gateway-undrain-pending-not-a-number", "sglang_gateway", "undrain",
     {"sglang_gateway_undrain_pending_timeout": "soon"}, ["sglang_gateway_undrain_pending_timeout", "float"]),
    ("release-marker-dotdot", "sglang_release", "rollback", {"sglang_release_failed_marker": "../../../etc/passwd"},
     ["sglang_release_failed_marker", "single name"]),
    ("release-switch-outside", "sglang_release", "switch", {"sglang_release_dir": "/opt/sglang/releases/../../../etc"},
     ["sglang_release_dir", "/etc"]),
    ("release-root-relative", "sglang_release", None, {"sglang_stack_root": "opt/sglang"}, ["sglang_stack_root", "absolute path"]),
    ("release-id-length-zero", "sglang_release", None, {"sglang_release_id_length": 0}, ["sglang_release_id_length", ">= 8 and <= 64, got 0"]),
    ("preflight-smoke-timeout-zero", "preflight", None, {"preflight_nccl_smoke_timeout": 0}, ["preflight_nccl_smoke_timeout", ">= 1, got 0"]),
    ("preflight-smoke-size-negative", "preflight", None, {"preflight_nccl_smoke_size_mb": -64}, ["preflight_nccl_smoke_size_mb", "got -64"]),
    ("preflight-python-relative", "preflight", None, {"preflight_python": "venv/bin/python"}, ["preflight_python", "absolute path"]),
    ("bench-port-zero", "sglang_benchmark", None, {"sglang_stack_service_port": 0}, ["sglang_stack_service_port", "1-65535"]),
    ("bench-host-injection", "sglang_benchmark", None, {"sglang_benchmark_host": "127.0.0.1 --evil"},
     ["sglang_benchmark_host", "'127.0.0.1 --evil'"]),
    ("bench-timeout-negative", "sglang_benchmark", None, {"sglang_benchmark_level_timeout": -5}, ["sglang_benchmark_level_timeout", "got -5"]),
]


BATCH = {case_id: (role, tasks_from, overrides) for case_id, role, tasks_from, overrides, _needles in CASES}


@pytest.mark.parametrize("case_id, role, tasks_from, overrides, needles", CASES, ids=[c[0] for c in CASES])
def test_role_refuses_before_any_change(batches, tmp_path, case_id, role, tasks_from, overrides, needles):
    run = batches.run("other_roles", BATCH, case_id, lambda got: got.refused_before_change(*needles), tmp_path)
    assert run.refused_before_change(*needles), run
