"""A new user's own inventory and the installed collection: misspelt variables are reported with the nearest real
name, the stack presets are the collection's (any inventory gets a consistent stack), blackwell.sglang.new_inventory
writes an inventory of one's own, and nothing writes into the installed collection (refused, naming the variable).

The installed-collection tests build the tarball and install it into a temporary collections path (no dependencies,
offline), then run the collection's own roles and playbooks from there, as a user would."""

import json
import os
import pathlib
import subprocess

import pytest
import yaml

import ansible_run
from harness import ROOT, block_env, run_play, run_role

from ansible_collections.blackwell.sglang.plugins.plugin_utils import _variable_names

BIN = pathlib.Path(ansible_run.BIN)


CONTRACT = yaml.safe_load((pathlib.Path(ROOT) / "roles" / "sglang_stack" / "defaults" / "main.yml").read_text())


# --- misspelt variables ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value, nearest", [
    ("sglang_servcie_tp_size", 8, "sglang_stack_service_tp_size"),           # the example: a misspelt role prefix
    ("sglang_stack_service_tp", 8, "sglang_stack_service_tp_size"),     # the contract's prefix, a name cut short
    ("torch_nighlty_python", "/usr/bin/python3", "torch_nightly_python"),
    ("preflight_min_disk", 100, "preflight_min_disk_gb"),
    ("sglang_service_api_key_env", "SGLANG_KEY", "sglang_service_api_key"),
    ("blackwell_stack", "current", "sglang_stack_preset"),              # the name the collection no longer reads
], ids=str)
def test_a_misspelt_variable_is_named_with_the_nearest_real_one(tmp_path, name, value, nearest):
    run = run_role(tmp_path, "preflight", {name: value})
    warning = [line for line in run.out.splitlines() if line.startswith("[WARNING]: " + name + " ")]
    assert warning and nearest in warning[0], run
    # a warning only: the preflight goes on to read the host
    assert "Read GPUs, driver, topology and PCIe P2P state" in run.out, run


def test_the_switch_refuses_a_misspelt_variable(tmp_path):
    run = run_role(tmp_path, "preflight", {"sglang_servcie_tp_size": 8, "preflight_unknown_variables": "fail"})
    assert run.refused_by("Look for host variables", "sglang_servcie_tp_size", "did you mean sglang_stack_service_tp_size?",
                          "preflight_unknown_variables: fail"), run


def test_a_variable_of_ones_own_can_be_ignored(tmp_path):
    run = run_role(tmp_path, "preflight", {"sglang_service_owner_team": "ml", "preflight_unknown_variables": "fail",
                                           "preflight_unknown_variables_ignore": ["sglang_service_owner_team"]})
    assert "sglang_service_owner_team" not in run.out.split("Look for host variables", 1)[1].split("TASK [", 1)[0], run
    assert "Read GPUs, driver, topology and PCIe P2P state" in run.out, run


@pytest.mark.parametrize("inventory", ["blackwell", "sandbox"])
def test_the_shipped_inventories_have_no_unknown_variable(tmp_path, inventory):
    """Every variable the shipped inventories set is one a role reads (ansible-inventory's own view of each host)."""
    res, listing = ansible_run.inventory(os.path.join(ROOT, "inventories", inventory), tmp_path,
                                         env=block_env(tmp_path), cwd=ROOT)
    assert listing is not None, res
    hostvars = listing["_meta"]["hostvars"]
    assert hostvars
    known, inputs = _variable_names.known_names(ROOT), _variable_names.input_names(ROOT)
    prefixes = _variable_names.role_prefixes(ROOT)
    for host, variables in hostvars.items():
        assert _variable_names.unknown(variables, known, prefixes, inputs) == [], host


def test_unknown_reports_and_leaves_alone():
    known, prefixes = {"sglang_stack_service_tp_size", "preflight_min_disk_gb"}, ["sglang_service_", "preflight_"]
    found = _variable_names.unknown(["sglang_servcie_tp_size", "preflight_min_disk", "sandbox_x", "__preflight_x",
                                     "preflight__old", "sglang_stack_service_tp_size", "vault_key"], known, prefixes)
    assert [(u["name"], u["nearest"]) for u in found] == [("preflight_min_disk", "preflight_min_disk_gb"),
                                                          ("sglang_servcie_tp_size", "sglang_stack_service_tp_size")]


def _shown(out, label):
    """The JSON a debug task printed after ``label`` (either result format: yaml or json)."""
    line = next(line for line in out.splitlines() if label + "{" in line or label + "[" in line)
    text = line[line.index(label) + len(label):]
    text = text[:max(text.rfind("}"), text.rfind("]")) + 1]
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(text.replace('\\"', '"'))


