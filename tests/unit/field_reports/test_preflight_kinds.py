"""Field reports part 2 through gpu_facts' collector (fake nvidia-smi, recorded H200 output) and the
``preflight_evaluate`` / ``preflight_nccl_smoke`` filters: MIG, N01, N03, N16, N18, N19, N20."""

import copy
import json
import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES
from ansible_collections.blackwell.sglang.plugins.filter.preflight import preflight_evaluate
from ansible_collections.blackwell.sglang.plugins.filter.preflight_nccl_smoke import preflight_nccl_smoke
from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu


def run(argv):
    """Runner with AnsibleModule.run_command semantics: (rc, stdout, stderr), no shell."""
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    return proc.returncode, proc.stdout, proc.stderr


FR = os.path.join(FIXTURES, "field_reports")
FAKE_SMI = os.path.join(FIXTURES, "nvidia_smi", "fake-nvidia-smi")
RTX = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


def scenario(tmp_path, query, q=None, rc=None, err=None):
    """A fake nvidia-smi directory with recorded answers (see tests/fixtures/nvidia_smi/fake-nvidia-smi)."""
    d = tmp_path / "smi"
    d.mkdir(exist_ok=True)
    shutil.copy(FAKE_SMI, str(d / "nvidia-smi"))
    (d / "query.txt").write_text(query)
    if q is not None:
        (d / "q.txt").write_text(q)
    if rc is not None:
        (d / "query.rc").write_text(str(rc))
    if err is not None:
        (d / "query.err").write_text(err)
    return str(d / "nvidia-smi")


def q_text(gpus, driver="580.126.09"):
    """``nvidia-smi -q`` in the layout of the recorded H200 output (tests/fixtures/field_reports/h200_...)."""
    out = ["", "==============NVSMI LOG==============", "", "Driver Version                            : %s" % driver,
           "CUDA Version                              : 13.0", "", "Attached GPUs                             : %d"
           % len(gpus)]
    for bus, mig in gpus:
        out += ["GPU %s" % bus, "    Product Name                          : %s" % RTX,
                "    MIG Mode", "        Current                           : %s" % mig,
                "        Pending                           : %s" % mig,
                "    VBIOS Version                         : 98.02.2E.00.02",
                "    GSP Firmware Version                  : %s" % driver,
                "    Compute Mode                          : Default"]
    return "\n".join(out) + "\n"


def query_line(index, bus, driver="580.126.09", name=RTX, cc="12.0", mem="97887"):
    return "%d, %s, GPU-%d, %s, %s, %s, 1, %s, Enabled\n" % (index, name, index, bus, cc, mem, driver)


def evaluate(gpu, tool=None, host=None, **config):
    cfg = {"target_compute_capability": "12.0", "tp_size": 1, "distribution": {
        "system": "Linux", "distribution": "Ubuntu", "version": "24.04", "architecture": "x86_64"}}
    cfg.update(config)
    result = preflight_evaluate(gpu, tool or {}, host or {}, cfg)
    return result, dict((c["name"], c) for c in result["checks"])


# --- MIG (first report set: every nvidia-smi state) ----------------------------------------------------------------

def test_recorded_h200_q_output_parses_mig_gsp_vbios(tmp_path):
    with open(os.path.join(FR, "h200_nvidia_smi_q_driver580.txt")) as handle:
        q = handle.read()
    path = scenario(tmp_path, "0, NVIDIA H200, GPU-x, 00000000:00:06.0, 9.0, 143771, 0, 580.159.04, Enabled\n", q)
    gpu = _gpu.collect(run, path, sysfs_root="/nonexistent", proc_root=str(tmp_path), pcie=False)["gpus"][0]
    assert (gpu["mig_mode"], gpu["gsp_firmware_version"], gpu["vbios_version"]) == \
        ("Disabled", "580.159.04", "96.00.A5.00.1A")


