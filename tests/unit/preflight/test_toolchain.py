"""_toolchain collectors with fake nvcc / cmake / python executables built from recorded output."""

import os

from ansible_collections.blackwell.sglang.plugins.module_utils import _toolchain
from helpers import fake_cmake, fake_nvcc, fake_python, fake_toolkit, fixture, read, run


def toolkit_130(root):
    return fake_toolkit(str(root), fixture("nvcc_13.0.88_version.txt"), fixture("nvcc_13.0.88_list_gpu_arch.txt"), 13000)


def test_real_cuda_13_output_from_this_host(tmp_path):
    home = toolkit_130(tmp_path / "cuda-13.0")
    facts = _toolchain.collect_nvcc(run, home, "")
    assert facts["present"] is True
    assert facts["version"] == "13.0.88"
    assert "compute_120" in facts["arch_list"] and "compute_121" in facts["arch_list"]
    assert facts["cudart_version"] == "13.0"
    assert facts["cccl"]["cuda13_layout"] is True
    assert facts["path_nvccs"] == []


def test_cuda_126_cannot_target_sm120_b04(tmp_path):
    home = fake_toolkit(str(tmp_path / "cuda-12.6"), fixture("nvcc_12.6.68_version.txt"),
                        fixture("nvcc_12.6_list_gpu_arch.txt"), 12060, layout="legacy")
    facts = _toolchain.collect_nvcc(run, home, "")
    assert facts["version"] == "12.6.68"
    assert "compute_120" not in facts["arch_list"]
    assert facts["cccl"]["cccl_dir"] is None
    assert facts["cccl"]["cuda13_layout"] is False
    assert os.path.realpath(facts["cccl"]["legacy_dir"]) == os.path.join(home, "targets", "x86_64-linux", "include")


def test_path_shadowing_lists_every_nvcc_in_order_b21(tmp_path):
    home = toolkit_130(tmp_path / "cuda-13.0")
    old = fake_nvcc(str(tmp_path / "usr" / "bin" / "nvcc"), fixture("nvcc_12.6.68_version.txt"),
                    fixture("nvcc_12.6_list_gpu_arch.txt"))
    path_env = os.pathsep.join([os.path.dirname(old), os.path.join(home, "bin")])
    facts = _toolchain.collect_nvcc(run, home, path_env)
    assert [p["version"] for p in facts["path_nvccs"]] == ["12.6.68", "13.0.88"]
    assert facts["path_first"] == old


def test_missing_toolkit_is_reported_not_raised(tmp_path):
    facts = _toolchain.collect_nvcc(run, str(tmp_path / "nowhere"), "")
    assert facts["present"] is False
    assert facts["cccl"] is None


def test_cudart_parse():
    assert _toolchain.parse_cudart_version(read(fixture("cuda_13.0_cuda_runtime_api_excerpt.h"))) == (13, 0)
    assert _toolchain.parse_cudart_version("#define CUDART_VERSION 12080") == (12, 8)
    assert _toolchain.parse_cudart_version("nothing") is None


def test_cmake_candidates_then_path(tmp_path):
    venv_cmake = fake_cmake(str(tmp_path / "venv" / "bin" / "cmake"), fixture("cmake_4.1.2.txt"))
    sys_cmake = fake_cmake(str(tmp_path / "usr" / "bin" / "cmake"), fixture("cmake_3.28.3_ubuntu2404.txt"))
    path_env = os.path.dirname(sys_cmake)
    first = _toolchain.collect_cmake(run, [venv_cmake], path_env)
    assert (first["version"], first["source"]) == ("4.1.2", "candidate")
    fallback = _toolchain.collect_cmake(run, [str(tmp_path / "absent" / "cmake")], path_env)
    assert (fallback["version"], fallback["source"]) == ("3.28.3", "path")
    assert _toolchain.collect_cmake(run, [], "")["error"] == "no cmake found"


def test_cmake_real_output_parses():
    assert _toolchain.parse_cmake_version(read(fixture("cmake_3.25.1_debian12.txt"))) == (3, 25, 1)
    assert _toolchain.parse_cmake_version(read(fixture("h200_cmake_version.txt"))) == (4, 4, 3)


def test_torch_probe_through_fake_python(tmp_path):
    py = fake_python(str(tmp_path / "venv" / "bin" / "python"), fixture("torch_probe_2.12.0.dev20260307_cu130.txt"))
    facts = _toolchain.collect_torch(run, py)
    assert facts["present"] is True
    assert facts["version"] == "2.12.0.dev20260307+cu130"
    assert facts["cuda"] == "13.0"
    assert "sm_120" in facts["arch_list"]


def test_torch_missing_venv(tmp_path):
    facts = _toolchain.collect_torch(run, str(tmp_path / "no" / "python"))
    assert facts["present"] is False
    assert "venv not created yet" in facts["error"]


def test_torch_probe_real_interpreter():
    # The CPU torch of this repository's venv: exercises TORCH_PROBE itself, not a recording.
    import sys
    facts = _toolchain.collect_torch(run, sys.executable)
    try:
        import torch  # noqa: F401
    except ImportError:
        assert facts["present"] is False and "torch not importable" in facts["error"]
    else:
        assert facts["present"] is True
        assert facts["version"] == torch.__version__
        assert facts["cuda"] == torch.version.cuda
