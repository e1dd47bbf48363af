"""Parsing of nvidia-smi, lspci and /proc/cmdline output (module_utils._gpu) on recorded fixtures."""

import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu
from helpers import NVSMI, fixture, read


def test_query_csv_rtx_pro_6000_pair():
    gpus = _gpu.parse_query_csv(read(os.path.join(NVSMI, "rtx_pro_6000_x2_pcie_b28", "query.txt")))
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[0]["name"] == "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    assert gpus[0]["compute_cap"] == "12.0"
    assert gpus[0]["memory_total_mib"] == 97887
    assert gpus[1]["pci_bus_id"] == "0000:21:00.0"
    assert gpus[0]["driver_version"] == "580.126.09"


def test_query_csv_unavailable_fields_are_none():
    gpus = _gpu.parse_query_csv(read(os.path.join(NVSMI, "fields_unavailable", "query.txt")))
    assert gpus[0]["compute_cap"] is None
    assert gpus[0]["memory_total_mib"] is None
    assert gpus[0]["name"].startswith("NVIDIA RTX PRO 6000")


def test_query_csv_comma_in_name_kept():
    line = "0, NVIDIA Foo, Bar, GPU-1, 00000000:01:00.0, 12.0, 100, 1, 580.95.05, Enabled\n"
    gpu = _gpu.parse_query_csv(line)[0]
    assert gpu["name"] == "NVIDIA Foo, Bar"
    assert gpu["compute_cap"] == "12.0"


def test_query_csv_short_line_is_an_error():
    with pytest.raises(ValueError):
        _gpu.parse_query_csv("0, NVIDIA X, 12.0\n")


@pytest.mark.parametrize("raw,expected", [
    ("00000000:19:00.0", "0000:19:00.0"),
    ("19:00.0", "0000:19:00.0"),
    ("0000:C1:00.0", "0000:c1:00.0"),
    ("[N/A]", None),
])
def test_normalize_bus_id(raw, expected):
    assert _gpu.normalize_bus_id(raw) == expected


def test_cuda_driver_version_from_q_and_banner():
    assert _gpu.parse_cuda_driver_version(read(os.path.join(NVSMI, "rtx_pro_6000_x2_pcie_b28", "q.txt"))) == "13.0"
    banner = "| NVIDIA-SMI 580.95.05    Driver Version: 580.95.05    CUDA Version: 13.0     |"
    assert _gpu.parse_cuda_driver_version(banner) == "13.0"
    assert _gpu.parse_driver_version(banner) == "580.95.05"


def test_classify_too_old_b17():
    info = _gpu.classify_nvidia_smi_failure(2, read(os.path.join(NVSMI, "driver_470_too_old_b17", "query.txt")), "")
    assert info["kind"] == "too_old"
    assert info["no_gpu"] is False
    assert "580" in info["message"] and '"compute_cap"' in info["message"]


def test_classify_nvml_mismatch_b31():
    info = _gpu.classify_nvidia_smi_failure(18, read(os.path.join(NVSMI, "nvml_mismatch_b31", "query.txt")), "")
    assert info["kind"] == "nvml_mismatch"
    assert info["reboot_required"] is True


def test_classify_driver_not_loaded():
    info = _gpu.classify_nvidia_smi_failure(9, read(os.path.join(NVSMI, "driver_not_loaded", "query.txt")), "")
    assert info["kind"] == "driver_not_loaded"
    assert info["reboot_required"] is False


def test_topology_b28_phb_no_nvlink():
    topo = _gpu.parse_topology(read(os.path.join(NVSMI, "rtx_pro_6000_x2_pcie_b28", "topo_m.txt")))
    assert topo["gpus"] == ["GPU0", "GPU1"]
    assert topo["links"]["GPU0"]["GPU1"] == "PHB"
    assert topo["nvlink_any"] is False
    assert topo["pcie_only_pairs"] == [["GPU0", "GPU1", "PHB"]]


