"""inventories/dgx_spark/{single,pair}: both parse (ansible-inventory --list) and site.yml passes --syntax-check
against them; their values are what the hardware profile and the preflight's NCCL/RoCE check expect of a Spark."""

import os

import pytest

import ansible_run
from ansible_collections.blackwell.sglang.plugins.filter.hardware_profile import hardware_profile
from ansible_collections.blackwell.sglang.plugins.filter.preflight_sm12x import preflight_sm12x

# paths from this file (the module name conftest depends on the collection order)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
INVENTORIES = {"single": os.path.join(ROOT, "inventories", "dgx_spark", "single"),
               "pair": os.path.join(ROOT, "inventories", "dgx_spark", "pair")}


def inventory(name):
    res, listing = ansible_run.inventory(INVENTORIES[name], cwd=ROOT)
    assert res.rc == 0, res.stderr[-3000:]
    assert "[WARNING]" not in res.stderr, res.stderr[-3000:]
    assert listing is not None, res
    return listing


@pytest.mark.parametrize("name", sorted(INVENTORIES))
def test_site_yml_syntax_check(name):
    res = ansible_run.playbook("site.yml", inventory=INVENTORIES[name], args=["--syntax-check"], cwd=ROOT)
    assert res.rc == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "playbook: site.yml" in res.stdout


def test_single_spark():
    inv = inventory("single")
    assert inv["sglang_servers"]["hosts"] == ["spark-01"]
    hv = inv["_meta"]["hostvars"]["spark-01"]
    assert hv["sglang_stack_compute_capability"] == "12.1"
    # the targets are not pinned: the hardware profile derives them from the GB10
    assert "sglang_stack_target_archs" not in hv
    assert hardware_profile([hv["sglang_stack_compute_capability"]])["target_archs"] == ["sm_121a"]
    assert "sm120_only" in hv["sglang_stack_kernel_patches"]
    assert hv["sglang_stack_service_tp_size"] == 1 and hv["sglang_service_mem_fraction_static"] is None
    assert hv["flashinfer_install_jit_cache"] is False                       # S17
    assert hv["torch_nightly_index_url"] == "https://download.pytorch.org/whl/cu130"   # S09: CUDA torch for aarch64
    assert "cuda_toolchain_verify_arch" not in hv   # follows the targets (roles/cuda_toolchain/defaults)


def test_spark_pair():
    inv = inventory("pair")
    assert inv["spark_pair"]["hosts"] == ["spark-a", "spark-b"]
    for host in ("spark-a", "spark-b"):
        hv = inv["_meta"]["hostvars"][host]
        assert hv["sglang_stack_service_multinode_group"] == "spark_pair"
        assert hv["sglang_stack_service_tp_size"] == 2
        assert hv["sglang_stack_compute_capability"] == "12.1"     # the links to the single Spark's group_vars
        env = hv["sglang_service_nccl_env"]
        assert "NCCL_IB_GID_INDEX" not in env                       # S02: never rendered, never empty
        # the preflight's check against a Spark's devices (one QSFP cable = two RDMA devices, F-S04)
        gb10 = {"gpu_count": 1, "gpus": [{"index": 0, "name": "NVIDIA GB10", "compute_cap": "12.1",
                                          "memory_total_mib": None}]}
        result = preflight_sm12x(gb10, {}, {}, {
            "fallback_capability": "12.1", "nccl_env": env, "nnodes": 2,
            "rdma_devices": ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"],
            "net_interfaces": ["lo", "enP7s7", "enp1s0f0np0", "enp1s0f1np1", "enP2p1s0f0np0", "enP2p1s0f1np1"]})
        fabric = dict((c["name"], c) for c in result["checks"])["nccl_fabric"]
        assert fabric["status"] == "pass", fabric
