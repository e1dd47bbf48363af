"""The REAL sgl-kernel trees at the inventory's pins, configured offline through the collection's roles.

`files/configure.yml` runs cuda_toolchain (pip method: NVIDIA's CUDA 13.0 wheels) and sgl_kernel_sm120 with
`sgl_kernel_sm120_configure_only` on this machine, against a source cache made of the upstream bundle's tarballs
(../shared/upstream, read in place) plus documented placeholders for the two trees the bundle lacks:

* repo-triton (the build only install()s python/triton_kernels from it; configure reads nothing),
* repo-flash-attention (sgl-attn at bcf72ccc is not in the bundle): an empty tree. `drop_sparse_attn` takes its sparse
  FlashAttention sources and their op registrations out of common_ops and `skip_fa3_build` its FA3 sources, so the
  build reads no file of it (SGLang's SM12x serving paths never call those kernels: docs/sgl-kernel.md).

Original pin (d28f35240a, sgl-kernel 0.3.21): CMake must get through configure and generate (build.ninja), with
every source offline (FETCHCONTENT_FULLY_DISCONNECTED=ON) and, with `sm120_only`, no gencode but sm_120a.
Current pin (d55f1c28e2, sglang-kernel 0.4.6.post1), configured for the targets [sm_120a, sm_121a] (the SM12x
family: upstream compiles sm_121a only on aarch64 build hosts, the sm120_only patch adds it here): the bundle holds
FlashMLA 9804b120 but the pin needs 05e26647,
so the role must refuse before building, naming exactly triton, sgl-attn (missing) and FlashMLA (another revision);
with all three allowed as placeholders, CMake must stop in cmake/flashmla.cmake (the FlashMLA tree is empty) and
nowhere else.
"""

import fcntl
import json
import os
import re
import shutil
import sys
import tarfile

import pytest

import ansible_run
from upstream import CURRENT, ORIGINAL, ROOT, SKIP_REASON, UPSTREAM, have_bundle

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not have_bundle(), reason=SKIP_REASON)]

PLAY = os.path.join(os.path.dirname(__file__), "files", "configure.yml")
# The 8 sgl-attn files the original pin's CMakeLists lists (CMakeLists.txt:342-346 and, with FA3, 512-514).
SGL_ATTN_FILES = [
    "csrc/flash_attn/src/flash_fwd_sparse_hdim128_bf16_causal_sm80.cu",
    "csrc/flash_attn/src/flash_fwd_sparse_hdim128_bf16_sm80.cu",
    "csrc/flash_attn/src/flash_fwd_sparse_hdim128_fp16_causal_sm80.cu",
    "csrc/flash_attn/src/flash_fwd_sparse_hdim128_fp16_sm80.cu",
    "csrc/flash_attn/flash_sparse_api.cpp",
    "hopper/flash_prepare_scheduler.cu",
    "hopper/flash_api.cpp",
    "hopper/flash_fwd_combine.cu",
]
PATCHES = ["cmake_policy_guards", "cccl_include", "fa3_soft_fallback", "drop_sparse_attn", "skip_fa3_build",
           "sm120_only"]
# What the current pin's configure reaches with the bundle plus the two placeholders (set from a real run, see
# docs/sgl-kernel.md): True = the whole build system is generated; otherwise CURRENT_STOP names the file it stops in.
CURRENT_CONFIGURES = True
CURRENT_STOP = ""
# the venv and the CUDA wheels survive between runs (like .cache/pip): the playbook is idempotent on them
STATE = os.path.join(ROOT, ".cache", "kernel-configure")


def _placeholder(cache, name, files=()):
    d = os.path.join(cache, name)
    os.makedirs(d)
    with open(os.path.join(d, ".blackwell-placeholder"), "w") as f:
        f.write("test placeholder: the upstream bundle lacks %s (tests/unit/kernel_sources)\n" % name)
    for rel in files:
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        open(os.path.join(d, rel), "w").close()


def _cache(tmp_path, placeholders):
    """The bundle's manifest and tarballs linked in, plus placeholder trees."""
    cache = tmp_path / "sources"
    cache.mkdir()
    for entry in os.listdir(UPSTREAM):
        if entry.endswith(".tar.gz") or entry == "manifest.json":
            os.symlink(os.path.join(UPSTREAM, entry), str(cache / entry))
    for name, files in placeholders.items():
        _placeholder(str(cache), name, files)
    return str(cache)


def _tree(tmp_path, tarball):
    with tarfile.open(os.path.join(UPSTREAM, tarball)) as tf:
        tf.extractall(str(tmp_path / "src"))
    return str(tmp_path / "src" / "sglang")


