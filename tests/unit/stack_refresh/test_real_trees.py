"""The refresh on the two real SGLang trees of the upstream bundle: the stacks it derives equal the shipped presets
original_20260307 and current (sglang_stack_presets of the stack contract) in every pin, and the report names the real differences, the
FetchContent sources (present / missing / at another revision in the bundle, as MANIFEST.md lists them) and the
state of every SM12x patch."""

import tempfile

import pytest
import yaml

import refresh_trees as rt

from ansible_collections.blackwell.sglang.plugins.module_utils import _stack_refresh as sr

pytestmark = [pytest.mark.skipif(not rt.have_bundle(), reason=rt.SKIP_REASON), pytest.mark.slow]

# The two choices of the original hand deployment that no tree holds (the preset original_20260307 says why): the
# cu130 torch nightly of the commit's date instead of SGLang's torch==2.9.1, and FlashInfer one release after
# SGLang's 0.6.4. Everything else, torchvision and torchaudio included, is derived.
ORIGINAL_OVERRIDES = {
    "torch": {"version": "2.12.0.dev20260307+cu130",
              "reason": "SGLang pins torch==2.9.1 (CUDA 12.8); the deployment runs the cu130 nightly of the commit's date"},
    "flashinfer": {"version": "0.6.5", "reason": "SGLang pins 0.6.4; the hand deployment ran 0.6.5"},
}
ORIGINAL_SERVICE = {"kv_cache_dtype": "bf16", "moe_runner_backend": "flashinfer_cutlass",
                    "fp4_gemm_backend": "flashinfer_cudnn"}
# SGLang's own choice for modelopt_fp4 on SM120 from 2026-06-04 (#26496): what the preset current records
CURRENT_SERVICE = {"kv_cache_dtype": "bf16", "moe_runner_backend": "flashinfer_cutlass",
                   "fp4_gemm_backend": "flashinfer_cutlass"}


def hand_written(name):
    """A preset the collection ships (written by hand, with where each version comes from)."""
    return rt.shipped()[name]


@pytest.fixture(name="trees", scope="module")
def fixture_trees(tmp_path_factory):
    pins = rt.pins()
    out = {}
    for key in ("original", "current"):
        root = rt.unpack(pins[key], tmp_path_factory.mktemp(key))
        out[key] = (root, pins[key]["commit"], rt.commit_date(pins[key]))
    return out


@pytest.fixture(name="derived", scope="module")
def fixture_derived(trees):
    out = {}
    for key, overrides, service in (("original", ORIGINAL_OVERRIDES, ORIGINAL_SERVICE),
                                    ("current", {}, CURRENT_SERVICE)):
        root, commit, date = trees[key]
        out[key] = sr.derive(root, commit, date, overrides=overrides, service=service, cache=rt.UPSTREAM,
                             scratch=tempfile.mkdtemp(prefix="refresh-test-"))
    return out


def _pins_equal(derived_stack, hand):
    """Every key of the shipped preset, with the same value (overrides: the same distributions)."""
    diffs = {}
    for key, value in hand.items():
        got = derived_stack.get(key)
        if key == "sglang_requirement_overrides":
            if sorted(got) != sorted(value or {}):
                diffs[key] = (sorted(got), sorted(value or {}))
            continue
        if got != value:
            diffs[key] = (got, value)
    return diffs


def test_original_tree_gives_the_original_stack(derived):
    stack = derived["original"]["stack"]
    assert _pins_equal(stack, hand_written("original_20260307")) == {}
    # the companions were derived from the torch override, not given
    assert stack["torchvision"] == "0.27.0.dev20260307+cu130"
    assert stack["torchaudio"] == "2.11.0.dev20260307+cu130"
    assert "torch==2.9.1" in stack["sglang_requirement_overrides"]["torchaudio"]
    assert stack["refresh"]["kernel_tree"] == "sgl-kernel"


def test_current_tree_gives_the_current_stack(derived):
    stack = derived["current"]["stack"]
    assert _pins_equal(stack, hand_written("current")) == {}
    assert stack["sglang_requirement_overrides"] == {}
    assert stack["refresh"]["kernel_tree"] == "python/sglang/kernels/aot"


def test_every_exact_pin_of_the_pyproject_is_recorded(derived):
    original, current = derived["original"]["sglang_pins"], derived["current"]["sglang_pins"]
    assert original["torch"] == "2.9.1" and original["sgl-kernel"] == "0.3.21"
    assert original["flashinfer-python"] == original["flashinfer-cubin"] == "0.6.4"
    assert original["transformers"] == "4.57.1" and original["cuda-python"] == "12.9"
    assert current["torch"] == "2.13.0" and current["sglang-kernel"] == "0.4.6.post1"
    assert current["flashinfer-python"] == "0.6.17" and current["nvidia-cutlass-dsl"] == "4.6.2"
    assert current["apache-tvm-ffi"] == "0.1.11" and current["transformers"] == "5.12.1"
    # ranges and unpinned requirements are not pins; the aarch64-only av pin does not apply on x86_64
    assert "cuda-python" not in current and "torchvision" not in current and "av" not in current


