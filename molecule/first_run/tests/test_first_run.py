"""A new user's first run (converge.yml): what the bare server got from the apt method, and what the runs of the
installed collection printed (their output is in Molecule's ephemeral directory, <dir>/first_run/<run>.log)."""

import json
import os
import pathlib
import re

import pytest
import yaml

RUN_DIR = pathlib.Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "first_run"
REPO_URL = "file:///srv/cuda-standin/debian12/x86_64/"


@pytest.fixture(scope="module")
def logs():
    return {name: (RUN_DIR / ("%s.log" % name)).read_text() for name in ("new-inventory", "toolchain", "site-check")}


def test_the_runs_used_the_installed_collection_only():
    installed = RUN_DIR / "collections" / "ansible_collections" / "blackwell" / "sglang"
    assert (installed / "MANIFEST.json").is_file()
    assert not (RUN_DIR / "collections" / "ansible_collections" / "ansible").exists()     # ansible.posix: --no-deps
    # nothing the runs wrote (inventory, caches, reports) went into the installed collection
    assert not (installed / ".cache").exists()


def test_new_inventory_wrote_the_users_inventory(logs):
    assert logs["new-inventory"].rstrip().endswith("rc=0"), logs["new-inventory"][-3000:]
    inventory = RUN_DIR / "inventory"
    for name in ("hosts.yml", "ansible.cfg", "group_vars/all/sglang_stack.yml", "group_vars/all/sglang_service.yml"):
        assert (inventory / name).is_file(), name
    # the preset is selected, no pin is copied: the pins are the installed collection's
    stack = (inventory / "group_vars/all/sglang_stack.yml").read_text()
    assert "sglang_stack_preset: original_20260307" in stack and "sglang_stack_torch_version" not in stack
    # the API key is in an ansible-vault file, as the playbook's last step says
    assert (inventory / "group_vars/all/vault.yml").read_text().startswith("$ANSIBLE_VAULT;")


@pytest.mark.parametrize("name", ["toolchain", "site-check"])
def test_both_runs_passed_without_warnings_about_the_inventory(logs, name):
    out = logs[name]
    assert out.rstrip().endswith("rc=0"), out[-3000:]
    assert re.search(r"sglang-01 +: ok=\d+ +changed=\d+ +unreachable=0 +failed=0", out), out[-3000:]
    assert "Could not match supplied host pattern" not in out           # no sglang_gateways group: no warning
    assert "[WARNING]: Skipping callback" not in out and "Error loading plugin" not in out


def test_the_preflight_passed_the_repository_the_role_then_used(logs):
    out = logs["toolchain"]
    assert "PASS | distribution | Debian 12." in out and "CUDA apt repository debian12/x86_64" in out, out[-3000:]
    assert "SKIP | model_path | no model path set" in out                 # the default: empty, not a crash
    assert "Add NVIDIA's CUDA apt repository (%s)" % REPO_URL in out


def test_the_misspelt_variable_is_named_with_the_real_one(logs):
    warning = [line for line in logs["toolchain"].splitlines() if line.startswith("[WARNING]: sglang_servcie_tp_size ")]
    assert warning and "sglang_stack_service_tp_size" in warning[0], logs["toolchain"][-3000:]


def test_the_staged_release_has_the_installed_presets_pins(host):
    """The user's inventory selects a preset only: the release key of the staged release holds that preset's pins,
    as the installed collection defines them (sglang_stack_presets)."""
    defaults = RUN_DIR / "collections" / "ansible_collections" / "blackwell" / "sglang" / "roles" / "sglang_stack" \
        / "defaults" / "main.yml"
    preset = yaml.safe_load(defaults.read_text())["sglang_stack_presets"]["original_20260307"]
    found = host.run("cat /opt/sglang/releases/*/release-key.json")
    assert found.rc == 0, found.stderr
    key = json.loads(found.stdout)["key"]
    assert (key["torch_version"], key["flashinfer_version"], key["cuda_version"]) == \
        (preset["torch"], preset["flashinfer"], preset["cuda"]), key


