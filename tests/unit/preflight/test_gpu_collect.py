"""_gpu.collect driven through fake nvidia-smi executables (recorded answers) found on PATH."""

import os
import shutil

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu
from helpers import NVSMI, fixture, read, run


def smi(scenario):
    return os.path.join(NVSMI, scenario, "nvidia-smi")


def on_path(scenario, monkeypatch):
    monkeypatch.setenv("PATH", os.path.join(NVSMI, scenario) + os.pathsep + os.environ["PATH"])
    return shutil.which("nvidia-smi")


def test_h200_recorded(monkeypatch):
    path = on_path("h200_sm90_driver580", monkeypatch)
    assert path == smi("h200_sm90_driver580")
    facts = _gpu.collect(run, path, lspci=None, sysfs_root="/nonexistent")
    assert facts["gpu_count"] == 1
    assert facts["driver_version"] == "580.159.04"
    assert facts["cuda_driver_version"] == "13.0"
    gpu = facts["gpus"][0]
    assert (gpu["name"], gpu["compute_cap"], gpu["pci_bus_id"]) == ("NVIDIA H200", "9.0", "0000:00:06.0")
    assert gpu["memory_total_mib"] == 143771
    assert facts["topology"] is None  # one GPU: topo not asked
    assert facts["pcie"]["0000:00:06.0"]["acs_reason"] == "lspci not found (install pciutils)"


def test_h200_topology_header_has_ansi_escapes():
    # Recorded on the H200: nvidia-smi 580 underlines the header with ESC[4m ... ESC[0m.
    text = read(os.path.join(NVSMI, "h200_sm90_driver580", "topo_m.txt"))
    assert "\x1b[4m" in text
    assert _gpu.parse_topology(text)["gpus"] == ["GPU0"]
    assert _gpu.parse_p2p_matrix(read(os.path.join(NVSMI, "h200_sm90_driver580", "topo_p2p_r.txt")))["gpus"] == ["GPU0"]


def test_b28_pair_with_topology_and_acs(tmp_path):
    lspci = tmp_path / "lspci"
    lspci.write_text("#!/bin/sh\ncat '%s'\n" % fixture("lspci_acs_redirect_b28.txt"))
    lspci.chmod(0o755)
    facts = _gpu.collect(run, smi("rtx_pro_6000_x2_pcie_b28"), lspci=str(lspci), sysfs_root=str(tmp_path / "sys"))
    assert facts["gpu_count"] == 2
    assert facts["topology"]["links"]["GPU0"]["GPU1"] == "PHB"
    assert facts["p2p_read"]["all_ok"] is True
    # no sysfs paths here: every redirecting bridge counts
    assert facts["pcie"]["0000:01:00.0"]["acs_redirect_bridges"] == ["0000:00:01.1", "0000:00:03.1"]


def test_no_nvidia_smi_is_not_a_failure():
    facts = _gpu.collect(run, None)
    assert facts["gpu_count"] == 0
    assert "nvidia-smi not found" in facts["reason"]
    assert facts["error"] is None


def test_too_old_raises_with_driver_requirement_b17():
    with pytest.raises(_gpu.NvidiaSmiError) as err:
        _gpu.collect(run, smi("driver_470_too_old_b17"))
    assert err.value.kind == "too_old"
    assert "580" in err.value.message
    assert "not a missing GPU" in err.value.message


def test_unknown_field_on_real_driver_580_is_classified_too_old():
    # Recorded on the H200 (driver 580.159.04): an unknown query field gives exit 2 and the B17 text.
    assert read(os.path.join(NVSMI, "bad_field_driver580", "query.rc")).strip() == "2"
    with pytest.raises(_gpu.NvidiaSmiError):
        _gpu.collect(run, smi("bad_field_driver580"))


def test_nvml_mismatch_sets_reboot_required_b31():
    facts = _gpu.collect(run, smi("nvml_mismatch_b31"))
    assert facts["gpu_count"] == 0
    assert facts["error"] == "nvml_mismatch"
    assert facts["reboot_required"] is True


def test_driver_not_loaded():
    facts = _gpu.collect(run, smi("driver_not_loaded"))
    assert facts["error"] == "driver_not_loaded"
    assert facts["reboot_required"] is False


def test_unavailable_fields_and_failed_q_are_tolerated():
    facts = _gpu.collect(run, smi("fields_unavailable"), pcie=False)
    assert facts["gpu_count"] == 1
    assert facts["gpus"][0]["compute_cap"] is None
    assert facts["driver_version"] == "580.126.09"
    assert facts["cuda_driver_version"] is None
    assert any("nvidia-smi -q failed" in w for w in facts["warnings"])


def test_h200_pair_recorded_nvlink():
    # Recorded on the two-GPU H200 machine: NV18 between the GPUs, peer read OK, ANSI-underlined headers.
    facts = _gpu.collect(run, smi("h200x2_nvlink_driver580"), lspci=None, sysfs_root="/nonexistent")
    assert facts["gpu_count"] == 2
    assert facts["topology"]["links"] == {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}
    assert facts["topology"]["nvlink_all_pairs"] is True
    assert facts["p2p_read"]["all_ok"] is True
