"""SGLang dependency selection, constraints and pip verdicts (field report B19).

Fixtures are real: ``sglang-0.5.9-requires.json`` is ``importlib.metadata.requires('sglang')`` of the 0.5.9 sdist
installed with ``--no-deps``; ``pip-report-sglang-0.5.9-full.json`` is the (trimmed) ``pip install --dry-run --report``
of the filtered requirements next to torch 2.13.0+cpu.
"""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _sglang_deps as deps
from ansible_collections.blackwell.sglang.plugins.filter.pip_failure_class import pip_failure_class

HERE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "sglang_source")


def _load(name):
    with open(os.path.join(HERE, name)) as fh:
        return json.load(fh)


REQUIRES = _load("sglang-0.5.9-requires.json")
REPORT = _load("pip-report-sglang-0.5.9-full.json")


@pytest.mark.parametrize("raw,name", [
    ("flashinfer_python==0.6.3", "flashinfer-python"),
    ("Flashinfer.Cubin==0.6.3", "flashinfer-cubin"),
    ("torch==2.9.1", "torch"),
    ("sgl-kernel==0.3.21", "sgl-kernel"),
    ("av ; sys_platform == 'linux'", "av"),
    ("llguidance<0.8.0,>=0.7.11", "llguidance"),
    ("lm-eval[api]>=0.4.9.2; extra == \"test\"", "lm-eval"),
])
def test_requirement_name(raw, name):
    assert deps.requirement_name(raw) == name


def test_requirement_name_rejects_garbage():
    with pytest.raises(ValueError):
        deps.requirement_name("==1.0")


def test_all_drops_protected_and_extras_keeps_pins_and_markers():
    plan = deps.select_requirements(REQUIRES, mode="all")
    names = [deps.requirement_name(r) for r in plan["requirements"]]
    for owned in ("torch", "torchaudio", "torchvision", "sgl-kernel", "flashinfer-python", "flashinfer-cubin"):
        assert owned not in names
    protected = {e["name"] for e in plan["excluded"] if e["reason"] == "protected"}
    assert protected == {"torch", "torchaudio", "torchvision", "sgl-kernel", "flashinfer-python", "flashinfer-cubin"}
    # SGLang's own pins survive, markers are left for pip to evaluate.
    assert "transformers==4.57.1" in plan["requirements"]
    assert any(r.startswith("torchcodec==0.8.0") and ";" in r for r in plan["requirements"])
    # Optional extras (test, diffusion, tracing, ...) are not installed.
    assert plan["extras_skipped"] > 10
    assert not any("extra ==" in r for r in plan["requirements"])
    assert len(plan["requirements"]) + len(plan["excluded"]) + plan["extras_skipped"] == len(REQUIRES)


def test_none_installs_nothing():
    plan = deps.select_requirements(REQUIRES, mode="none")
    assert plan["requirements"] == []
    assert all(e["reason"] in ("protected", "not_selected") for e in plan["excluded"])


def test_list_keeps_sglang_pins_for_selected_names():
    plan = deps.select_requirements(REQUIRES, mode=["Transformers", "openai", "numpy"], extra=["triton==3.5.1"])
    assert plan["requirements"] == ["numpy", "openai==2.6.1", "transformers==4.57.1", "triton==3.5.1"]


def test_list_rejects_unknown_and_protected_names():
    with pytest.raises(ValueError, match="not dependencies"):
        deps.select_requirements(REQUIRES, mode=["numpy", "no-such-dist"])
    with pytest.raises(ValueError, match="protected"):
        deps.select_requirements(REQUIRES, mode=["torch"])
    with pytest.raises(ValueError, match="protected"):
        deps.select_requirements(REQUIRES, mode="all", extra=["torch==2.9.1"])


def test_bad_mode():
    with pytest.raises(ValueError):
        deps.select_requirements(REQUIRES, mode="some")
    with pytest.raises(ValueError):
        deps.select_requirements(REQUIRES, mode=3)


def test_excludes_patterns():
    plan = deps.select_requirements(REQUIRES, mode="all", excludes=["timm", "grpcio*"])
    names = {deps.requirement_name(r) for r in plan["requirements"]}
    assert "timm" not in names
    assert not any(n.startswith("grpcio") for n in names)
    excluded = {e["name"] for e in plan["excluded"] if e["reason"] == "excluded"}
    assert excluded >= {"timm", "grpcio", "grpcio-reflection"}


def test_constraints_pin_exact_installed_builds():
    installed = {"torch": "2.12.0.dev20260307+cu130", "Flashinfer_Python": "0.6.5", "flashinfer-cubin": "0.6.5",
                 "numpy": "2.4.6", "sglang": "0.5.9", "sgl-kernel": "0.3.21"}
    assert deps.constraint_lines(installed) == [
        "flashinfer-cubin==0.6.5", "flashinfer-python==0.6.5", "sgl-kernel==0.3.21",
        "torch==2.12.0.dev20260307+cu130"]


