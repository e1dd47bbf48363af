"""The preflight checks (module_utils._preflight) on recorded facts: field reports and the H200 recording."""

import copy
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu, _preflight, _toolchain
from ansible_collections.blackwell.sglang.plugins.module_utils._build_sizing import build_parallelism
from helpers import NVSMI, fake_cmake, fake_nvcc, fake_python, fake_toolkit, fixture, load_json, read, run

GIB = 1024 ** 3
UBUNTU_2404 = {"system": "Linux", "distribution": "Ubuntu", "version": "24.04", "major_version": "24",
               "architecture": "x86_64", "glibc": "2.39"}


def by_name(result):
    return dict((c["name"], c) for c in result["checks"])


def host(**over):
    facts = {
        "shm": {"path": "/dev/shm", "size_bytes": 64 * GIB, "free_bytes": 64 * GIB, "size_gib": 64.0},
        "disk": {"venv": {"path": "/opt/sglang/venv", "checked_path": "/opt", "free_bytes": 500 * 10 ** 9,
                          "total_bytes": 10 ** 12, "free_gib": 465.7, "device": 1}},
        "memory": {"mem_total_bytes": 256 * GIB, "mem_available_bytes": 200 * GIB, "mem_available_mib": 200 * 1024},
        "cpus": 32,
        "proxy": {"proxies": {}, "no_proxy": [], "sources": {}},
        "glibc": "2.39",
        "kernel": {"release": "6.8.0-60-generic", "machine": "x86_64", "headers_present": True},
        "paths": {},
    }
    facts.update(over)
    return facts


@pytest.fixture()
def good_tool(tmp_path):
    """CUDA 13.0 (real recorded nvcc output), cmake 3.31.6 in the venv, torch nightly cu130 with sm_120."""
    home = fake_toolkit(str(tmp_path / "cuda-13.0"), fixture("nvcc_13.0.88_version.txt"),
                        fixture("nvcc_13.0.88_list_gpu_arch.txt"), 13000)
    cmake = fake_cmake(str(tmp_path / "venv" / "bin" / "cmake"), fixture("cmake_3.31.6.txt"))
    py = fake_python(str(tmp_path / "venv" / "bin" / "python"), fixture("torch_probe_2.12.0.dev20260307_cu130.txt"))
    return {"nvcc": _toolchain.collect_nvcc(run, home, ""), "cmake": _toolchain.collect_cmake(run, [cmake], ""),
            "torch": _toolchain.collect_torch(run, py), "_root": str(tmp_path)}


def gpu_of(scenario, **kw):
    return _gpu.collect(run, os.path.join(NVSMI, scenario, "nvidia-smi"), sysfs_root="/nonexistent", **kw)


def cfg(**over):
    base = {"distribution": dict(UBUNTU_2404), "cuda_install_method": "apt"}
    base.update(over)
    return base


# --- the H200 recording ------------------------------------------------------------------------------------------

def test_h200_recording_says_exactly_why_it_is_not_an_sm120_target():
    dump = load_json(fixture("h200_preflight_tp1.json"))
    result = _preflight.evaluate(dump["preflight_gpu"], dump["preflight_toolchain"], dump["preflight_host"],
                                 cfg(cuda_install_method="existing"))
    checks = by_name(result)
    cc = checks["gpu_compute_capability"]
    assert cc["status"] == "fail"
    assert "GPU 0 (NVIDIA H200, 0000:00:06.0) has compute capability 9.0, not 12.0" in cc["message"]
    assert "not an SM120 target" in cc["message"]
    assert checks["tensor_parallel_gpus"]["status"] == "fail"
    assert result["failed"] == ["gpu_compute_capability", "tensor_parallel_gpus"]
    assert result["has_target_gpu"] is False
    # the rest of that host is fine: driver 580 for CUDA 13.0, nvcc 13.0.88 can build sm_120a, torch cu130 has sm_120
    for name in ("driver_cuda", "nvcc_target_arch", "cuda_headers_match", "torch_cuda_major", "torch_arch_list",
                 "cmake"):
        assert checks[name]["status"] == "pass", checks[name]
    # the run on the H200 itself produced the same verdicts
    recorded = by_name({"checks": dump["preflight_checks"]})
    assert recorded["gpu_compute_capability"]["message"] == cc["message"]
    assert dump["preflight_has_target_gpu"] is False


