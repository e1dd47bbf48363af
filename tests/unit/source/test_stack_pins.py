"""The stack presets of the collection (roles/sglang_stack: sglang_stack_presets) resolve against SGLang's own
requirements at each pinned commit.

The SGLang trees are the real ones, read from the upstream source bundle (``BLACKWELL_UPSTREAM``, default
``<repo>/../shared/upstream``; its ``manifest.json`` maps each commit to its tarball): ``python/pyproject.toml``'s
``[project] dependencies`` are evaluated with ``packaging`` (markers for the deployment target: Linux x86_64,
CPython 3.11) against the stack's pins of the distributions other roles own (torch, torchvision, torchaudio,
flashinfer-*, sgl-kernel / sglang-kernel: ``sglang_source_protected_packages``, which sglang_source never installs).
A requirement on a protected distribution the stack does not pin is *missing*; a pin outside the specifier is a
*conflict* unless the stack lists it in ``sglang_requirement_overrides`` with the reason. Without the bundle (a
user's clone) the bundle tests skip with the reason.
"""

import json
import os
import pathlib
import re
import tarfile
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from ansible_collections.blackwell.sglang.plugins.module_utils import _stack_pins as stack_pins

REPO = pathlib.Path(__file__).resolve().parents[3]
CONTRACT = REPO / "roles" / "sglang_stack" / "defaults" / "main.yml"
UPSTREAM = pathlib.Path(os.environ.get("BLACKWELL_UPSTREAM") or REPO.parent / "shared" / "upstream")
# The deployment target (README: Debian 12 / Ubuntu 22.04+, Python 3.11, x86_64 servers).
TARGET = stack_pins.TARGET
STACKS = ("original_20260307", "current")


def load_stack(name):
    return yaml.safe_load(CONTRACT.read_text())["sglang_stack_presets"][name]


def test_the_presets_are_the_tested_ones():
    """Every preset the contract ships is resolved below, and its argument spec refuses none by name (an inventory
    preset, sglang_stack_preset_<name>, is selected by the same variable)."""
    assert sorted(yaml.safe_load(CONTRACT.read_text())["sglang_stack_presets"]) == sorted(STACKS)
    spec = yaml.safe_load((REPO / "roles" / "sglang_stack" / "meta" / "argument_specs.yml").read_text())
    option = spec["argument_specs"]["contract"]["options"]["sglang_stack_preset"]
    assert option["type"] == "str" and "choices" not in option
    assert option["default"] in STACKS


def protected_patterns():
    defaults = yaml.safe_load((REPO / "roles" / "sglang_source" / "defaults" / "main.yml").read_text())
    return [p for p in defaults["sglang_source_protected_packages"] if p != "sglang"]


def test_the_refresh_protects_what_sglang_source_protects():
    assert list(stack_pins.PROTECTED) == protected_patterns()


# The resolution and the companion rules are the collection's own (plugins/module_utils/_stack_pins.py), shared with
# the stack refresh (sglang_stack_refresh).
def resolve(requirements, pins, protected):
    return stack_pins.resolve(requirements, pins, protected, TARGET)


companion_problems = stack_pins.companion_problems


# --- checks that need no bundle ------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_stack_is_complete(stack):
    pins = load_stack(stack)
    assert re.fullmatch(r"[0-9a-f]{40}", pins["sglang_ref"]), pins["sglang_ref"]
    assert companion_problems(pins) == []


def test_companions_are_installed_with_torch():
    """torch_nightly installs the preset's torchvision and torchaudio with the preset's torch (its default)."""
    text = (REPO / "roles" / "torch_nightly" / "defaults" / "main.yml").read_text()
    extras = yaml.safe_load(text)["torch_nightly_extra_packages"]
    assert "'torchvision==' ~ sglang_stack_pins.torchvision" in extras
    assert "'torchaudio==' ~ sglang_stack_pins.torchaudio" in extras