# --- the presets -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset", sorted(CONTRACT["sglang_stack_presets"]))
def test_any_inventory_gets_the_presets_consistent_stack(tmp_path, preset):
    """Without a pin of its own an inventory gets the preset's commit, torch, its index and its companions."""
    pins = CONTRACT["sglang_stack_presets"][preset]
    tasks = [{"name": "torch's checks, public: its defaults as the role resolves them",
              "ansible.builtin.include_role": {"name": "blackwell.sglang.torch_nightly", "tasks_from": "validate", "public": True}},
             {"name": "show", "ansible.builtin.debug": {"msg": (
                 "STACK {{ {'ref': sglang_stack_sglang_ref, 'torch': sglang_stack_torch_version,"
                 " 'cuda': sglang_stack_cuda_version, 'fi': sglang_stack_flashinfer_version,"
                 " 'index': torch_nightly_index_url, 'extras': torch_nightly_extra_packages} | to_json }}")}}]
    run = run_play(tmp_path, tasks, {"sglang_stack_preset": preset})
    got = _shown(run.out, "STACK ")
    assert got == {"ref": pins["sglang_ref"], "torch": pins["torch"], "cuda": pins["cuda"], "fi": str(pins["flashinfer"]),
                   "index": pins["torch_index_url"],
                   "extras": ["torchvision==" + pins["torchvision"], "torchaudio==" + pins["torchaudio"]]}, run
    assert len(pins["sglang_ref"]) == 40


def test_an_inventory_preset_is_selected_like_a_shipped_one(tmp_path):
    """sglang_stack_preset_<name> (what playbooks/stack_refresh.yml writes) is selected by sglang_stack_preset: <name>,
    and the preflight does not report it as an unknown variable."""
    name = "20261201_0123456789"
    pins = dict(CONTRACT["sglang_stack_presets"]["current"], sglang_ref="0123456789" * 4, flashinfer="0.6.18")
    tasks = [{"name": "torch's checks, public: the contract as the role resolves it",
              "ansible.builtin.include_role": {"name": "blackwell.sglang.torch_nightly", "tasks_from": "validate", "public": True}},
             {"name": "show", "ansible.builtin.debug": {"msg": (
                 "STACK {{ {'ref': sglang_stack_sglang_ref, 'torch': sglang_stack_torch_version,"
                 " 'fi': sglang_stack_flashinfer_version} | to_json }}")}}]
    run = run_play(tmp_path, tasks, {"sglang_stack_preset": name, "sglang_stack_preset_" + name: pins})
    assert _shown(run.out, "STACK ") == {"ref": pins["sglang_ref"], "torch": pins["torch"], "fi": "0.6.18"}, run
    known, prefixes = _variable_names.known_names(ROOT), _variable_names.role_prefixes(ROOT)
    assert _variable_names.unknown(["sglang_stack_preset_" + name], known, prefixes) == []
    # a name close to the pattern but not of it is still reported
    reported = _variable_names.unknown(["sglang_stack_presetx"], known, prefixes)
    assert [u["name"] for u in reported] == ["sglang_stack_presetx"]


def test_a_torch_of_ones_own_gets_no_preset_companions(tmp_path):
    tasks = [{"name": "torch", "ansible.builtin.include_role": {"name": "blackwell.sglang.torch_nightly", "tasks_from": "validate",
                                                                "public": True}},
             {"name": "show", "ansible.builtin.debug": {"msg": "EXTRAS {{ torch_nightly_extra_packages | to_json }}"}}]
    run = run_play(tmp_path, tasks, {"sglang_stack_torch_version": "2.13.0+cpu", "torch_nightly_expected_cuda": None})
    assert _shown(run.out, "EXTRAS ") == [], run


# --- an inventory of one's own -----------------------------------------------------------------------------------

def _playbook(tmp_path, name, extra, env=None):
    """The collection's playbook by its name, run from tmp_path as a user runs it (``env`` may point at the installed
    collection)."""
    full = block_env(tmp_path, dict(env or {}, BAD_INPUT_BLOCK="0"))
    return ansible_run.playbook("blackwell.sglang." + name, tmp_path, extra_vars=extra, env=full, cwd=tmp_path,
                                timeout=240)


