"""Multi-node NCCL settings over RoCE (field reports S02, S04) through the preflight_sm12x filter: the GB10 pair's
settings (inventories/dgx_spark/pair) against a host's RDMA devices and interfaces (names as /sys/class lists them
on a DGX Spark: one QSFP cable = rocep1s0f0 + roceP2p1s0f0, F-S04)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter.preflight_sm12x import preflight_sm12x

GB10 = {"gpu_count": 1, "gpus": [{"index": 0, "name": "NVIDIA GB10", "compute_cap": "12.1", "memory_total_mib": None}]}
RDMA = ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"]
NET = ["lo", "enP7s7", "enp1s0f0np0", "enp1s0f1np1", "enP2p1s0f0np0", "enP2p1s0f1np1", "wlP9s9"]
GOOD = {"NCCL_SOCKET_IFNAME": "enp1s0f0np0", "NCCL_IB_HCA": "rocep1s0f0,roceP2p1s0f0"}


def fabric(env, nnodes=2, rdma="host", net="host"):
    """The nccl_fabric check on a GB10 node; ``"host"`` = the Spark's devices above, None = sysfs not read."""
    config = {"fallback_capability": "12.1", "nccl_env": env, "nnodes": nnodes,
              "rdma_devices": RDMA if rdma == "host" else rdma, "net_interfaces": NET if net == "host" else net}
    result = preflight_sm12x(GB10, {}, {}, config)
    return dict((c["name"], c) for c in result["checks"])["nccl_fabric"]


def test_the_pair_settings_pass():
    check = fabric(GOOD)
    assert check["status"] == "pass" and "NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0" in check["message"]


def test_an_empty_gid_index_fails_and_a_fixed_one_warns():
    check = fabric(dict(GOOD, NCCL_IB_GID_INDEX=""))
    assert check["status"] == "fail" and check["message"].startswith("nccl_gid_index_empty")
    assert "never render it empty" in check["remedy"]
    check = fabric(dict(GOOD, NCCL_IB_GID_INDEX="3"))
    assert check["status"] == "warn" and check["message"].startswith("nccl_gid_index_fixed")
    # single node too: the GID rule holds wherever the value is rendered
    assert fabric({"NCCL_IB_GID_INDEX": ""}, nnodes=1)["status"] == "fail"


def test_one_device_of_the_cable_fails_naming_the_other():
    check = fabric(dict(GOOD, NCCL_IB_HCA="rocep1s0f0"))
    assert check["status"] == "fail" and "nccl_ib_hca_one_port" in check["message"]
    assert "roceP2p1s0f0" in check["remedy"]


@pytest.mark.parametrize("env,needle", [
    (dict(GOOD, NCCL_SOCKET_IFNAME="eth9"), "nccl_socket_ifname_missing"),
    (dict(GOOD, NCCL_IB_HCA="mlx5_0,mlx5_1"), "nccl_ib_hca_missing"),
])
def test_settings_the_host_does_not_have_fail(env, needle):
    check = fabric(env)
    assert check["status"] == "fail" and needle in check["message"]


def test_unset_settings_on_a_pair_warn_with_the_devices_to_use():
    check = fabric({})
    assert check["status"] == "warn"
    assert "NCCL_SOCKET_IFNAME is not set" in check["message"]
    assert "NCCL_IB_HCA=roceP2p1s0f0,roceP2p1s0f1,rocep1s0f0,rocep1s0f1" in check["remedy"]


def test_single_node_and_unread_sysfs():
    assert fabric({}, nnodes=1)["status"] == "pass"
    # sysfs not read: only the rules that need no host facts
    assert fabric(GOOD, rdma=None, net=None)["status"] == "pass"