def test_h200_failure_report_lists_every_failure_with_remedy():
    text = read(fixture("h200_preflight_tp1_playbook.txt"))
    assert "2 preflight check(s) failed:" in text
    assert "- gpu_compute_capability: GPU 0 (NVIDIA H200, 0000:00:06.0) has compute capability 9.0, not 12.0" in text
    assert "remedy: run on a Blackwell SM120 host" in text


def test_h200_as_target_90_with_tp2_fails_only_on_gpu_count():
    dump = load_json(fixture("h200_preflight_tp2_cc90.json"))
    assert [c["name"] for c in dump["preflight_checks"] if c["status"] == "fail"] == ["tensor_parallel_gpus"]


# --- sandbox / no GPU --------------------------------------------------------------------------------------------

def test_no_gpu_not_required_has_no_gpu_failures(good_tool):
    result = _preflight.evaluate(_gpu.collect(run, None), good_tool, host(), cfg(require_gpu=False))
    checks = by_name(result)
    assert checks["nvidia_driver"]["status"] == "warn"
    assert "preflight_require_gpu is false" in checks["nvidia_driver"]["message"]
    for name in ("driver_cuda", "gpu_compute_capability", "tensor_parallel_gpus", "p2p_topology"):
        assert checks[name]["status"] == "skip"
    assert result["failed"] == []
    assert result["has_target_gpu"] is False


def test_no_gpu_required_fails_with_remedy(good_tool):
    result = _preflight.evaluate(_gpu.collect(run, None), good_tool, host(), cfg())
    check = by_name(result)["nvidia_driver"]
    assert check["status"] == "fail"
    assert "580" in check["remedy"]


def test_nvml_mismatch_is_reboot_pending_b31(good_tool):
    result = _preflight.evaluate(gpu_of("nvml_mismatch_b31"), good_tool, host(), cfg(local_connection=True))
    check = by_name(result)["reboot_pending"]
    assert check["status"] == "fail"
    assert "control node (ansible_connection=local) is never rebooted" in check["message"]
    assert result["reboot_required"] is True


# --- driver / compute capability / TP ----------------------------------------------------------------------------

def test_b28_rtx_pro_pair_passes_cc_and_gets_p2p_disable(good_tool):
    gpu = gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None)
    gpu["pcie"]["0000:01:00.0"]["acs_redirect_bridges"] = ["0000:00:01.1"]  # as parsed from the B28 lspci fixture
    result = _preflight.evaluate(gpu, good_tool, host(), cfg(tp_size=2))
    checks = by_name(result)
    assert checks["gpu_compute_capability"]["status"] == "pass"
    assert checks["driver_cuda"]["status"] == "pass"
    assert checks["p2p_topology"]["status"] == "warn"
    assert "acs_enabled" in checks["p2p_topology"]["message"]
    assert result["service_env"] == {"NCCL_P2P_DISABLE": "1"}
    assert result["service_args"] == []
    assert result["has_target_gpu"] is True
    assert result["failed"] == []


def test_b28_iommu_translated_from_group_type(good_tool):
    gpu = gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None)
    for bus in gpu["pcie"]:
        gpu["pcie"][bus].update(acs_redirect_bridges=[], iommu_group_type="DMA-FQ")
    result = _preflight.evaluate(gpu, good_tool, host(), cfg(tp_size=2))
    assert "iommu_translated (IOMMU group type DMA-FQ)" in by_name(result)["p2p_topology"]["message"]
    assert result["service_env"]["NCCL_P2P_DISABLE"] == "1"


def test_b28_opt_out_keeps_p2p(good_tool):
    gpu = gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None)
    gpu["pcie"]["0000:01:00.0"]["acs_redirect_bridges"] = ["0000:00:01.1"]
    result = _preflight.evaluate(gpu, good_tool, host(), cfg(tp_size=2, p2p_opt_out=True))
    assert "NCCL_P2P_DISABLE" not in result["service_env"]
    assert by_name(result)["p2p_topology"]["status"] == "warn"