def test_topology_field_report_spacing_b28():
    # The B28 report shows the matrix with spaces instead of tabs.
    text = ("        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
            "GPU0     X      PHB     0-13            0\n"
            "GPU1    PHB      X      0-13            0\n")
    topo = _gpu.parse_topology(text)
    assert topo["links"] == {"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}}


def test_topology_nvlink_all_pairs_with_nic_columns():
    text = ("\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            "GPU0\t X \tNV18\tNV18\tPXB\t0-47\t0\t\tN/A\n"
            "GPU1\tNV18\t X \tNV18\tSYS\t0-47\t0\t\tN/A\n"
            "GPU2\tNV18\tNV18\t X \tSYS\t48-95\t1\t\tN/A\n"
            "NIC0\tPXB\tSYS\tSYS\t X \n")
    topo = _gpu.parse_topology(text)
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2"]
    assert topo["nvlink_all_pairs"] is True
    assert topo["pcie_only_pairs"] == []


def test_p2p_matrix_ok_and_cns():
    ok = _gpu.parse_p2p_matrix(read(os.path.join(NVSMI, "rtx_pro_6000_x2_pcie_b28", "topo_p2p_r.txt")))
    assert ok["all_ok"] is True
    bad = _gpu.parse_p2p_matrix(read(os.path.join(NVSMI, "geforce_rtx5090_x2_b29", "topo_p2p_r.txt")))
    assert bad["all_ok"] is False
    assert ["GPU0", "GPU1", "CNS"] in bad["not_ok_pairs"]


def test_lspci_acs_b28():
    acs = _gpu.parse_lspci_acs(read(fixture("lspci_acs_redirect_b28.txt")))
    assert set(acs) == {"0000:00:01.1", "0000:00:03.1", "0000:00:07.1"}
    assert acs["0000:00:01.1"]["redirect"] is True
    assert acs["0000:00:01.1"]["acs_ctl"]["CmpltRedir"] is True
    assert acs["0000:00:07.1"]["redirect"] is False


@pytest.mark.parametrize("name,passthrough,forced_on", [
    ("cmdline_b28.txt", None, False),
    ("cmdline_iommu_pt.txt", True, True),
    ("cmdline_intel_iommu_on.txt", None, True),
])
def test_iommu_cmdline(name, passthrough, forced_on):
    info = _gpu.parse_iommu_cmdline(read(fixture(name)))
    assert info["passthrough"] is passthrough
    assert info["forced_on"] is forced_on


def test_pci_ancestors_and_group_type(tmp_path):
    # sysfs shape: /sys/bus/pci/devices/<dev> -> ../../../devices/pci0000:00/<bridge>/<dev>
    dev_dir = tmp_path / "devices" / "pci0000:00" / "0000:00:01.1" / "0000:01:00.0"
    (dev_dir / "iommu_group").mkdir(parents=True)
    (dev_dir / "iommu_group" / "type").write_text("DMA-FQ\n")
    links = tmp_path / "bus" / "pci" / "devices"
    links.mkdir(parents=True)
    os.symlink(str(dev_dir), str(links / "0000:01:00.0"))
    assert _gpu.pci_ancestors("0000:01:00.0", str(tmp_path)) == ["0000:00:01.1"]
    assert _gpu.iommu_group_type("0000:01:00.0", str(tmp_path)) == "DMA-FQ"
    assert _gpu.iommu_group_type("0000:02:00.0", str(tmp_path)) is None


@pytest.mark.parametrize("driver,cuda_drv,want,ok", [
    ("580.95.05", "13.0", "13.0", True),
    ("575.57.08", "12.9", "13.0", False),
    ("580.95.05", "13.0", "13.2", True),   # minor-version compatibility within CUDA 13
    ("580.65.06", None, "13.0", True),     # table fallback: 580.65.06 is the CUDA 13.0 GA minimum
    ("570.86.10", None, "13.0", False),
    ("470.182.03", None, "12.8", False),
])
def test_driver_supports_cuda(driver, cuda_drv, want, ok):
    assert _gpu.driver_supports_cuda(driver, cuda_drv, want)[0] is ok