def test_mig_gpu_is_left_out_of_the_tp_set_and_named(tmp_path):
    path = scenario(tmp_path, query_line(0, "00000000:01:00.0") + query_line(1, "00000000:21:00.0") +
                    query_line(2, "00000000:41:00.0"),
                    q_text([("00000000:01:00.0", "Enabled"), ("00000000:21:00.0", "Disabled"),
                            ("00000000:41:00.0", "Disabled")]))
    gpu = _gpu.collect(run, path, sysfs_root="/nonexistent", proc_root=str(tmp_path), topology=False, pcie=False)
    assert [g["mig_mode"] for g in gpu["gpus"]] == ["Enabled", "Disabled", "Disabled"]
    result, checks = evaluate(gpu, tp_size=2)
    assert checks["mig_mode"]["status"] == "warn"
    assert "GPU 0" in checks["mig_mode"]["message"] and "0000:01:00.0" in checks["mig_mode"]["message"]
    assert checks["tensor_parallel_gpus"]["status"] == "pass"
    assert checks["gpu_compute_capability"]["message"].startswith("tensor-parallel GPUs 1, 2 ")
    # the service sees only the chosen GPUs (SGLang uses CUDA devices 0..TP-1)
    assert result["service_env"]["CUDA_VISIBLE_DEVICES"] == "GPU-1,GPU-2"
    # TP 3 needs the MIG GPU: refused, and the message names why
    _result, checks = evaluate(gpu, tp_size=3)
    assert checks["tensor_parallel_gpus"]["status"] == "fail"
    assert "MIG mode excludes GPU 0" in checks["tensor_parallel_gpus"]["message"]
    # explicit indices naming the MIG GPU: refused
    _result, checks = evaluate(gpu, tp_size=2, gpu_indices=[0, 1])
    assert checks["mig_mode"]["status"] == "fail"


def test_mig_pending_counts_as_mig():
    gpu = {"gpu_count": 2, "driver_version": "580.126.09", "gpus": [
        {"index": 0, "name": RTX, "compute_cap": "12.0", "mig_mode": "Disabled", "mig_mode_pending": "Enabled"},
        {"index": 1, "name": RTX, "compute_cap": "12.0", "mig_mode": "Disabled", "mig_mode_pending": "Disabled"}]}
    _result, checks = evaluate(gpu, tp_size=2)
    assert checks["mig_mode"]["status"] == "warn" and "pending Enabled" in checks["mig_mode"]["message"]
    assert checks["tensor_parallel_gpus"]["status"] == "fail"


# --- N03 and N20: nvidia-smi failures decoded with the kernel log --------------------------------------------------

N03_KERNEL = ["NVRM: Xid (PCI:0000:01:00): 119, pid=6211, name=nvidia-smi, Timeout after 45s of waiting for RPC "
              "response from GPU0 GSP! Expected function 103 (GSP_RM_ALLOC) sequence 15421 (0x0 0x78)."]
SMI_FAILED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
              "NVIDIA driver is installed and running.\n")


def test_n03_nvidia_smi_failure_after_xid_is_a_wedge_not_driver_not_loaded(tmp_path):
    path = scenario(tmp_path, SMI_FAILED, rc=9)
    plain = _gpu.collect(run, path, sysfs_root="/nonexistent", proc_root=str(tmp_path))
    assert plain["error"] == "driver_not_loaded"
    facts = _gpu.collect(run, path, sysfs_root="/nonexistent", proc_root=str(tmp_path),
                         kernel_log=lambda: N03_KERNEL)
    assert facts["error"] == "gpu_wedged_xid_119" and facts["reboot_required"] is True
    _result, checks = evaluate(facts)
    assert checks["nvidia_driver"]["status"] == "fail"
    assert "not a software configuration problem" in checks["nvidia_driver"]["remedy"]
    assert _result["reboot_required"] is True


def test_n03_variant_device_handle_lost(tmp_path):
    path = scenario(tmp_path, "Unable to determine the device handle for GPU0000:01:00.0: Unknown Error\n", rc=15)
    facts = _gpu.collect(run, path, sysfs_root="/nonexistent", proc_root=str(tmp_path))
    assert facts["error"] == "gpu_lost" and facts["reboot_required"] is True