def test_pcie_without_known_risk_but_unknown_acs_warns(good_tool):
    gpu = gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None)
    result = _preflight.evaluate(gpu, good_tool, host(), cfg(tp_size=2))
    check = by_name(result)["p2p_topology"]
    assert check["status"] == "warn" and "ACS state unknown" in check["message"]
    assert result["service_env"] == {}


def test_nvlink_pair_passes(good_tool):
    gpu = gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None)
    gpu["topology"] = _gpu.parse_topology("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n")
    assert by_name(_preflight.evaluate(gpu, good_tool, host(), cfg(tp_size=2)))["p2p_topology"]["status"] == "pass"


def test_b29_geforce_tp2_disables_custom_all_reduce(good_tool):
    result = _preflight.evaluate(gpu_of("geforce_rtx5090_x2_b29", lspci=None), good_tool, host(), cfg(tp_size=2))
    assert result["service_args"] == ["--disable-custom-all-reduce"]
    assert "p2p_read_not_ok" in by_name(result)["p2p_topology"]["message"]
    assert result["service_env"]["NCCL_P2P_DISABLE"] == "1"


def test_geforce_tp1_gets_no_extra_args(good_tool):
    result = _preflight.evaluate(gpu_of("geforce_rtx5090_x2_b29", lspci=None), good_tool, host(), cfg(tp_size=1))
    assert result["service_args"] == []


def test_tp_larger_than_target_gpus(good_tool):
    result = _preflight.evaluate(gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None), good_tool, host(), cfg(tp_size=4))
    check = by_name(result)["tensor_parallel_gpus"]
    assert check["status"] == "fail" and "TP 4 > 2 usable GPU(s)" in check["message"]


def test_gpu_indices_must_exist(good_tool):
    result = _preflight.evaluate(gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None), good_tool, host(),
                                 cfg(tp_size=2, gpu_indices=[0, 5]))
    assert "do not exist" in by_name(result)["tensor_parallel_gpus"]["message"]


def test_compute_cap_unavailable_is_not_silently_ok(good_tool):
    result = _preflight.evaluate(gpu_of("fields_unavailable", pcie=False), good_tool, host(), cfg())
    check = by_name(result)["gpu_compute_capability"]
    assert check["status"] == "fail" and "not reported" in check["message"]


@pytest.mark.parametrize("driver,cuda_drv,status", [("575.57.08", "12.9", "fail"), ("580.95.05", "13.0", "pass")])
def test_driver_for_cuda_13(good_tool, driver, cuda_drv, status):
    gpu = gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None)
    gpu.update(driver_version=driver, cuda_driver_version=cuda_drv)
    assert by_name(_preflight.evaluate(gpu, good_tool, host(), cfg()))["driver_cuda"]["status"] == status


# --- toolchain ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version_file,installed_by_build,policy_min,status", [
    ("cmake_3.28.3_ubuntu2404.txt", False, "3.5", "fail"),   # B01
    ("cmake_3.31.6.txt", False, "3.5", "pass"),
    ("cmake_4.1.2.txt", False, "3.5", "pass"),               # B02 with CMAKE_POLICY_VERSION_MINIMUM
    ("cmake_4.1.2.txt", False, "", "fail"),                  # B02 without it
])
def test_cmake_window(tmp_path, good_tool, version_file, installed_by_build, policy_min, status):
    tool = copy.deepcopy(good_tool)
    tool["cmake"] = _toolchain.collect_cmake(run, [fake_cmake(str(tmp_path / "c" / "cmake"), fixture(version_file))], "")
    result = _preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(),
                                 cfg(cmake_installed_by_build=installed_by_build, cmake_policy_version_minimum=policy_min))
    check = by_name(result)["cmake"]
    assert check["status"] == status, check
    if version_file.startswith("cmake_3.28"):
        assert "CMP0169" in check["message"] and "CMP0177" in check["message"]


def test_old_cmake_on_path_warns_when_build_installs_its_own(tmp_path, good_tool):
    tool = copy.deepcopy(good_tool)
    sys_cmake = fake_cmake(str(tmp_path / "usr" / "bin" / "cmake"), fixture("cmake_3.25.1_debian12.txt"))
    tool["cmake"] = _toolchain.collect_cmake(run, [str(tmp_path / "venv-absent" / "cmake")], os.path.dirname(sys_cmake))
    check = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(), cfg()))["cmake"]
    assert check["status"] == "warn"


