"""sglang_source_build_env: what SGLang's build hooks read (SGLANG_BUILD_RUST_EXTS from 2026-08) reaches the package
build, and the install's stamp counts it only when set.

The install task runs as it is written, with a pip stand-in that records the environment it was started with (the
pip module's own calls, --version and the like, are answered too).
"""

import json

import ansible_run

TASK = "Install the SGLang package without dependencies"


def fake_pip(tmp_path):
    pip = tmp_path / "pip"
    pip.write_text("#!/bin/sh\ncase \"$1\" in\n"
                   "  --version|-V) echo 'pip 23.0.1 from %s (python 3.11)' ;;\n"
                   "  install) env | sort > '%s'; echo 'Successfully installed sglang-0.0.0' ;;\n"
                   "esac\nexit 0\n" % (tmp_path, tmp_path / "install.env"))
    pip.chmod(0o755)
    return str(pip)


def build_environment(tmp_path, **role_vars):
    variables = {"sglang_stack_source_dir": str(tmp_path / "src"), "sglang_source_package_subdir": "python",
                 "sglang_source_pretend_version": "", "sglang_source_build_env": {},
                 "__sglang_source_pip": fake_pip(tmp_path), "__sglang_source_pip_common": []}
    variables.update(role_vars)
    res = ansible_run.play(tmp_path, [ansible_run.role_task("sglang_source", "install.yml", TASK)], vars=variables)
    assert res.ok, res
    return dict(line.split("=", 1) for line in (tmp_path / "install.env").read_text().splitlines() if "=" in line)


def test_the_build_env_reaches_the_package_build_next_to_the_pretend_version(tmp_path):
    env = build_environment(tmp_path, sglang_source_pretend_version="0.0.0.dev0+gd55f1c28e2",
                            sglang_source_build_env={"SGLANG_BUILD_RUST_EXTS": "none"})
    assert env["SGLANG_BUILD_RUST_EXTS"] == "none"
    assert env["SETUPTOOLS_SCM_PRETEND_VERSION_FOR_SGLANG"] == "0.0.0.dev0+gd55f1c28e2"


def test_without_either_the_build_gets_neither(tmp_path):
    env = build_environment(tmp_path)
    assert "SGLANG_BUILD_RUST_EXTS" not in env
    assert "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_SGLANG" not in env


def test_the_stamp_counts_the_build_env_only_when_set(tmp_path):
    base = {"sglang_stack_sglang_commit": "a" * 40, "sglang_stack_source_dir": "/opt/sglang/src/sglang",
            "sglang_source_package_subdir": "python", "sglang_source_pretend_version": "",
            "sglang_source_dependencies": "all", "sglang_source_dependency_excludes": [],
            "sglang_source_extra_requirements": [], "sglang_source_protected_packages": ["torch"]}
    tasks = []
    for case, build_env in (("unset", {}), ("set", {"SGLANG_BUILD_RUST_EXTS": "none"})):
        tasks.append({"name": "stamp " + case, "vars": {"sglang_source_build_env": build_env},
                      "ansible.builtin.copy": {"dest": str(tmp_path / (case + ".json")), "mode": "0644",
                                               "content": "{{ __sglang_source_stamp | to_json }}"}})
    res = ansible_run.play(tmp_path, tasks, vars=base,
                           play_keys={"vars_files": [ansible_run.ROOT + "/roles/sglang_source/vars/main.yml"]})
    assert res.ok, res
    unset = json.loads((tmp_path / "unset.json").read_text())
    with_env = json.loads((tmp_path / "set.json").read_text())
    # a host installed before the variable existed keeps its stamp: no reinstall for an unset build environment
    assert sorted(unset) == ["commit", "dependencies", "dest", "excludes", "extra_requirements", "package_subdir",
                             "pretend_version", "protected", "torch"]
    assert with_env == dict(unset, build_env={"SGLANG_BUILD_RUST_EXTS": "none"})