def test_sources_as_the_bundle_holds_them(derived):
    original, current = derived["original"]["sources"], derived["current"]["sources"]
    # MANIFEST.md "Missing": triton and sgl-attn for both pins; the current pin's FlashMLA commit is not in the
    # bundle (the bundle's FlashMLA is the original pin's)
    assert original["missing"] == ["repo-triton", "repo-flash-attention"]
    assert original["mismatched"] == []
    assert sorted(original["present"]) == sorted(["repo-cutlass", "repo-deepgemm", "repo-fmt", "repo-flashinfer",
                                                  "repo-mscclpp", "repo-flashmla", "json", "nanobind", "dlpack"])
    assert current["missing"] == ["repo-triton", "repo-flash-attention"]
    assert current["mismatched"] == ["repo-flashmla"]
    assert sorted(current["present"]) == ["repo-cutlass", "repo-flashinfer", "repo-flashmla-cutlass", "repo-fmt"]
    refs = dict((d["name"], d["ref"]) for d in current["dependencies"])
    assert refs["repo-flashmla"] == "05e26647fe840b8baedae486c2d86d5ce4efeb7c" and refs["repo-triton"] == "v3.7.1"


def test_patch_states(derived):
    for key in ("original", "current"):
        patches = derived[key]["patches"]
        assert set(patches["patches"]) == {"cmake_policy_guards", "cccl_include", "fa3_soft_fallback",
                                           "drop_sparse_attn", "skip_fa3_build", "sm120_only"}
        # unpatched upstream trees: every patch finds its anchors and would change the tree
        assert {p: s["state"] for p, s in patches["patches"].items()} == dict.fromkeys(patches["patches"], "applies")
        assert patches["patches"]["cmake_policy_guards"]["reason"] == "guarded CMP0169, CMP0177"
        assert patches["together"]["state"] == "applies"


def test_report_from_original_to_current_names_the_real_differences(derived):
    changes = {c["key"]: c for c in sr.compare(derived["original"]["stack"], derived["current"]["stack"])}
    assert changes["torch"]["old"] == "2.12.0.dev20260307+cu130" and changes["torch"]["new"] == "2.13.0+cu130"
    assert "kernel rebuilt (libtorch ABI)" in changes["torch"]["affects"]
    assert changes["torch"]["affects"][0] == "nightly -> release"
    assert (changes["flashinfer"]["old"], changes["flashinfer"]["new"]) == ("0.6.5", "0.6.17")
    assert (changes["sgl_kernel"]["old"], changes["sgl_kernel"]["new"]) == ("0.3.21", "0.4.6.post1")
    assert (changes["sgl_kernel_distribution"]["old"], changes["sgl_kernel_distribution"]["new"]) == (
        "sgl-kernel", "sglang-kernel")
    assert changes["kernel_tree"]["new"] == "python/sglang/kernels/aot"
    assert changes["torch_index_url"]["new"] == "https://download.pytorch.org/whl/cu130"
    assert changes["fp4_gemm_backend"]["new"] == "flashinfer_cutlass"
    assert (changes["pin transformers"]["old"], changes["pin transformers"]["new"]) == ("4.57.1", "5.12.1")
    assert changes["pin cuda-python"]["new"] is None            # a range (>=13.0) at the current pin
    assert changes["source repo-deepgemm"]["new"] is None       # the current pin dropped DeepGEMM and mscclpp
    assert changes["source repo-mscclpp"]["new"] is None
    assert changes["source repo-flashmla-cutlass"]["old"] is None
    assert changes["source repo-triton"]["new"] == "v3.7.1"
    for name in ("torch", "torchaudio", "flashinfer-python", "flashinfer-cubin"):
        assert changes["override " + name]["line"].startswith("override %s dropped" % name)
    # what did not change is not reported
    for key in ("cuda", "sglang_repo", "kv_cache_dtype", "moe_runner_backend", "pin timm", "source repo-cutlass",
                "source repo-fmt", "source repo-flashinfer"):
        assert key not in changes


def test_report_against_the_hand_written_stack(derived):
    """Against the shipped preset current itself (no `refresh` record) the current tree changes nothing."""
    assert sr.compare(hand_written("current"), derived["current"]["stack"]) == []
    changes = {c["key"] for c in sr.compare(hand_written("original_20260307"), derived["current"]["stack"])}
    assert {"sglang_ref", "torch", "torchvision", "torchaudio", "flashinfer", "sgl_kernel"} <= changes


def test_the_written_file_loads_as_the_stack(derived, tmp_path):
    stack = derived["current"]["stack"]
    text = sr.render("20260818_d55f1c28e2", stack, "2026-08-18T09:10:54+08:00", ["x -> y: z"], "current")
    data = yaml.safe_load(text)
    assert data == {"sglang_stack_preset_20260818_d55f1c28e2": stack}
    # every key of a shipped preset, and the record of what the tree held
    assert set(stack) == set(hand_written("current")) | {"refresh"}
    assert "Select it with sglang_stack_preset: 20260818_d55f1c28e2" in text
    assert all(len(line) <= 160 for line in text.splitlines())
    assert sr.stack_name(stack["sglang_ref"], "2026-08-18T09:10:54+08:00") == "20260818_d55f1c28e2"


def test_the_original_tree_warns_about_its_cuda_12_pin(derived):
    assert any("cuda-python==12.9" in w for w in derived["original"]["warnings"])
    assert derived["current"]["warnings"] == []
