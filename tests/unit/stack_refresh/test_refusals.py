"""Refusals on small hand-made trees: each names its cause; a consistent tree of the same shape is accepted."""

import pytest

import refresh_trees as rt

from ansible_collections.blackwell.sglang.plugins.module_utils import _stack_refresh as sr

COMMIT = "0123456789abcdef0123456789abcdef01234567"
# a consistent CUDA 13 tree shaped like the current pin's
GOOD = ["torch==2.13.0", "torchaudio==2.11.0", "torchvision", "flashinfer_python[cu13]==0.6.17",
        "sglang-kernel==0.4.6.post1", "cuda-python>=13.0", "nvidia-cutlass-dsl[cu13]==4.6.2", "transformers==5.12.1"]


def derive(tmp_path, deps, cuda="13.0", overrides=None, service=None, **tree):
    root = rt.small_tree(tmp_path, deps, **tree)
    return sr.derive(root, COMMIT, "2026-12-01", cuda=cuda, overrides=overrides,
                     service=rt.SERVICE if service is None else service, patches=[])


def refused(tmp_path, deps, **kw):
    with pytest.raises(sr.Refusal) as info:
        derive(tmp_path, deps, **kw)
    return info.value.causes


def replace(deps, old, new):
    return [new if d == old else d for d in deps] if new is not None else [d for d in deps if d != old]


def test_a_consistent_tree_is_accepted(tmp_path):
    stack = derive(tmp_path, GOOD)["stack"]
    assert (stack["torch"], stack["torchvision"], stack["torchaudio"]) == ("2.13.0+cu130", "0.28.0+cu130", "2.11.0+cu130")
    assert stack["flashinfer"] == "0.6.17" and stack["sglang_requirement_overrides"] == {}
    assert stack["refresh"]["sglang_pins"]["transformers"] == "5.12.1"


def test_torchvision_with_no_release_for_the_torch_pin(tmp_path):
    causes = refused(tmp_path, replace(GOOD, "torchvision", "torchvision==0.27.0"))
    assert any(c.startswith("SGLang pins torchvision==0.27.0, which has no release for its torch==2.13.0") for c in causes), causes
    assert any("torchvision 0.28" in c for c in causes), causes


def test_torchaudio_pinned_for_another_torch(tmp_path):
    causes = refused(tmp_path, replace(GOOD, "torchaudio==2.11.0", "torchaudio==2.9.1"))
    assert any("SGLang pins torchaudio==2.9.1, which has no release for its torch==2.13.0" in c for c in causes), causes


def test_flashinfer_packages_at_two_versions(tmp_path):
    causes = refused(tmp_path, GOOD + ["flashinfer_cubin==0.6.16"])
    assert any("FlashInfer packages must be one version" in c and "flashinfer-cubin==0.6.16" in c
               and "flashinfer-python==0.6.17" in c for c in causes), causes


def test_cuda_minor_mismatch_among_nvidia_pins(tmp_path):
    deps = GOOD + ["nvidia-cuda-runtime-cu13==13.0.96", "nvidia-cuda-nvrtc-cu13==13.1.80"]
    causes = refused(tmp_path, deps, cuda="13.1")
    assert any(c.startswith("CUDA minor mismatch among the nvidia-*/cuda-* pins") and "13.0" in c and "13.1" in c
               for c in causes), causes


def test_cuda_major_mismatch_among_the_pins(tmp_path):
    causes = refused(tmp_path, GOOD + ["nvidia-cublas-cu12==12.8.4.1"])
    assert any(c.startswith("CUDA major mismatch among the pins") and "nvidia-cublas-cu12" in c
               and "flashinfer_python[cu13]" in c for c in causes), causes


def test_pins_that_need_a_newer_cuda_than_the_stack(tmp_path):
    causes = refused(tmp_path, GOOD, cuda="12.9")
    assert any("the pins need CUDA 13" in c and "option cuda" in c and "12.9" in c for c in causes), causes


def test_a_nvidia_pin_newer_than_the_stacks_cuda_minor(tmp_path):
    causes = refused(tmp_path, GOOD + ["nvidia-cuda-runtime==13.2.51"])
    assert any("nvidia-cuda-runtime==13.2.51 is CUDA 13.2, newer than the stack's CUDA 13.0" in c for c in causes), causes


def test_the_kernel_tree_builds_another_version_than_sglang_pins(tmp_path):
    causes = refused(tmp_path, GOOD, kernel_version="0.4.7")
    assert any("SGLang requires sglang-kernel==0.4.6.post1, its kernel tree python/sglang/kernels/aot builds "
               "sglang-kernel 0.4.7" in c and "overrides.sgl_kernel" in c for c in causes), causes


def test_an_accepted_kernel_version_is_an_override_with_its_reason(tmp_path):
    out = derive(tmp_path, GOOD, kernel_version="0.4.7",
                 overrides={"sgl_kernel": {"reason": "the tree's kernel is one release ahead of the pin"}})
    assert out["stack"]["sgl_kernel"] == "0.4.7"
    assert out["stack"]["sglang_requirement_overrides"] == {
        "sglang-kernel": "the tree's kernel is one release ahead of the pin"}