def test_new_inventory_writes_an_inventory_that_resolves(tmp_path):
    dest = tmp_path / "mine"
    proc = _playbook(tmp_path, "new_inventory", {"new_inventory_dir": str(dest), "new_inventory_host": "10.1.2.3",
                                                 "new_inventory_preset": "current"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("hosts.yml", "ansible.cfg", "group_vars/all/sglang_stack.yml", "group_vars/all/sglang_service.yml"):
        assert (dest / name).is_file(), name
    res, listing = ansible_run.inventory(dest, tmp_path, env=block_env(tmp_path))
    assert listing is not None, res
    host = listing["_meta"]["hostvars"]["sglang-01"]
    assert host["ansible_host"] == "10.1.2.3" and host["sglang_stack_preset"] == "current"
    assert host["sglang_service_api_key"] == "{{ vault_sglang_api_key }}"
    # a second run keeps what the user has edited since
    (dest / "hosts.yml").write_text("# mine\n")
    again = _playbook(tmp_path, "new_inventory", {"new_inventory_dir": str(dest)})
    assert again.returncode == 0 and (dest / "hosts.yml").read_text() == "# mine\n", again.stdout
    assert "kept as they were: hosts.yml" in again.stdout


@pytest.mark.parametrize("extra, needle", [
    ({}, "new_inventory_dir is not set"),
    ({"new_inventory_preset": "newest"}, "new_inventory_preset must be one of original_20260307, current"),
    ({"new_inventory_host": "10.0.0.1; id"}, "new_inventory_host must be an IP address or a host name"),
], ids=["no-dir", "preset", "host"])
def test_new_inventory_refuses_before_writing(tmp_path, extra, needle):
    if extra:
        extra = dict(extra, new_inventory_dir=str(tmp_path / "mine"))
    proc = _playbook(tmp_path, "new_inventory", extra)
    assert proc.returncode != 0 and needle in proc.stdout, proc.stdout
    assert not (tmp_path / "mine").exists()


# --- the installed collection ------------------------------------------------------------------------------------

@pytest.fixture(name="installed", scope="module")
def fixture_installed(tmp_path_factory):
    """(collections path, collection directory) of this checkout built and installed as a user installs it."""
    work = tmp_path_factory.mktemp("installed")
    build = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(work / "dist"), ROOT],
                           capture_output=True, text=True, cwd=ROOT, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    tarball = next((work / "dist").glob("blackwell-sglang-*.tar.gz"))
    install = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "-p",
                              str(work / "collections"), str(tarball)], capture_output=True, text=True, cwd=str(work), check=False)
    assert install.returncode == 0, install.stdout + install.stderr
    (work / "ansible.cfg").write_text("[defaults]\n")
    coll = work / "collections" / "ansible_collections" / "blackwell" / "sglang"
    assert (coll / "MANIFEST.json").is_file()
    return {"ANSIBLE_COLLECTIONS_PATH": str(work / "collections"), "ANSIBLE_CONFIG": str(work / "ansible.cfg")}, coll


def test_new_inventory_refuses_the_installed_collection(tmp_path, installed):
    env, coll = installed
    proc = _playbook(tmp_path, "new_inventory", {"new_inventory_dir": str(coll / "inventories" / "mine")}, env=env)
    assert proc.returncode != 0 and "new_inventory_dir" in proc.stdout and "inside the installed collection" in proc.stdout, proc.stdout
    assert not (coll / "inventories" / "mine").exists()
    # outside it, the installed playbook writes the inventory
    ok = _playbook(tmp_path, "new_inventory", {"new_inventory_dir": str(tmp_path / "mine")}, env=env)
    assert ok.returncode == 0 and (tmp_path / "mine" / "hosts.yml").is_file(), ok.stdout


@pytest.mark.parametrize("role, tasks_from, variable, rel", [
    ("sglang_audit", "compare", "sglang_audit_report", ".cache/audit/drift.json"),
    ("sglang_audit", "read", "sglang_audit_report", "audit/drift.json"),
    ("sglang_model", None, "sglang_model_controller_cache", ".cache/models"),
    ("sgl_kernel_sm120", None, "sgl_kernel_sm120_fetch_dir", ".cache/artifacts/sgl-kernel"),
    ("torch_nightly", None, "torch_nightly_wheelhouse_mirror", ".cache/wheels"),
    ("sglang_benchmark", None, "sglang_benchmark_results_dir", "inventories/blackwell/benchmark-results"),
])
def test_nothing_is_written_into_the_installed_collection(tmp_path, installed, role, tasks_from, variable, rel):
    env, coll = installed
    run = run_role(tmp_path, role, {variable: str(coll / rel)}, tasks_from=tasks_from, env=env)
    assert run.refused_by("Check ", variable, "inside the installed collection", "XDG_CACHE_HOME"), run
    assert not (coll / rel).exists()


def test_the_defaults_write_outside_the_installed_collection(tmp_path, installed):
    """From the installed collection, with no inventory directory: the model copy and the audit's report default to
    $XDG_CACHE_HOME/blackwell-sglang, not to the playbook's directory inside the collection."""
    env, coll = installed
    model = {"name": "blackwell.sglang.sglang_model", "tasks_from": "service_env", "public": True}
    audit = {"name": "blackwell.sglang.sglang_audit", "tasks_from": "read", "public": True}
    tasks = [{"name": "the model role's defaults, public", "ansible.builtin.include_role": model},
             {"name": "the audit's read, public", "ansible.builtin.include_role": audit},
             {"name": "show", "ansible.builtin.debug": {
                 "msg": "PATHS {{ [sglang_model_controller_cache, sglang_audit_report, sglang_benchmark_results_dir | default('')] | to_json }}"}}]
    run = run_play(tmp_path, tasks, env=dict(env, XDG_CACHE_HOME=str(tmp_path / "xdg")))
    cache, report, _bench = _shown(run.out, "PATHS ")
    assert cache == "%s/blackwell-sglang/models" % (tmp_path / "xdg"), run
    assert report == "%s/blackwell-sglang/audit/drift.json" % (tmp_path / "xdg"), run
    assert str(coll) not in cache + report