def test_patched_policy_guards_accept_3_28(tmp_path, good_tool):
    tool = copy.deepcopy(good_tool)
    tool["cmake"] = _toolchain.collect_cmake(
        run, [fake_cmake(str(tmp_path / "c" / "cmake"), fixture("cmake_3.28.3_ubuntu2404.txt"))], "")
    check = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(),
                                        cfg(cmake_policy_guards_patched=True)))["cmake"]
    assert check["status"] == "warn"


def test_nvcc_126_cannot_target_sm120a_b04(tmp_path, good_tool):
    tool = copy.deepcopy(good_tool)
    home = fake_toolkit(str(tmp_path / "cuda-12.6"), fixture("nvcc_12.6.68_version.txt"),
                        fixture("nvcc_12.6_list_gpu_arch.txt"), 12060, layout="legacy")
    tool["nvcc"] = _toolchain.collect_nvcc(run, home, "")
    checks = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(), cfg(cuda_install_method="existing")))
    assert checks["nvcc_target_arch"]["status"] == "fail"
    assert "Unsupported gpu architecture 'compute_120a'" in checks["nvcc_target_arch"]["message"]
    assert checks["nvcc_version"]["status"] == "fail"
    assert checks["torch_cuda_major"]["status"] == "fail"  # torch cu130 vs toolkit 12.6


def test_nvcc_runtime_header_skew_b08(tmp_path, good_tool):
    tool = copy.deepcopy(good_tool)
    home = fake_toolkit(str(tmp_path / "pip-cu13"), fixture("nvcc_13.2.78_version.txt"),
                        fixture("nvcc_13.0.88_list_gpu_arch.txt"), 13000)
    tool["nvcc"] = _toolchain.collect_nvcc(run, home, "")
    check = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(), cfg()))["cuda_headers_match"]
    assert check["status"] == "fail"
    assert "13.2" in check["message"] and "CUDART 13.0" in check["message"]
    assert "==13.0.*" in check["remedy"]


def test_shadowing_nvcc_on_path_warns_b21(tmp_path, good_tool):
    tool = copy.deepcopy(good_tool)
    old = fake_nvcc(str(tmp_path / "usr" / "bin" / "nvcc"), fixture("nvcc_12.6.68_version.txt"),
                    fixture("nvcc_12.6_list_gpu_arch.txt"))
    home = tool["nvcc"]["cuda_home"]
    tool["nvcc"] = _toolchain.collect_nvcc(run, home, os.pathsep.join([os.path.dirname(old), os.path.join(home, "bin")]))
    check = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(), cfg()))["nvcc_path_shadowing"]
    assert check["status"] == "warn"
    assert "12.6.68" in check["message"] and "shadows" in check["message"]


def test_not_installed_yet_skips_unless_existing(tmp_path, good_tool):
    tool = copy.deepcopy(good_tool)
    tool["nvcc"] = _toolchain.collect_nvcc(run, str(tmp_path / "cuda-13.0-not-yet"), "")
    checks = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(), cfg()))
    assert checks["nvcc_target_arch"]["status"] == "skip"
    checks = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(), cfg(cuda_install_method="existing")))
    assert checks["nvcc_version"]["status"] == "fail"


def test_missing_cccl_headers_on_cuda13_fail(tmp_path, good_tool):
    tool = copy.deepcopy(good_tool)
    home = fake_toolkit(str(tmp_path / "cuda"), fixture("nvcc_13.0.88_version.txt"),
                        fixture("nvcc_13.0.88_list_gpu_arch.txt"), 13000, layout="none")
    tool["nvcc"] = _toolchain.collect_nvcc(run, home, "")
    assert by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(), cfg()))["cuda_cccl_layout"][
        "status"] == "fail"