def test_the_kernel_tree_builds_another_distribution(tmp_path):
    causes = refused(tmp_path, replace(GOOD, "sglang-kernel==0.4.6.post1", "sgl-kernel==0.3.21"))
    assert any("SGLang requires sgl-kernel==0.3.21, its kernel tree python/sglang/kernels/aot builds sglang-kernel"
               in c for c in causes), causes


def test_the_kernel_build_requirement_excludes_the_torch_pin(tmp_path):
    causes = refused(tmp_path, GOOD, kernel_build=("scikit-build-core>=0.10", "torch>=2.14"))
    assert "the kernel's build-system requires torch>=2.14, the stack's torch is 2.13.0+cu130" in causes


def test_a_service_backend_the_tree_does_not_accept(tmp_path):
    choices = {"MOE_RUNNER_BACKEND_CHOICES": ["auto", "triton", "flashinfer_cutlass"],
               "FP4_GEMM_RUNNER_BACKEND_CHOICES": ["auto", "flashinfer_cudnn"]}
    causes = refused(tmp_path, GOOD, choices=choices)
    assert any(c.startswith("service.fp4_gemm_backend flashinfer_cutlass is not a choice of SGLang at 0123456789")
               and "flashinfer_cudnn" in c for c in causes), causes
    out = derive(tmp_path / "ok", GOOD, choices=choices, service=dict(rt.SERVICE, fp4_gemm_backend="flashinfer_cudnn"))
    assert out["stack"]["fp4_gemm_backend"] == "flashinfer_cudnn"


def test_a_missing_service_flag(tmp_path):
    causes = refused(tmp_path, GOOD, service={"kv_cache_dtype": "bf16", "moe_runner_backend": "flashinfer_cutlass"})
    assert "service.fp4_gemm_backend is not set (no base stack holds it either)" in causes


def test_no_torch_pin_names_the_option(tmp_path):
    causes = refused(tmp_path, replace(GOOD, "torch==2.13.0", "torch>=2.9"))
    assert causes == ["SGLang pins no torch version (torch>=2.9): give overrides.torch"]


def test_an_override_of_another_cuda_build(tmp_path):
    causes = refused(tmp_path, GOOD, overrides={"torch": {"version": "2.13.0+cu129", "reason": "test"}})
    assert any(c.startswith("overrides.torch.version 2.13.0+cu129 is a cu129 build") for c in causes), causes


def test_every_cause_is_named_at_once(tmp_path):
    deps = replace(GOOD, "torchvision", "torchvision==0.27.0") + ["flashinfer_cubin==0.6.16"]
    causes = refused(tmp_path, deps, kernel_version="0.4.7")
    assert len(causes) == 3, causes
    with pytest.raises(sr.Refusal) as info:
        derive(tmp_path / "again", deps, kernel_version="0.4.7")
    assert str(info.value).startswith("the tree's pins cannot be satisfied together: ")


def test_a_nightly_override_makes_its_companions_follow(tmp_path):
    out = derive(tmp_path, replace(GOOD, "torchaudio==2.11.0", "torchaudio==2.9.1") + [],
                 overrides={"torch": {"version": "2.14.0.dev20260901", "reason": "SM12x fixes only in the nightly"}})
    stack = out["stack"]
    assert stack["torch"] == "2.14.0.dev20260901+cu130"
    assert stack["torchvision"] == "0.29.0.dev20260901+cu130" and stack["torchaudio"] == "2.11.0.dev20260901+cu130"
    assert stack["torch_index_url"] == "https://download.pytorch.org/whl/nightly/cu130"
    assert sorted(stack["sglang_requirement_overrides"]) == ["torch", "torchaudio"]


@pytest.mark.parametrize("overrides, needle", [
    ({"pytorch": {"version": "1", "reason": "x"}}, "overrides.pytorch: unknown key"),
    ({"torch": {"version": "2.13.0"}}, "overrides.torch.reason is empty"),
    ({"torch": "2.13.0"}, "overrides.torch must be a mapping with version and reason"),
    ({"torch": {"version": "latest", "reason": "x"}}, "overrides.torch.version 'latest' is not a PEP 440 version"),
    ({"flashinfer": {"version": "0.6.17", "reason": "x", "index": "y"}}, "overrides.flashinfer: unknown field(s) index"),
], ids=["unknown-key", "no-reason", "not-a-mapping", "bad-version", "unknown-field"])
def test_bad_overrides_name_the_option(tmp_path, overrides, needle):
    with pytest.raises(sr.RefreshError) as info:
        derive(tmp_path, GOOD, overrides=overrides)
    assert needle in str(info.value)


def test_bad_cuda_and_tree_name_the_option(tmp_path):
    with pytest.raises(sr.RefreshError) as info:
        derive(tmp_path, GOOD, cuda="13")
    assert "cuda must be a CUDA major.minor" in str(info.value)
    with pytest.raises(sr.RefreshError) as info:
        sr.derive(str(tmp_path), COMMIT, "2026-12-01", service=rt.SERVICE, patches=[])
    assert "src: no python/pyproject.toml" in str(info.value)
    with pytest.raises(sr.RefreshError):
        sr.check_name("Current-Stack")
