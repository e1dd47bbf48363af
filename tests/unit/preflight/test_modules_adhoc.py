"""The three modules end to end through ansible (AnsiballZ packaging, argument specs, check mode) with test doubles."""

import json
import os

import pytest

import ansible_run
from helpers import NVSMI, fake_toolkit, fixture

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not os.path.exists(ansible_run.ANSIBLE), reason="ansible not in this venv")]


def adhoc(module, args, check=False):
    return ansible_run.module(module, args, check=check,
                              env={"ANSIBLE_INVENTORY_UNPARSED_WARNING": "false", "ANSIBLE_LOCALHOST_WARNING": "false"})


def test_gpu_facts_module_with_recorded_pair_in_check_mode():
    res = adhoc("blackwell.sglang.gpu_facts",
                "nvidia_smi=%s pcie=false" % os.path.join(NVSMI, "rtx_pro_6000_x2_pcie_b28", "nvidia-smi"), check=True)
    assert res["changed"] is False
    assert res["gpu_count"] == 2
    assert res["topology"]["links"]["GPU0"]["GPU1"] == "PHB"


def test_gpu_facts_module_too_old_fails():
    res = adhoc("blackwell.sglang.gpu_facts", "nvidia_smi=%s" % os.path.join(NVSMI, "driver_470_too_old_b17", "nvidia-smi"))
    assert res["failed"] is True
    assert res["error"] == "too_old"


def test_toolchain_facts_module(tmp_path):
    home = fake_toolkit(str(tmp_path / "cuda-13.0"), fixture("nvcc_13.0.88_version.txt"),
                        fixture("nvcc_13.0.88_list_gpu_arch.txt"), 13000)
    res = adhoc("blackwell.sglang.toolchain_facts", "cuda_home=%s search_path=%s" % (home, os.path.join(home, "bin")))
    assert res["nvcc"]["version"] == "13.0.88"
    assert "compute_120" in res["nvcc"]["arch_list"]
    assert res["nvcc"]["path_nvccs"][0]["path"] == os.path.join(home, "bin", "nvcc")


def test_host_facts_module(tmp_path):
    res = adhoc("blackwell.sglang.host_facts", json.dumps({"disk_paths": {"venv": str(tmp_path / "not" / "yet")}}))
    assert res["disk"]["venv"]["checked_path"] == str(tmp_path)
    assert res["memory"]["mem_available_bytes"] > 0