# --- torch (B14, B20) --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("probe,version_status,cuda_status,arch_status", [
    ("torch_probe_2.12.0.dev20260307_cu130.txt", "pass", "pass", "pass"),
    ("torch_probe_source_build.txt", "pass", "pass", "pass"),
    ("torch_probe_2.7.0_cu126_no_sm120.txt", "pass", "fail", "fail"),
    ("torch_probe_2.13.0_cpu.txt", "pass", "fail", "fail"),
    ("torch_probe_not_pep440.txt", "fail", "fail", "fail"),
])
def test_torch_checks(tmp_path, good_tool, probe, version_status, cuda_status, arch_status):
    tool = copy.deepcopy(good_tool)
    tool["torch"] = _toolchain.collect_torch(run, fake_python(str(tmp_path / "py" / "python"), fixture(probe)))
    checks = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), tool, host(), cfg()))
    assert (checks["torch_version"]["status"], checks["torch_cuda_major"]["status"],
            checks["torch_arch_list"]["status"]) == (version_status, cuda_status, arch_status)


def test_nightly_is_described_as_a_2_12_nightly_for_cuda_13(good_tool):
    check = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, host(), cfg()))["torch_version"]
    assert "2.12 nightly (dev 20260307) for CUDA 13.0" in check["message"]


def test_sm_121_gb10_is_covered_by_sm_120_with_pass(good_tool):
    gpu = gpu_of("h200_sm90_driver580")
    check = by_name(_preflight.evaluate(gpu, good_tool, host(), cfg(target_compute_capability="12.1")))["torch_arch_list"]
    assert check["status"] == "pass" and "sm_120" in check["message"]


# --- host: disk, RAM, shm, proxy, model path, distribution -------------------------------------------------------

def test_build_memory_uses_the_shared_sizing_rule_b05(good_tool):
    h = host(cpus=16, memory={"mem_available_bytes": 61000000 * 1024})
    result = _preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, h, cfg())
    assert result["build_jobs"] == 5 == build_parallelism(16, 61000000 * 1024)["jobs"]
    h = host(cpus=20, memory={"mem_available_bytes": 118566368 * 1024})
    assert _preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, h, cfg())["build_jobs"] == 12


def test_build_memory_too_small_for_one_job(good_tool):
    h = host(cpus=2, memory={"mem_available_bytes": 20 * GIB})
    check = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, h, cfg()))["build_memory"]
    assert check["status"] == "fail" and "24.0 GiB needed" in check["message"]


def test_disk_too_small(good_tool):
    h = host(disk={"venv": {"path": "/opt/sglang/venv", "checked_path": "/", "free_bytes": 20 * 10 ** 9,
                            "total_bytes": 10 ** 11, "free_gib": 18.6, "device": 7}})
    check = by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, h, cfg()))["disk_space"]
    assert check["status"] == "fail" and "20.0 GB free < 60 GB" in check["message"]


def test_shm_docker_default_with_tp2_fails_b27(good_tool):
    h = host(shm={"path": "/dev/shm", "size_bytes": 65536 * 1024, "free_bytes": 65536 * 1024, "size_gib": 0.06})
    result = _preflight.evaluate(gpu_of("rtx_pro_6000_x2_pcie_b28", lspci=None), good_tool, h, cfg(tp_size=2))
    check = by_name(result)["shm_size"]
    assert check["status"] == "fail" and "No space left on device" in check["message"]
    assert by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, h, cfg(tp_size=1)))["shm_size"][
        "status"] == "pass"


def test_proxy_gets_loopback_no_proxy_b24(good_tool):
    h = host(proxy={"proxies": {"http_proxy": "http://proxy:3128"}, "no_proxy": ["localhost", "127.0.0.1"],
                    "sources": {"http_proxy": "env"}})
    result = _preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, h, cfg(extra_no_proxy=["10.0.0.5"]))
    assert result["service_env"]["NO_PROXY"] == "localhost,127.0.0.1,0.0.0.0,::1,10.0.0.5"
    assert result["service_env"]["no_proxy"] == result["service_env"]["NO_PROXY"]
    assert by_name(result)["proxy"]["status"] == "pass"


def test_proxy_without_scheme_warns(good_tool):
    h = host(proxy={"proxies": {"HTTPS_PROXY": "proxy:3128"}, "no_proxy": [], "sources": {}})
    assert by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, h, cfg()))["proxy"]["status"] == "warn"


