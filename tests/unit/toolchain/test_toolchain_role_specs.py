"""cuda_toolchain / torch_nightly / flashinfer: argument specs agree with defaults, and bad input fails in the
argument validation before any task of the role runs (real ansible-playbook runs against localhost)."""

import pathlib

import pytest
import yaml

import ansible_run

ROOT = pathlib.Path(ansible_run.ROOT)
ROLES = ("cuda_toolchain", "torch_nightly", "flashinfer")


def _load(role):
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return defaults, specs["argument_specs"]["main"]["options"]


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_specified_and_prefixed(role):
    defaults, options = _load(role)
    assert sorted(defaults) == sorted(options)
    assert all(name.startswith(role + "_") for name in defaults)
    assert all(opt.get("description") for opt in options.values())


@pytest.mark.parametrize("role", ROLES)
def test_literal_defaults_match_the_spec(role):
    defaults, options = _load(role)
    for name, value in defaults.items():
        if isinstance(value, str) and "{{" in value:
            continue  # templated defaults are documented by their rendered meaning
        if isinstance(value, list) and any(isinstance(v, str) and "{{" in v for v in value):
            continue
        assert options[name].get("default") == value, name


def _playbook(tmp_path, role, role_vars):
    play = [{"name": "bad input", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "roles": [{"role": "blackwell.sglang." + role, "vars": role_vars}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    return path


def _run(tmp_path, role, role_vars):
    return ansible_run.playbook(_playbook(tmp_path, role, role_vars), tmp_path, check=True, timeout=180)


@pytest.mark.slow
@pytest.mark.parametrize("role, role_vars, needle", [
    ("cuda_toolchain", {"cuda_toolchain_pip_timeout": "soon"}, "cuda_toolchain_pip_timeout"),
    ("torch_nightly", {"torch_nightly_no_index": "sometimes"}, "torch_nightly_no_index"),
    ("flashinfer", {"flashinfer_install_cubin": "maybe"}, "flashinfer_install_cubin"),
    ("flashinfer", {"flashinfer_python_extras": {"cu13": True}}, "flashinfer_python_extras"),
])
def test_bad_input_fails_in_argument_validation(tmp_path, role, role_vars, needle):
    res = _run(tmp_path, role, role_vars)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "Validating arguments against arg spec" in out
    assert needle in out
    # nothing after the validation ran: the recap has no ok/changed task besides the failed validation
    assert "ok=0" in out and "changed=0" in out, out


@pytest.mark.slow
def test_unsupported_distribution_fails_before_changes(tmp_path):
    # the facts as setup reports them on that host (a stand-in module sets them; gathering would read this machine)
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "fake_facts.py").write_text(
        "from ansible.module_utils.basic import AnsibleModule\n"
        "m = AnsibleModule(argument_spec={'facts': {'type': 'dict'}}, supports_check_mode=True)\n"
        "m.exit_json(changed=False, ansible_facts=m.params['facts'])\n")
    play = [{"name": "bad input", "hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [
        {"name": "Facts of a Pop!_OS 19.10 host", "fake_facts": {"facts": {
            "distribution": "Pop!_OS", "distribution_version": "19.10", "architecture": "x86_64"}}},
        {"name": "The role", "ansible.builtin.include_role": {"name": "blackwell.sglang.cuda_toolchain"},
         "vars": {"sglang_stack_cuda_install_method": "apt"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    res = ansible_run.playbook(tmp_path / "play.yml", tmp_path, check=True, cwd=tmp_path, timeout=180)
    out = res.out
    assert res.returncode != 0
    assert "Pop!_OS 19.10 (x86_64) maps to no NVIDIA CUDA apt repository (it would be 'popos1910'" in out
    assert "debian12, ubuntu2204, ubuntu2404" in out
    assert "sglang_stack_cuda_apt_distro_slug" in out
    assert "changed=0" in out
