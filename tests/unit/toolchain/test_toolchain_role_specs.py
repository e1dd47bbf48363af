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
    ("cuda_toolchain", {"cuda_toolchain_method": "yum"}, "cuda_toolchain_method"),
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
    res = _run(tmp_path, "cuda_toolchain", {"cuda_toolchain_method": "apt", "ansible_distribution": "Pop!_OS",
                                            "ansible_distribution_version": "19.10", "ansible_architecture": "x86_64"})
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "No NVIDIA CUDA apt repository for Pop!_OS 19.10" in out
    assert "debian12, ubuntu2204, ubuntu2404" in out
    assert "cuda_toolchain_apt_distro_slug" in out
    assert "changed=0" in out