def test_model_path(good_tool):
    missing = host(paths={"model": {"path": "/models/x", "exists": False, "is_dir": False}})
    assert by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, missing,
                                       cfg(model_path="/models/x")))["model_path"]["status"] == "fail"
    assert by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, missing,
                                       cfg(model_path="/models/x", model_path_required=False)))["model_path"][
        "status"] == "warn"
    assert by_name(_preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, host(),
                                       cfg(model_path="nvidia/Qwen3-30B-A3B-NVFP4")))["model_path"]["status"] == "pass"


@pytest.mark.parametrize("dist,method,slug_override,status", [
    (UBUNTU_2404, "apt", "", "pass"),
    ({"distribution": "Debian", "version": "12.11", "major_version": "12", "architecture": "x86_64",
      "glibc": "2.36"}, "apt", "", "pass"),
    ({"distribution": "Pop!_OS", "version": "19.10", "major_version": "19", "architecture": "x86_64",
      "glibc": "2.30"}, "apt", "", "fail"),                                  # B33
    ({"distribution": "Pop!_OS", "version": "22.04", "major_version": "22", "architecture": "x86_64",
      "glibc": "2.35"}, "apt", "ubuntu2204", "pass"),                         # override
    ({"distribution": "Ubuntu", "version": "24.04", "major_version": "24", "architecture": "aarch64",
      "glibc": "2.39"}, "apt", "", "pass"),                                   # sbsa
    ({"distribution": "Debian", "version": "12", "major_version": "12", "architecture": "aarch64",
      "glibc": "2.36"}, "apt", "", "fail"),
    ({"distribution": "Fedora", "version": "41", "major_version": "41", "architecture": "x86_64",
      "glibc": "2.40"}, "pip", "", "pass"),
    ({"distribution": "Alpine", "version": "3.20", "major_version": "3", "architecture": "x86_64",
      "glibc": None}, "pip", "", "fail"),
    ({"distribution": "CentOS", "version": "7", "major_version": "7", "architecture": "x86_64",
      "glibc": "2.17"}, "existing", "", "fail"),
])
def test_distribution(good_tool, dist, method, slug_override, status):
    dist = dict(dist, system="Linux")
    result = _preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, host(),
                                 cfg(distribution=dist, cuda_install_method=method, cuda_repo_slug=slug_override))
    check = by_name(result)["distribution"]
    assert check["status"] == status, check
    if dist["distribution"] == "Pop!_OS" and status == "fail":
        assert "popos1910" in check["message"] and "ubuntu2204/x86_64" in check["message"]
        assert "sglang_stack_cuda_apt_distro_slug" in check["remedy"]


def test_every_failure_is_reported_at_once(good_tool):
    h = host(shm={"path": "/dev/shm", "size_bytes": 64 * 1024 * 1024, "free_bytes": 0, "size_gib": 0.06},
             memory={"mem_available_bytes": 4 * GIB})
    result = _preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, h, cfg(tp_size=2))
    report = _preflight.failure_report(result["checks"])
    for name in result["failed"]:
        assert "- %s: " % name in report
    assert {"gpu_compute_capability", "tensor_parallel_gpus", "build_memory"} <= set(result["failed"])
    assert report.startswith("%d preflight check(s) failed:" % len(result["failed"]))


def test_every_check_has_the_contract_keys(good_tool):
    result = _preflight.evaluate(gpu_of("h200_sm90_driver580"), good_tool, host(), cfg())
    assert len(result["checks"]) == len(set(c["name"] for c in result["checks"]))
    for c in result["checks"]:
        assert set(c) == {"name", "status", "message", "remedy"}
        assert c["status"] in _preflight.STATUSES
        assert c["message"]
        if c["status"] == "fail":
            assert c["remedy"]


def test_h200_pair_recorded_tp2_nvlink_passes_p2p_when_target_is_90(good_tool):
    gpu = gpu_of("h200x2_nvlink_driver580", lspci=None)
    result = _preflight.evaluate(gpu, good_tool, host(), cfg(tp_size=2, target_compute_capability="9.0"))
    checks = by_name(result)
    assert checks["p2p_topology"]["status"] == "pass"
    assert "GPU0-GPU1 NV18" in checks["p2p_topology"]["message"]
    assert result["service_env"] == {} and result["service_args"] == []
    # and for the real target (12.0) the same pair is refused with the reason
    refused = by_name(_preflight.evaluate(gpu, good_tool, host(), cfg(tp_size=2)))
    assert "GPU 1 (NVIDIA H200, 0000:00:07.0) has compute capability 9.0, not 12.0" in refused[
        "gpu_compute_capability"]["message"]