def test_the_dry_run_reports_the_hub_model_and_no_false_ptxas_warning(logs):
    out = logs["site-check"]
    assert "PASS | model_path | Qwen/Qwen3-0.6B is a Hugging Face id" in out, out[-3000:]
    assert "TRITON_PTXAS_PATH is not set" not in out


def test_the_apt_method_installed_the_host_packages(host):
    for name in ("g++", "make", "python3-debian", "ca-certificates"):
        assert host.package(name).is_installed, name


def test_the_deb822_source_and_key(host):
    source = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources")
    assert source.is_file
    text = source.content_string
    assert "URIs: %s" % REPO_URL in text and "Suites: /" in text
    keyring = re.search(r"^Signed-By: (\S+)$", text, re.M).group(1)
    assert host.file(keyring).content_string.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    # apt verified the stand-in's signature with that key (an unsigned or unknown-key repository has no list)
    assert host.run("ls /var/lib/apt/lists/ | grep -c cuda-standin").stdout.strip() != "0"


def test_the_toolkit_package_and_the_environment_files(host):
    assert host.package("cuda-toolkit-13-0").is_installed
    env = dict(line.split("=", 1) for line in host.file("/etc/blackwell-sglang/cuda.env").content_string.splitlines()
               if line and not line.startswith("#"))
    assert env["CUDA_HOME"] == "/usr/local/cuda-13.0" and env["CUDACXX"] == "/usr/local/cuda-13.0/bin/nvcc"
    login = host.run("bash -lc 'command -v nvcc; nvcc --version'")
    assert login.rc == 0 and login.stdout.startswith("/usr/local/cuda-13.0/bin/nvcc\n") and "release 13.0" in login.stdout
    # the compile proof ran (with the real host compiler behind the stand-in nvcc) and left its stamp
    assert host.file("/var/lib/blackwell-sglang/stamps/cuda_toolchain-compile-sm_120a.json").is_file


@pytest.fixture(scope="module")
def spark_logs():
    return {name: (RUN_DIR / ("%s.log" % name)).read_text()
            for name in ("spark-single-check", "spark-pair-check", "spark-pair-fabric")}


@pytest.mark.parametrize("name, hosts", [("spark-single-check", ["spark-01"]),
                                         ("spark-pair-check", ["spark-a", "spark-b"])])
def test_the_dgx_spark_inventories_pass_a_check_mode_converge(spark_logs, name, hosts):
    """inventories/dgx_spark/{single,pair} as shipped, under an overlay that says only how the sandbox is reached and
    what it lacks (no GPU, no network, no ConnectX-7 link): the profile is GB10's, derived from the inventory."""
    out = spark_logs[name]
    assert out.rstrip().endswith("rc=0"), out[-3000:]
    for host in hosts:
        assert re.search(r"%s +: ok=\d+ +changed=\d+ +unreachable=0 +failed=0" % host, out), out[-3000:]
    assert "PASS | kernel_target_archs | kernel targets sm_121a cover the fleet's compute capability 12.1" in out, \
        out[-3000:]
    assert "compute capability 12.1 (from sglang_stack_compute_capability: no GPU answered); unified memory" in out


def test_the_pair_renders_one_server_over_two_nodes(spark_logs):
    out = spark_logs["spark-pair-check"]
    for rank in (0, 1):
        assert ("node rank %d of 2 (1 of 2 TP ranks here), rank 0 = spark-a, --dist-init-addr 192.168.100.10:50000"
                % rank) in out, out[-3000:]


def test_the_pairs_nccl_settings_are_refused_on_a_host_without_its_link(spark_logs):
    """The pair's own NCCL_SOCKET_IFNAME / NCCL_IB_HCA against a host that has neither: preflight names both."""
    out = spark_logs["spark-pair-fabric"]
    assert not out.rstrip().endswith("rc=0"), out[-3000:]
    assert "nccl_socket_ifname_missing: NCCL_SOCKET_IFNAME=enp1s0f0np0 names enp1s0f0np0" in out, out[-3000:]
    assert "nccl_ib_hca_missing: NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0" in out, out[-3000:]
    for host in ("spark-a", "spark-b"):   # refused before anything changed
        assert re.search(r"%s +: ok=\d+ +changed=0 +unreachable=0 +failed=1" % host, out), out[-3000:]
