"""The release seal (module sglang_release_seal, module_utils._release_seal), run as Ansible runs it on a host.

The release venv's interpreter is this test interpreter with a temporary site directory of real dist-info folders first
on PYTHONPATH (the reader reads them with importlib.metadata exactly as on a host). Every test that shows a holding
seal also shows the change that breaks it, and what the module names for it. The controller side (the settings'
digests of roles/sglang_converge/vars/main.yml) runs through ansible-playbook.
"""

import json
import os
import sys

import pytest

import ansible_run
from _dist_info import dist as _dist, remove as _remove
from ansible_collections.blackwell.sglang.plugins.module_utils import _release_seal as seal_lib

FACTS = {"sglang_stack_sglang_commit": "d28f35240a28de1e09967975e258b3dd7e74924f",
         "sglang_stack_probe_result": {"skipped": True}, "fp4_probe_passed": True}
INPUTS = {"sglang_source_extra_requirements": "a" * 64, "sglang_stack_preset": "b" * 64}


@pytest.fixture(name="release")
def _release(tmp_path):
    """A staged release: its directory, a venv with install stamps, a site of distributions and a stand-in nvcc."""
    rel = tmp_path / "releases" / "3f9c0a1b2d4e"
    stamps = rel / "venv" / seal_lib.STAMPS_DIR
    stamps.mkdir(parents=True)
    (stamps / "torch_nightly-install.json").write_text("{}\n")
    (stamps / "sglang_source-install.json").write_text("{}\n")
    (rel / "release-key.json").write_text('{"id": "3f9c0a1b2d4e"}\n')
    (rel / "probe.json").write_text('{"skipped": true}\n')
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("nvcc 13.0\n")
    site = tmp_path / "site"
    site.mkdir()
    dists = {"torch": _dist(site, "demo-torch-stand-in", "2.13.0"),
             "flashinfer": _dist(site, "flashinfer-python", "0.6.3"),
             "sglang": _dist(site, "demo-sglang-stand-in", "0.5.9")}
    return {"dir": rel, "site": site, "nvcc": nvcc, "dists": dists, "tmp": tmp_path}


def _seal(release, state="check", inputs=None, **args):
    args = dict(args, release_dir=str(release["dir"]), state=state, python=sys.executable,
                inputs=INPUTS if inputs is None else inputs)
    if state == "record":
        args.setdefault("files", {str(release["dir"] / "probe.json"): "probe", str(release["nvcc"]): "toolchain",
                                  str(release["dir"] / "release-key.json"): "release"})
        args.setdefault("facts", FACTS)
    else:
        args.setdefault("restore", sorted(FACTS))
    return ansible_run.module_file("sglang_release_seal", args, release["tmp"],
                                   pythonpath=[release["site"]])


def test_a_recorded_seal_holds_and_hands_back_only_the_facts_asked_for(release):
    first = _seal(release)
    assert first["holds"] is False and first["stages"] == list(seal_lib.STAGES)
    assert first["reasons"] == ["no seal (seal.json absent or unreadable) (every build stage)"]
    assert not first.get("warnings"), "a release that was never sealed is no broken seal"
    assert first["facts"] == {}

    recorded = _seal(release, "record")
    assert recorded["holds"] is True and recorded["written"] is True and recorded["changed"] is False

    again = _seal(release, restore=["sglang_stack_sglang_commit", "fp4_probe_passed"])
    assert again["holds"] is True, again["reasons"]
    assert again["changes"] == [] and again["stages"] == []
    assert again["facts"] == {"sglang_stack_sglang_commit": FACTS["sglang_stack_sglang_commit"], "fp4_probe_passed": True}
    assert again["distributions"]["flashinfer-python"] == "0.6.3"

    seal = json.loads((release["dir"] / "seal.json").read_text())
    assert seal["kind"] == seal_lib.KIND and seal["release"] == "3f9c0a1b2d4e"
    stamps = str(release["dir"] / "venv" / seal_lib.STAMPS_DIR)
    assert seal["files"][os.path.join(stamps, "torch_nightly-install.json")]["stage"] == "torch"
    assert seal["files"][str(release["nvcc"])]["stage"] == "toolchain"
    assert oct((release["dir"] / "seal.json").stat().st_mode & 0o777) == "0o644"
    # rewriting the same state changes nothing on disk
    assert _seal(release, "record")["written"] is False