def _run(tmp_path, src, cache, allowed, expect_ok=True, patches=None, targets=("sm_120a",)):
    os.makedirs(STATE, exist_ok=True)
    venv = os.path.join(STATE, "venv")
    extra = {
        "test_python": "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable,
        "test_venv": venv, "test_tmp": str(tmp_path),
        "ansible_python_interpreter": sys.executable,
        "cuda_toolchain_pip_venv": venv,
        "sglang_stack_cuda_env_file": str(tmp_path / "cuda.env"),
        "cuda_toolchain_profile_script": str(tmp_path / "cuda-profile.sh"),
        "sglang_stack_source_dir": src,
        "sglang_stack_root": str(tmp_path / "opt"),
        "sgl_kernel_sm120_log_dir": str(tmp_path / "log"),
        "sglang_stack_kernel_patches": patches or PATCHES,
        "sglang_stack_target_archs": list(targets),
        "sgl_kernel_sm120_source_cache": cache,
        "sgl_kernel_sm120_source_placeholders_allowed": allowed,
        "sgl_kernel_sm120_configure_only": True,
        "sgl_kernel_sm120_keep_build_dir": True,
    }
    # One run at a time holds STATE: pytest-xdist spreads this module's tests over its workers, and two first runs on
    # an empty STATE would pip-install into the same venv at once. The wait is bounded by the holder's timeout.
    with open(os.path.join(STATE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = ansible_run.playbook(PLAY, tmp_path, extra_vars=extra, timeout=1500)
    out = proc.out
    if expect_ok:
        assert proc.returncode == 0, out[-6000:]
        with open(str(tmp_path / "result.json")) as f:
            return json.load(f), out
    assert proc.returncode != 0, out[-3000:]
    return None, out


@pytest.fixture(scope="module", autouse=True)
def _playbook():
    if not os.path.exists(ansible_run.PLAYBOOK):
        pytest.skip("ansible-playbook not installed next to this python")
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed (host compiler of the CUDA configure)")


def test_original_pin_configures_offline_for_sm120a_only(tmp_path):
    src = _tree(tmp_path, ORIGINAL)
    cache = _cache(tmp_path, {"repo-triton": (), "repo-flash-attention": ()})
    result, out = _run(tmp_path, src, cache, ["repo-triton", "repo-flash-attention"])
    sources = result["sources"]
    assert [d["name"] for d in sources["dependencies"]] == [
        "repo-cutlass", "repo-deepgemm", "repo-fmt", "repo-triton", "repo-flashinfer", "repo-flash-attention",
        "repo-mscclpp", "repo-flashmla", "json", "nanobind", "dlpack"]
    assert sources["missing"] == [] and sources["mismatched"] == []
    assert sorted(sources["placeholders"]) == ["repo-flash-attention", "repo-triton"]
    assert "sgl-kernel configure passed" in out
    with open(result["configure_log"]) as f:
        log = f.read()
    # every source came from the cache: CMake never tried to clone or download
    assert "-DFETCHCONTENT_FULLY_DISCONNECTED=ON" in log
    assert not re.search(r"(git clone|Cloning into|Downloading|Performing download step)", log), log[-3000:]
    assert "Found NUMA" in log  # mscclpp's find_package(NUMA REQUIRED): libnuma-dev from the role's packages
    ninja = os.path.join(result["build_dir"], "build.ninja")
    with open(ninja) as f:
        text = f.read()
    codes = set(re.findall(r"code=(sm_[0-9]+[a-z]?)", text))
    assert codes == {"sm_120a"}, "an SM120-only build compiles for %s" % sorted(codes)
    assert "flash_sparse" not in text


def test_current_pin_is_refused_naming_what_the_bundle_lacks(tmp_path):
    src = _tree(tmp_path, CURRENT)
    cache = _cache(tmp_path, {})
    _result, out = _run(tmp_path, src, cache, [], expect_ok=False)
    assert "cannot serve an offline build" in out
    for line in ("repo-triton (missing): https://github.com/triton-lang/triton v3.7.1",
                 "repo-flash-attention (missing): https://github.com/sgl-project/sgl-attn "
                 "f89bc2306632d1ec5f97b014dded4254f5b4a907"):
        assert line in out, out[-3000:]
    # FlashMLA (05e26647, the bundle has 9804b120) is not needed: sm120_only leaves flashmla.cmake unconfigured
    assert "repo-flashmla" not in out.split("cannot serve an offline build")[1].split("Stage the missing")[0]
    assert "sgl-kernel configure" not in out  # refused before CMake ran


def test_current_pin_without_sm120_only_needs_the_flashmla_revision(tmp_path):
    src = _tree(tmp_path, CURRENT)
    cache = _cache(tmp_path, {"repo-triton": (), "repo-flash-attention": SGL_ATTN_FILES})
    _result, out = _run(tmp_path, src, cache, ["repo-triton", "repo-flash-attention"], expect_ok=False,
                        patches=["cmake_policy_guards", "cccl_include", "fa3_soft_fallback"])
    assert ("repo-flashmla (cache holds another revision): https://github.com/sgl-project/FlashMLA "
            "05e26647fe840b8baedae486c2d86d5ce4efeb7c") in out, out[-3000:]
    assert "sgl-kernel configure" not in out


def test_current_pin_configures_for_the_whole_sm12x_family_on_x86_64(tmp_path):
    """Targets [sm_120a, sm_121a] on this x86_64 machine: upstream's CMake adds the sm_121a gencode only when
    CMAKE_SYSTEM_PROCESSOR is aarch64 (field report S13), so without the sm120_only patch adding it the generated
    build would hold sm_120a only. build.ninja must compile every CUDA unit for both."""
    src = _tree(tmp_path, CURRENT)
    cache = _cache(tmp_path, {"repo-triton": (), "repo-flash-attention": ()})
    result, out = _run(tmp_path, src, cache, ["repo-triton", "repo-flash-attention"], expect_ok=CURRENT_CONFIGURES,
                       targets=("sm_120a", "sm_121a"))
    if CURRENT_CONFIGURES:
        ninja = os.path.join(result["build_dir"], "build.ninja")
        with open(ninja) as f:
            text = f.read()
        codes = set(re.findall(r"code=(sm_[0-9]+[a-z]?)", text))
        assert codes == {"sm_120a", "sm_121a"}, "an SM12x build compiles for %s" % sorted(codes)
        # every nvcc command line that compiles for one compiles for both
        lines = [ln for ln in text.splitlines() if "code=sm_12" in ln]
        assert lines and all("code=sm_120a" in ln and "code=sm_121a" in ln for ln in lines)
        assert "flash_sparse" not in text
    else:
        first = re.search(r"first error: (CMake Error at [^\n]*)", out)
        assert first and CURRENT_STOP in first.group(1), out[-4000:]