def test_n03_known_bad_driver_is_named_with_vbios_and_gsp(tmp_path):
    path = scenario(tmp_path, query_line(0, "00000000:01:00.0", driver="595.71.05"),
                    q_text([("00000000:01:00.0", "[N/A]")], driver="595.71.05"))
    facts = _gpu.collect(run, path, sysfs_root="/nonexistent", proc_root=str(tmp_path), pcie=False)
    _result, checks = evaluate(facts)
    check = checks["driver_known_issues"]
    assert check["status"] == "warn"
    assert "open-gpu-kernel-modules#1159" in check["message"] and "VBIOS 98.02.2E.00.02" in check["message"]
    # a branch key and the fail policy
    _result, checks = evaluate(facts, known_bad_drivers={"595": "branch under investigation"},
                               known_bad_driver_status="fail")
    assert checks["driver_known_issues"]["status"] == "fail"
    _result, checks = evaluate(facts, known_bad_drivers={"590": "other branch"})
    assert checks["driver_known_issues"]["status"] == "pass"


N20_KERNEL = ["kernel: NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0",
              "kernel: NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)",
              "kernel: NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:2b85)"]


def _sysfs_gpu(root, bus="0000:01:00.0", device="0x2b85"):
    d = root / "bus" / "pci" / "devices" / bus
    d.mkdir(parents=True)
    (d / "vendor").write_text("0x10de\n")
    (d / "device").write_text(device + "\n")
    (d / "class").write_text("0x030000\n")
    return str(root)


def _proc_version(root, text):
    d = root / "driver" / "nvidia"
    d.mkdir(parents=True)
    (d / "version").write_text(text)
    return str(root)


def test_n20_no_devices_with_rminit_code_is_bios_bar(tmp_path):
    path = scenario(tmp_path, "No devices were found\n", rc=6)
    sysfs = _sysfs_gpu(tmp_path / "sys")
    facts = _gpu.collect(run, path, sysfs_root=sysfs, proc_root=str(tmp_path), kernel_log=lambda: N20_KERNEL)
    assert facts["error"] == "bios_bar_disabled"
    assert facts["pci_devices"] == [{"bus_id": "0000:01:00.0", "device_id": "10de:2b85"}]
    _result, checks = evaluate(facts)
    assert "Above 4G Decoding" in checks["nvidia_driver"]["remedy"]
    # another code: adapter init failed, a different remedy
    other = _gpu.collect(run, path, sysfs_root=sysfs, proc_root=str(tmp_path),
                         kernel_log=lambda: ["NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x61:0x0:1862)"])
    assert other["error"] == "gpu_init_failed"


@pytest.mark.parametrize("text,device,expect", [
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.51.03  Release Build  (<host>)\n", "0x2b85", "pass"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.51.03  Release Build  (<host>)\n", "0x2b85", "fail"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.51.03  Release Build  (<host>)\n", "0x2d04", "fail"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Release Build  (<host>)\n", "0x2684", "pass"),
])
def test_n20_module_flavor_on_blackwell(tmp_path, text, device, expect):
    path = scenario(tmp_path, "No devices were found\n", rc=6)
    facts = _gpu.collect(run, path, sysfs_root=_sysfs_gpu(tmp_path / "sys", device=device),
                         proc_root=_proc_version(tmp_path / "proc", text))
    _result, checks = evaluate(facts, require_gpu=False)
    assert checks["kernel_module_flavor"]["status"] == expect, checks["kernel_module_flavor"]
    if expect == "fail":
        assert checks["kernel_module_flavor"]["message"].startswith("proprietary_module_on_blackwell")


def test_n20_recorded_h200_open_module():
    with open(os.path.join(FR, "h200_proc_driver_nvidia_version.txt")) as handle:
        assert _gpu.parse_kernel_module(handle.read())["open"] is True
    assert _gpu.parse_kernel_module("", "license:        Dual MIT/GPL\n")["open"] is True
    assert _gpu.parse_kernel_module("", "license:        NVIDIA\n")["open"] is False


# --- N01: TRITON_PTXAS_PATH ---------------------------------------------------------------------------------------

