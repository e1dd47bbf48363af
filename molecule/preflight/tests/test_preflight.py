"""The preflight changed nothing on the sandbox and its modules answer the same from the container."""

from __future__ import annotations


def test_nothing_installed_by_the_preflight(host):
    # The preflight reads /opt/sglang and the venv paths but must not create them.
    assert not host.file("/opt/sglang").exists
    assert not host.file("/etc/blackwell-sglang").exists


def test_gpu_facts_no_gpu(ansible_host):
    out = ansible_host.ansible("blackwell.sglang.gpu_facts", "", check=False)
    assert out["gpu_count"] == 0
    assert "nvidia-smi not found" in out["reason"]
    assert out["changed"] is False


def test_gpu_facts_recorded_b28_pair(ansible_host):
    smi = "/opt/blackwell-fixtures/nvidia_smi/rtx_pro_6000_x2_pcie_b28/nvidia-smi"
    out = ansible_host.ansible("blackwell.sglang.gpu_facts", "nvidia_smi=%s" % smi, check=False)
    assert out["gpu_count"] == 2
    assert out["cuda_driver_version"] == "13.0"
    assert [g["compute_cap"] for g in out["gpus"]] == ["12.0", "12.0"]
    assert out["p2p_read"]["all_ok"] is True


def test_gpu_facts_too_old_driver_is_an_error_not_no_gpu(ansible_host):
    smi = "/opt/blackwell-fixtures/nvidia_smi/driver_470_too_old_b17/nvidia-smi"
    out = ansible_host.ansible("blackwell.sglang.gpu_facts", "nvidia_smi=%s" % smi, check=False)
    # a module failure (testinfra drops the 'failed' key): an error naming the driver, and no "no GPU" facts
    assert out["error"] == "too_old"
    assert "580" in out["msg"] and "not a missing GPU" in out["msg"]
    assert "gpu_count" not in out


def test_host_facts_in_container(ansible_host):
    out = ansible_host.ansible("blackwell.sglang.host_facts", "", check=False)
    assert out["shm"]["size_bytes"] > 0
    assert out["glibc"] == "2.36"


def test_host_facts_finds_the_nccl_config_files_of_the_service(host, ansible_host):
    # F-S03 written where NCCL looks (/etc/nccl.conf) and where NCCL_CONF_FILE points; removed again afterwards
    keys = "NCCL_IB_USE_INLINE=1\nNCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS=1\n"
    assert host.run("printf '%s' '" + keys + "' > /etc/nccl.conf && printf 'NCCL_P2P_LEVEL=SYS\\n' > "
                    "/tmp/s03.conf").rc == 0
    try:
        # a mapping argument goes in as JSON (key=value would hand the module a string)
        found = ansible_host.ansible("blackwell.sglang.host_facts", '{"nccl_conf": {"user": "root"}}', check=False)
        conf = found["nccl_conf"]
        assert conf["home"] == "/root" and conf["searched"] == ["/root/.nccl.conf", "/etc/nccl.conf"]
        assert conf["files"] == [{"path": "/etc/nccl.conf", "found_by": "system", "keys": {
            "NCCL_IB_USE_INLINE": "1", "NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS": "1"}}]
        pointed = ansible_host.ansible(
            "blackwell.sglang.host_facts", '{"nccl_conf": {"user": "root", "conf_file": "/tmp/s03.conf"}}',
            check=False)["nccl_conf"]
        assert [(f["path"], f["found_by"]) for f in pointed["files"]] == [
            ("/tmp/s03.conf", "NCCL_CONF_FILE"), ("/etc/nccl.conf", "system")]
    finally:
        host.run("rm -f /etc/nccl.conf /tmp/s03.conf")