def test_companion_check_catches_a_wrong_pair():
    pins = dict(load_stack("original_20260307"))
    assert companion_problems(pins) == []
    pins["torchvision"] = "0.26.0.dev20260307+cu130"       # the 2.11 line's torchvision
    assert any("does not pair" in p for p in companion_problems(pins))
    pins["torchvision"] = "0.27.0.dev20260306+cu130"
    assert any("nightly date" in p for p in companion_problems(pins))
    pins.pop("torchvision")
    assert "torchvision is not pinned" in companion_problems(pins)


# --- against the real pyproject.toml of each pinned commit ---------------------------------------------------------

@pytest.fixture(name="manifest", scope="module")
def fixture_manifest():
    path = UPSTREAM / "manifest.json"
    if not path.is_file():
        pytest.skip("the upstream source bundle is not at %s (set BLACKWELL_UPSTREAM): the real SGLang trees are "
                    "needed to resolve the stack pins" % UPSTREAM)
    return json.loads(path.read_text(encoding="utf-8"))


def sglang_file(manifest, commit, member):
    for pin in manifest["pins"].values():
        if pin["commit"] == commit:
            with tarfile.open(UPSTREAM / pin["tarball"]) as tar:
                return tar.extractfile("sglang/" + member).read().decode()
    raise AssertionError("commit %s is not in the bundle's manifest (pins: %s)"
                         % (commit, [p["commit"] for p in manifest["pins"].values()]))


def sglang_requirements(manifest, commit):
    return tomllib.loads(sglang_file(manifest, commit, "python/pyproject.toml"))["project"]["dependencies"]


@pytest.mark.parametrize("stack", STACKS)
def test_sglang_requirements_resolve_against_the_stack(manifest, stack):
    pins = load_stack(stack)
    assert resolve(sglang_requirements(manifest, pins["sglang_ref"]), pins, protected_patterns()) == []


def test_resolution_reports_missing_and_conflicting_pins(manifest):
    """The check is not vacuous: the old stack file (no torchvision, no overrides) fails for the right reasons."""
    pins = dict(load_stack("original_20260307"))
    reqs = sglang_requirements(manifest, pins["sglang_ref"])
    pins.pop("torchvision")
    pins.pop("sglang_requirement_overrides")
    problems = resolve(reqs, pins, protected_patterns())
    assert "missing: SGLang requires torchvision, the stack pins no torchvision" in problems
    assert any(p.startswith("conflict: SGLang requires torch==2.9.1, the stack pins torch==2.12.0.dev20260307+cu130")
               for p in problems)
    assert any(p.startswith("conflict: SGLang requires flashinfer_python==0.6.4") for p in problems)
    # sgl-kernel 0.3.21 is SGLang's own pin: no problem there
    assert not any("sgl-kernel" in p for p in problems)


def test_current_stack_needs_no_override(manifest):
    pins = dict(load_stack("current"))
    assert pins["sglang_requirement_overrides"] == {}
    reqs = sglang_requirements(manifest, pins["sglang_ref"])
    pins["sglang_requirement_overrides"] = {"torch": "not needed"}
    assert resolve(reqs, pins, protected_patterns()) == [
        "stale override: torch==2.13.0+cu130 satisfies SGLang's torch==2.13.0"]