PTXAS_12_4 = "ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 12.4, V12.4.131\n"


def _toolkit(tmp_path, ptxas=True):
    home = tmp_path / "cuda-13.0"
    (home / "bin").mkdir(parents=True)
    if ptxas:
        (home / "bin" / "ptxas").write_text("#!/bin/sh\n")
    return {"nvcc": {"present": True, "cuda_home": str(home), "nvcc": str(home / "bin" / "nvcc"), "version": "13.0"},
            "torch": {"present": True, "version": "2.10.0.dev20251024+cu130", "cuda": "13.0",
                      "triton": {"distributions": {"pytorch-triton": "3.5.0+git7416ffcb"}, "torch_requires": [],
                                 "bundled_ptxas": "<venv>/triton/backends/nvidia/bin/ptxas",
                                 "bundled_ptxas_version": PTXAS_12_4}}}


@pytest.mark.parametrize("cc", ["12.0", "12.1"])
def test_n01_service_gets_the_toolkit_ptxas(tmp_path, cc):
    tool = _toolkit(tmp_path)
    result, checks = evaluate({}, tool, target_compute_capability=cc, require_gpu=False)
    assert result["service_env"]["TRITON_PTXAS_PATH"] == os.path.join(tool["nvcc"]["cuda_home"], "bin", "ptxas")
    assert checks["triton_ptxas"]["status"] == "warn"
    assert "is not defined for option 'gpu-name'" in checks["triton_ptxas"]["message"]


def test_n01_without_the_toolkit_ptxas_fails(tmp_path):
    result, checks = evaluate({}, _toolkit(tmp_path, ptxas=False), target_compute_capability="12.1",
                              require_gpu=False)
    assert "TRITON_PTXAS_PATH" not in result["service_env"]
    assert checks["triton_ptxas"]["status"] == "fail"
    assert "sm_121a" in checks["triton_ptxas"]["message"]


def test_n01_new_enough_bundled_ptxas_passes(tmp_path):
    tool = _toolkit(tmp_path, ptxas=False)
    tool["torch"]["triton"]["bundled_ptxas_version"] = "Cuda compilation tools, release 12.9, V12.9.86\n"
    _result, checks = evaluate({}, tool, target_compute_capability="12.1", require_gpu=False)
    assert checks["triton_ptxas"]["status"] == "pass"


# --- N16: two triton distributions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dists,requires,expect,word", [
    ({"pytorch-triton": "3.6.0+git5261b273", "triton": "3.5.1"}, [], "fail", "triton_dual_install"),
    ({"pytorch-triton": "3.6.0+git5261b273", "triton-nightly": "3.0.0.post20240716"}, [], "fail", "triton_dual_install"),
    ({"triton": "3.5.1"}, ['triton==3.6.0; platform_system == "Linux"'], "fail", "triton_mismatch"),
    ({"triton": "3.6.0"}, ['triton==3.6.0; platform_system == "Linux"'], "pass", "owned by triton 3.6.0"),
    ({"pytorch-triton": "3.6.0+git5261b273"}, ["pytorch-triton==3.6.0+git5261b273; platform_system == \"Linux\""],
     "pass", "pytorch-triton"),
])
def test_n16_triton_owners(tmp_path, dists, requires, expect, word):
    tool = _toolkit(tmp_path)
    tool["torch"]["triton"].update(distributions=dists, torch_requires=requires)
    _result, checks = evaluate({}, tool, require_gpu=False)
    assert checks["triton_distribution"]["status"] == expect
    assert word in checks["triton_distribution"]["message"]


# --- N18: GB10 unified memory ----------------------------------------------------------------------------------------

GB10 = {"gpu_count": 1, "driver_version": "580.95.05", "gpus": [
    {"index": 0, "name": "NVIDIA GB10", "compute_cap": "12.1", "memory_total_mib": None, "memory_used_mib": None}]}
MEMINFO = {"memory": {"mem_total_bytes": 127607296 * 1024, "mem_available_bytes": 107020288 * 1024}}