def test_h200_pair_recorded_preflight_run():
    dump = load_json(fixture("h200x2_preflight_tp2_cc90.json"))
    checks = by_name({"checks": dump["preflight_checks"]})
    assert checks["p2p_topology"]["status"] == "pass"
    assert dump["preflight_service_env"] == {}
    assert dump["preflight_build_jobs"] >= 1


def test_nccl_smoke_recorded_on_h200_pair():
    # roles/preflight/files/nccl_allreduce_smoke.py on 2x H200 (NVLink): both verdicts ok; P2P off costs bandwidth.
    on = load_json(fixture("h200x2_nccl_smoke_p2p_on.json"))
    off = load_json(fixture("h200x2_nccl_smoke_p2p_off.json"))
    assert on["verdict"] == off["verdict"] == "ok"
    assert off["nccl_env"]["NCCL_P2P_DISABLE"] == "1" and "NCCL_P2P_DISABLE" not in on["nccl_env"]
    assert min(r["busbw_gbps"] for r in on["ranks"]) > 5 * max(r["busbw_gbps"] for r in off["ranks"])


# --- NCCL all-reduce smoke (B28) ---------------------------------------------------------------------------------

def test_nccl_smoke_recorded_ok_is_pass():
    text = read(fixture("h200x2_nccl_smoke_p2p_off.json"))
    check = _preflight.check_nccl_smoke(0, text, {"NCCL_P2P_DISABLE": "1"})
    assert check["status"] == "pass"
    assert "NCCL_P2P_DISABLE=1" in check["message"] and "NCCL 2.28.9" in check["message"]


def test_nccl_smoke_hang_is_fail_with_reset_advice():
    text = ('{"gpus": 2, "timeout_s": 60.0, "verdict": "nccl_p2p_hang", "hung_ranks": [0, 1], "ranks": []}')
    check = _preflight.check_nccl_smoke(3, "NCCL INFO ...\n" + text, {})
    assert check["status"] == "fail"
    assert check["message"].startswith("nccl_p2p_hang")
    assert "NCCL_P2P_DISABLE=1" in check["remedy"] and "reset or reboot" in check["remedy"]


def test_nccl_smoke_without_output_is_fail():
    assert _preflight.check_nccl_smoke(137, "Killed", {})["status"] == "fail"


def test_nccl_smoke_script_without_gpus_reports_error(tmp_path):
    # Really runs the script with this venv's (CPU) torch: no GPU -> verdict error, exit 1, one JSON line.
    import subprocess
    import sys
    script = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "preflight", "files",
                          "nccl_allreduce_smoke.py")
    proc = subprocess.run([sys.executable, script, "--gpus", "2", "--timeout", "5"], capture_output=True, text=True,
                          check=False, timeout=120)
    check = _preflight.check_nccl_smoke(proc.returncode, proc.stdout, {})
    assert proc.returncode == 1
    assert check["status"] == "fail" and "smoke test error" in check["message"]


def test_role_smoke_task_recorded_on_h200_pair():
    # The whole role on 2x H200 with preflight_nccl_smoke: true and target 9.0 (ansible-playbook -c local there):
    # nothing failed, and the smoke check was appended by the role (tasks/main.yml).
    dump = load_json(fixture("h200x2_preflight_tp2_cc90_nccl_smoke.json"))
    checks = by_name({"checks": dump["preflight_checks"]})
    assert checks["nccl_allreduce_smoke"]["status"] == "pass"
    assert "all_reduce over 2 GPU(s)" in checks["nccl_allreduce_smoke"]["message"]
    assert [c["name"] for c in dump["preflight_checks"] if c["status"] == "fail"] == []
    assert "failed=0" in read(fixture("h200x2_preflight_tp2_cc90_nccl_smoke_playbook.txt"))