def test_torchvision_wheel_pairs_with_the_current_torch():
    """torchvision 0.28.0's own metadata (the PyPI wheel, where this lab's disk has it) requires the current torch."""
    import zipfile
    wheels = sorted(pathlib.Path("/opt/pypi-more/files").glob("torchvision-0.28.0-*.whl"))
    if not wheels:
        pytest.skip("no torchvision 0.28.0 wheel on this machine (/opt/pypi-more/files)")
    with zipfile.ZipFile(wheels[0]) as whl:
        meta = whl.read(next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    torch_req = [Requirement(line.split(":", 1)[1].strip()) for line in meta.splitlines()
                 if line.startswith("Requires-Dist:") and line.split(":", 1)[1].strip().startswith("torch")][0]
    pins = load_stack("current")
    assert Version(pins["torchvision"]).public == "0.28.0"
    assert torch_req.specifier.contains(Version(pins["torch"]))


def server_args_choices(manifest, commit):
    """The module-level ``*_CHOICES`` lists of the real ``python/sglang/srt/server_args.py`` at ``commit`` (AST)."""
    import ast
    tree = ast.parse(sglang_file(manifest, commit, "python/sglang/srt/server_args.py"))
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.endswith("_CHOICES") and isinstance(node.value, ast.List) \
                and all(isinstance(e, ast.Constant) for e in node.value.elts):
            out[node.targets[0].id] = [e.value for e in node.value.elts]
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_stack_service_backends_are_parser_choices(manifest, stack):
    """The pinned --fp4-gemm-backend / --moe-runner-backend are values SGLang at the pinned commit accepts."""
    pins = load_stack(stack)
    choices = server_args_choices(manifest, pins["sglang_ref"])
    assert pins["fp4_gemm_backend"] in choices["FP4_GEMM_RUNNER_BACKEND_CHOICES"]
    assert pins["moe_runner_backend"] in choices["MOE_RUNNER_BACKEND_CHOICES"]


def test_probe_never_recommends_what_the_pinned_parser_refuses(manifest):
    """With the choices of the real 0307 parser (the recorded fixture, checked against server_args.py here), a
    backend that passed but has no accepted value -- sgl_kernel's NVFP4 GEMM (`cutlass`, a choice that came
    on 2026-03-31 and is gone again at the current pin) -- is never recommended, however fast."""
    from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics as num
    commit = load_stack("original_20260307")["sglang_ref"]
    with open(REPO / "tests" / "fixtures" / "service" / "parsers" / "sglang-d28f35240a.json", encoding="utf-8") as handle:
        actions = {o: a for a in json.load(handle)["actions"] for o in a["option_strings"]}
    real = server_args_choices(manifest, commit)
    allowed = {num.GEMM_FLAG: actions["--fp4-gemm-backend"]["choices"],
               num.MOE_FLAG: actions["--moe-runner-backend"]["choices"]}
    assert allowed[num.GEMM_FLAG] == real["FP4_GEMM_RUNNER_BACKEND_CHOICES"]
    assert allowed[num.MOE_FLAG] == real["MOE_RUNNER_BACKEND_CHOICES"]
    backends = {key: dict(meta, verdict="ok", score_us=100.0 + i) for i, (key, meta) in enumerate(sorted(num.BACKENDS.items()))}
    backends["gemm/sgl_kernel_cutlass"]["score_us"] = 1.0          # the fastest of all
    rec = num.recommend(backends, allowed)
    assert rec[num.GEMM_FLAG] in allowed[num.GEMM_FLAG] and rec[num.GEMM_FLAG] != "cutlass"
    assert rec[num.MOE_FLAG] in allowed[num.MOE_FLAG]
    # the current pin has no `cutlass` FP4 GEMM choice either (added 2026-03-31, #21314, gone again by d55f1c28e2):
    # never recommended there too, while a choice it gained (flashinfer_cutedsl) may be
    current = server_args_choices(manifest, load_stack("current")["sglang_ref"])
    assert "cutlass" not in current["FP4_GEMM_RUNNER_BACKEND_CHOICES"]
    assert "flashinfer_cutedsl" in current["FP4_GEMM_RUNNER_BACKEND_CHOICES"]
    rec = num.recommend(backends, {num.GEMM_FLAG: current["FP4_GEMM_RUNNER_BACKEND_CHOICES"],
                                   num.MOE_FLAG: current["MOE_RUNNER_BACKEND_CHOICES"]})
    assert rec[num.GEMM_FLAG] in current["FP4_GEMM_RUNNER_BACKEND_CHOICES"] and rec[num.GEMM_FLAG] != "cutlass"