def test_n18_fraction_from_memavailable():
    _result, checks = evaluate(GB10, host=MEMINFO, target_compute_capability="12.1", service_mem_fraction_static=0.90)
    check = checks["gb10_memory_budget"]
    assert check["status"] == "fail" and check["message"].startswith("gb10_fraction_exceeds_available")
    # (102.06 GiB available - 16 GiB headroom) / 121.70 GiB total = 0.707 -> 0.70
    assert "<= 0.70" in check["remedy"]
    result, checks = evaluate(GB10, host=MEMINFO, target_compute_capability="12.1")
    assert result["service_args"] == ["--mem-fraction-static", "0.70"]
    _result, checks = evaluate(GB10, host=MEMINFO, target_compute_capability="12.1", service_mem_fraction_static=0.6)
    assert checks["gb10_memory_budget"]["status"] == "pass"


def test_n18_discrete_card_is_not_checked():
    discrete = copy.deepcopy(GB10)
    discrete["gpus"][0].update(name=RTX, compute_cap="12.0", memory_total_mib=97887)
    result, checks = evaluate(discrete, host=MEMINFO, service_mem_fraction_static=0.90)
    assert checks["gb10_memory_budget"]["status"] == "pass"
    assert result["service_args"] == []


def test_n18_nvidia_smi_na_memory_parses_as_none():
    gpus = _gpu.parse_query_csv("0, NVIDIA GB10, GPU-x, 0000000F:01:00.0, 12.1, [N/A], [N/A], 580.95.05, Enabled\n")
    assert gpus[0]["memory_total_mib"] is None and gpus[0]["compute_cap"] == "12.1"


# --- N19: NCCL floor and the size sweep -------------------------------------------------------------------------------

SMOKE_CRASH = {"verdict": "error", "nccl": "2.26.2", "sizes": [
    {"bytes": 262144, "ok": True},
    {"bytes": 524288, "ok": False, "error": "CUDA error: an illegal memory access was encountered"}]}


def test_n19_smoke_sweep_crash():
    check = preflight_nccl_smoke({"rc": 1, "stdout": "NCCL INFO NCCL version 2.26.2+cuda12.2\n" +
                                  json.dumps(SMOKE_CRASH)}, {"NCCL_P2P_DISABLE": "1"})
    assert check["status"] == "fail" and check["message"].startswith("nccl_collective_crash")
    assert "524288" in check["message"] and "2.26.2" in check["message"]
    assert "upgrade NCCL" in check["remedy"]
    ok = preflight_nccl_smoke({"rc": 0, "stdout": json.dumps({"verdict": "ok", "nccl": "2.31.2", "gpus": 2})})
    assert ok["status"] == "pass"


@pytest.mark.parametrize("version,floor,tp,expect", [
    ("2.26.2", "2.27", 2, "fail"), ("2.27.5", "2.27", 2, "pass"), ("2.31.2", "2.27", 2, "pass"),
    ("2.26.2", "2.27", 1, "warn"), ("2.26.2", "", 2, "pass"),
])
def test_n19_nccl_floor(version, floor, tp, expect):
    tool = {"torch": {"present": True, "version": "2.7.0+cu128", "cuda": "12.8", "nccl": version}}
    _result, checks = evaluate({}, tool, require_gpu=False, tp_size=tp, nccl_min_version=floor)
    assert checks["nccl_version"]["status"] == expect


def test_n19_recorded_sweep_on_h200_passes():
    """roles/preflight/files/nccl_allreduce_smoke.py --gpus 1 run on an H200 (torch 2.11.0+cu130, NCCL 2.28.9):
    the size sweep 256 KiB .. 64 MiB is recorded per rank and merged."""
    with open(os.path.join(FR, "h200_nccl_sweep_1gpu.json")) as handle:
        text = handle.read()
    recorded = json.loads(text)
    assert [s["bytes"] for s in recorded["sizes"]] == [262144, 524288, 1048576, 4194304, 16777216, 67108864]
    check = preflight_nccl_smoke({"rc": 0, "stdout": text})
    assert check["status"] == "pass" and "NCCL 2.28.9" in check["message"]