def test_report_from_real_dry_run_flags_torchvision_from_timm():
    result = deps.report_changes(REPORT, installed={"torch": "2.13.0+cpu"})
    assert not result["ok"]
    assert result["verdict"] == "protected_package_changed"
    assert result["changes"] == [{"name": "torchvision", "from": None, "to": "0.28.0", "required_by": ["timm"],
                                  "text": "install torchvision 0.28.0 (required by timm)"}]
    assert result["install_count"] == len(REPORT["install"])


def test_report_torch_swap_is_torch_replaced():
    report = {"install": [
        {"metadata": {"name": "torch", "version": "2.9.1", "requires_dist": []}},
        {"metadata": {"name": "torchaudio", "version": "2.9.1", "requires_dist": ["torch==2.9.1"]}},
    ]}
    result = deps.report_changes(report, installed={"torch": "2.12.0.dev20260307+cu130"})
    assert result["verdict"] == "torch_replaced"
    assert result["changes"][0] == {
        "name": "torch", "from": "2.12.0.dev20260307+cu130", "to": "2.9.1", "required_by": ["torchaudio"],
        "text": "replace torch 2.12.0.dev20260307+cu130 with 2.9.1 (required by torchaudio)"}


def test_report_clean():
    report = {"install": [{"metadata": {"name": "numpy", "version": "2.4.6"}}]}
    assert deps.report_changes(report) == {"ok": True, "verdict": "ok", "changes": [], "install_count": 1}


# Verbatim outputs from field report F-B19.
CUDA_CONFLICT = """ERROR: Cannot install cuda-python==13.2.0, sglang and torch==2.11.0+cu128 because these package versions have conflicting dependencies.

The conflict is caused by:
    torch 2.11.0+cu128 depends on cuda-bindings<13 and >=12.9.4; platform_system == "Linux"
    cuda-python 13.2.0 depends on cuda-bindings~=13.2.0
"""
TORCH_SWAP = """  Attempting uninstall: torch
    Found existing installation: torch 2.12.0.dev20260307+cu130
    Uninstalling torch-2.12.0.dev20260307+cu130:
      Successfully uninstalled torch-2.12.0.dev20260307+cu130
"""


@pytest.mark.parametrize("text,verdict", [
    (CUDA_CONFLICT, "resolver_cuda_major_conflict"),
    (TORCH_SWAP, "torch_replaced"),
    ("ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/...", "resolver_conflict"),
    ("ERROR: No matching distribution found for xgrammar==0.1.27", "no_matching_distribution"),
    ("WARNING: Retrying ... Failed to establish a new connection: [Errno 101] Network is unreachable",
     "network_unreachable"),
    ("error: subprocess-exited-with-error\n  Failed building wheel for sglang", "build_failed"),
    ("OSError: [Errno 28] No space left on device", "disk_full"),
    ("something else entirely", "unknown"),
    ("", "unknown"),
])
def test_classify_pip_failure(text, verdict):
    assert deps.classify_pip_failure(text) == verdict
    assert pip_failure_class(text) == verdict


def test_protected_drift_torch_swap_and_new_kernel():
    before = {"torch": "2.12.0.dev20260307+cu130", "flashinfer-python": "0.6.5", "numpy": "2.4.6", "sglang": "0.5.9"}
    after = {"torch": "2.9.1", "flashinfer_python": "0.6.5", "numpy": "2.4.7", "sglang": "0.5.10",
             "sgl-kernel": "0.3.21"}
    result = deps.protected_drift(before, after)
    assert result["verdict"] == "torch_replaced"
    assert result["torch"] == "2.12.0.dev20260307+cu130"
    assert result["changes"] == [
        {"name": "sgl-kernel", "from": None, "to": "0.3.21", "text": "sgl-kernel absent -> 0.3.21"},
        {"name": "torch", "from": "2.12.0.dev20260307+cu130", "to": "2.9.1",
         "text": "torch 2.12.0.dev20260307+cu130 -> 2.9.1"}]


def test_protected_drift_clean_and_removed():
    same = {"torch": "2.13.0+cpu", "numpy": "1"}
    assert deps.protected_drift(same, dict(same, numpy="2"))["ok"]
    gone = deps.protected_drift({"torch": "2.13.0+cpu", "flashinfer-cubin": "0.6.5"}, {"torch": "2.13.0+cpu"})
    assert gone["verdict"] == "protected_package_changed"
    assert gone["changes"] == [{"name": "flashinfer-cubin", "from": "0.6.5", "to": None,
                                "text": "flashinfer-cubin 0.6.5 -> removed"}]