def test_a_changed_distribution_names_itself_and_its_stage(release):
    _seal(release, "record")
    _remove(release["dists"]["torch"])
    _dist(release["site"], "demo-torch-stand-in", "2.12.0")
    broken = _seal(release)
    assert broken["holds"] is False and broken["facts"] == {}
    assert broken["reasons"] == ["demo-torch-stand-in 2.13.0 -> 2.12.0 (stage sglang)"]
    warning = str(broken["warnings"])
    assert "the seal of release 3f9c0a1b2d4e is broken: demo-torch-stand-in 2.13.0 -> 2.12.0" in warning
    assert "sglang repairs it" in warning


def test_each_kind_of_change_maps_to_the_stage_that_repairs_it(release):
    _seal(release, "record")
    # flashinfer reinstalled at the same version (its RECORD differs), a package added, a file of the toolchain and a
    # stamp changed
    _remove(release["dists"]["flashinfer"])
    _dist(release["site"], "flashinfer-python", "0.6.3", files=("pkg.py", "jit.so"))
    _dist(release["site"], "six", "1.16.0")
    release["nvcc"].write_text("another nvcc\n")
    (release["dir"] / "venv" / seal_lib.STAMPS_DIR / "sglang_source-install.json").unlink()
    broken = _seal(release)
    assert broken["holds"] is False
    assert sorted(broken["reasons"]) == sorted([
        "flashinfer-python 0.6.3 was reinstalled (its RECORD changed) (stage flashinfer)",
        "six 1.16.0 was installed (stage sglang)",
        "%s changed (stage toolchain)" % release["nvcc"],
        "%s is missing (stage sglang)" % (release["dir"] / "venv" / seal_lib.STAMPS_DIR / "sglang_source-install.json"),
    ])
    assert broken["stages"] == ["toolchain", "flashinfer", "sglang"]


def test_a_build_setting_breaks_it_for_every_stage_without_its_value_on_the_host(release):
    _seal(release, "record")
    changed = _seal(release, inputs=dict(INPUTS, sglang_source_extra_requirements="c" * 64))
    assert changed["reasons"] == ["setting sglang_source_extra_requirements changed (every build stage)"]
    assert changed["stages"] == list(seal_lib.STAGES)
    added = _seal(release, inputs=dict(INPUTS, flashinfer_install_jit_cache="d" * 64))
    assert added["reasons"] == ["setting flashinfer_install_jit_cache was set (every build stage)"]


def test_another_release_seal_and_an_unreadable_one_never_hold(release):
    _seal(release, "record")
    path = release["dir"] / "seal.json"
    seal = json.loads(path.read_text())
    seal["release"] = "77d1e05c9a10"
    path.write_text(json.dumps(seal))
    assert _seal(release)["reasons"] == ["the seal is release 77d1e05c9a10's, not 3f9c0a1b2d4e's (every build stage)"]
    path.write_text("{not json")
    assert _seal(release)["holds"] is False


def test_a_release_without_its_venv_stays_unsealed_and_check_mode_writes_nothing(release, tmp_path):
    none = tmp_path / "releases" / "none"
    none.mkdir()
    missing = ansible_run.module_file("sglang_release_seal", {"release_dir": str(none), "state": "record"}, tmp_path)
    assert missing["holds"] is False and missing["written"] is False and not missing.get("failed")
    assert "release none is not sealed" in str(missing["warnings"]) and not (none / "seal.json").exists()
    dry = _seal(release, "record", _ansible_check_mode=True)
    assert dry["written"] is False and not (release["dir"] / "seal.json").exists()


