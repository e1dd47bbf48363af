"""A new user's first run (converge.yml): what the bare server got from the apt method, and what the runs of the
installed collection printed (their output is in Molecule's ephemeral directory, <dir>/first_run/<run>.log)."""

import os
import pathlib
import re

import pytest

RUN_DIR = pathlib.Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/nonexistent")) / "first_run"
REPO_URL = "file:///srv/cuda-standin/debian12/x86_64/"


@pytest.fixture(scope="module")
def logs():
    return {name: (RUN_DIR / ("%s.log" % name)).read_text() for name in ("toolchain", "site-check")}


def test_the_runs_used_the_installed_collection_only():
    installed = RUN_DIR / "collections" / "ansible_collections" / "blackwell" / "sglang"
    assert (installed / "MANIFEST.json").is_file()
    assert not (RUN_DIR / "collections" / "ansible_collections" / "ansible").exists()     # ansible.posix: --no-deps
    cfg = (RUN_DIR / "ansible.cfg").read_text()
    assert "collections_scan_sys_path = false" in cfg and str(RUN_DIR / "collections") in cfg


@pytest.mark.parametrize("name", ["toolchain", "site-check"])
def test_both_runs_passed_without_warnings_about_the_inventory(logs, name):
    out = logs[name]
    assert out.rstrip().endswith("rc=0"), out[-3000:]
    assert re.search(r"box-01 +: ok=\d+ +changed=\d+ +unreachable=0 +failed=0", out), out[-3000:]
    assert "Could not match supplied host pattern" not in out           # no sglang_gateways group: no warning
    assert "[WARNING]: Skipping callback" not in out and "Error loading plugin" not in out


def test_the_preflight_passed_the_repository_the_role_then_used(logs):
    out = logs["toolchain"]
    assert "PASS | distribution | Debian 12." in out and "CUDA apt repository debian12/x86_64" in out, out[-3000:]
    assert "SKIP | model_path | no model path set" in out                 # the default: empty, not a crash
    assert "Add NVIDIA's CUDA apt repository (%s)" % REPO_URL in out


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
