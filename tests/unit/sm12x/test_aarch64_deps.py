"""The aarch64 dependency map (module_utils/_aarch64_deps.py) and its preflight check ``aarch64_dependencies``
(filter blackwell.sglang.preflight_sm12x), on the constructed GB10 facts (tests/fixtures/nvidia_smi/
gb10_dgx_spark_constructed, see its README) and the recorded RTX PRO 6000 facts. Field reports S09, S11, S17."""

import os
import subprocess

import pytest

from ansible_collections.blackwell.sglang.plugins.filter.preflight_sm12x import preflight_sm12x
from ansible_collections.blackwell.sglang.plugins.module_utils import _aarch64_deps as deps
from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SMI = os.path.join(ROOT, "tests", "fixtures", "nvidia_smi")


def _run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    return proc.returncode, proc.stdout, proc.stderr


def facts(name):
    return _gpu.collect(_run, os.path.join(SMI, name, "nvidia-smi"), pcie=False)


def _checks(gpu, **config):
    cfg = {"fallback_capability": "12.0"}
    cfg.update(config)
    result = preflight_sm12x(gpu, {}, {}, cfg)
    return result, dict((c["name"], c) for c in result["checks"])


def test_gb10_on_aarch64_names_the_dependencies_without_an_aarch64_wheel_before_any_change():
    result, checks = _checks(facts("gb10_dgx_spark_constructed"), architecture="aarch64", glibc="2.39")
    check = checks["aarch64_dependencies"]
    assert check["status"] == "warn" and check["message"].startswith("aarch64_wheel_missing: no aarch64 wheel of decord")
    # the documented ways: the replacement, else an x86_64 host
    assert "decord2" in check["remedy"] and "x86_64 host" in check["remedy"]
    routes = dict((r["name"], r["route"]) for r in result["aarch64_plan"])
    assert routes["torch"] == "index" and routes["sgl-kernel"] == "build" and routes["decord"] == "replace"
    assert routes["flashinfer-jit-cache"] == "omit"  # cc 12.1 (S17)
    assert routes["smg"] == "wheel" and routes["triton"] == "wheel" and routes["flashinfer-python"] == "wheel"
    # the kernel is built from source by the role on every host: not a finding
    assert "sgl-kernel" not in check["message"].split(";")[0]


@pytest.mark.parametrize("machine", ["x86_64", "", None])
def test_x86_64_hosts_get_no_finding(machine):
    result, checks = _checks(facts("rtx_pro_6000_x2_pcie_b28"), architecture=machine, glibc="2.36")
    assert checks["aarch64_dependencies"]["status"] == "pass" and result["aarch64_plan"] == []


def test_arm64_spelling_counts_and_an_old_glibc_fails():
    check = deps.check("arm64", "2.27", ["12.1"])
    assert check["status"] == "fail" and check["message"].startswith("aarch64_glibc_too_old")
    assert deps.check("aarch64", None, ["12.1"])["status"] == "fail"
    assert deps.check("aarch64", "2.28", ["12.1"])["status"] == "warn"


def test_jit_cache_is_omitted_only_for_compute_capability_12_1():
    on_120 = dict((r["name"], r) for r in deps.plan("aarch64", ["12.0"]))
    assert on_120["flashinfer-jit-cache"]["route"] == "wheel"
    on_121 = dict((r["name"], r) for r in deps.plan("aarch64", ["12.0", "12.1"]))
    assert on_121["flashinfer-jit-cache"]["route"] == "omit"


def test_every_entry_has_a_known_route_and_says_what_to_do():
    for name, entry in deps.DEPENDENCIES.items():
        assert entry["route"] in ("wheel", "index", "build", "replace", "omit"), name
        assert entry["what"].strip(), name
        if entry["route"] == "wheel":
            # a wheel route records the wheel that was found, and it is one an aarch64 host can install
            assert entry["checked"] and ("aarch64" in entry["checked"] or "none-any" in entry["checked"]), name