def _settings(tmp_path, host_vars):
    """__sglang_converge_seal_inputs of roles/sglang_converge/vars/main.yml for a localhost with ``host_vars``:
    (the play's Result, the JSON text the controller computed)."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": dict(
        host_vars, ansible_connection="local", ansible_python_interpreter=sys.executable)}}}))
    out = tmp_path / "inputs.json"
    res = ansible_run.play(tmp_path, hosts="localhost", tasks=[
        {"ansible.builtin.include_vars": {"file": os.path.join(ansible_run.ROOT, "roles/sglang_converge/vars/main.yml")}},
        {"ansible.builtin.copy": {"content": "{{ __sglang_converge_seal_inputs | to_json }}", "dest": str(out)}},
    ], inventory=str(inventory))
    assert res.ok, res.out[-3000:]
    return res, out.read_text()


def test_the_build_settings_are_hashed_on_the_controller(tmp_path):
    """roles/sglang_converge/vars/main.yml: the inventory's build settings by name, each a sha256; values that look
    like secrets never appear; the seal's own facts and the shared install's arguments are no settings."""
    res, text = _settings(tmp_path, {
        "sglang_source_extra_requirements": ["private-pkg @ https://user:tok-9f8e7d@example.invalid/p.whl"],
        "sglang_stack_preset": "current", "sglang_stack_sglang_commit": "abc", "sglang_service_port": 30000})
    inputs = json.loads(text)
    assert sorted(inputs) == ["sglang_source_extra_requirements", "sglang_stack_preset"]
    assert all(len(v) == 64 and int(v, 16) >= 0 for v in inputs.values())
    assert "tok-9f8e7d" not in text and "tok-9f8e7d" not in res.out


@pytest.mark.parametrize("name, stage", [
    ("torch", "torch"), ("torchvision", "torch"), ("nvidia-cublas", "torch"), ("pytorch-triton", "torch"),
    ("triton", "torch"), ("flashinfer-python", "flashinfer"), ("flashinfer-cubin", "flashinfer"),
    ("sgl-kernel", "kernel"), ("sglang-kernel", "kernel"), ("sglang", "sglang"), ("torchao", "sglang"),
    ("nvidia-ml-py", "torch"),
])
def test_which_stage_installs_a_distribution(name, stage):
    assert seal_lib.distribution_stage(name) == stage


def test_the_audit_reads_it_through_the_current_link_without_the_settings(release):
    """playbooks/audit.yml: release_dir is <root>/current (a link), no inputs: only what the host holds is compared."""
    _seal(release, "record")
    current = release["dir"].parent.parent / "current"
    current.symlink_to(release["dir"])
    audit = ansible_run.module_file("sglang_release_seal", {"release_dir": str(current), "python": sys.executable},
                                    release["tmp"], pythonpath=[release["site"]])
    assert audit["holds"] is True and audit["found"] is True and audit["inputs"] is None, audit["reasons"]
    _dist(release["site"], "six", "1.16.0")
    audit = ansible_run.module_file("sglang_release_seal", {"release_dir": str(current), "python": sys.executable},
                                    release["tmp"], pythonpath=[release["site"]])
    assert audit["found"] is True and audit["reasons"] == ["six 1.16.0 was installed (stage sglang)"]


def test_values_that_change_while_nothing_else_does_are_no_settings(tmp_path):
    """The preflight's GPU memory in use, the MemAvailable-sized service arguments, the service environment and a
    pending reboot change between two unchanged converges: none of them may break the seal."""
    _res, text = _settings(tmp_path, {
        "sglang_stack_gpus": [{"memory_used_mib": 1}], "sglang_stack_service_args": ["--mem-fraction-static", "0.8"],
        "sglang_stack_service_env": {"TRITON_PTXAS_PATH": "/x"}, "sglang_stack_reboot_required": True,
        "sglang_stack_gpu_identity": [{"uuid": "GPU-1", "compute_cap": "12.0"}]})
    assert sorted(json.loads(text)) == ["sglang_stack_gpu_identity"]
