"""ansible.builtin.script probes run even in --check; their interpreter and arguments are quoted, so a venv path
with a space works and one with shell metacharacters runs nothing else."""

import os
import sys

import pytest

from harness import run_role


def _venv(tmp_path, name):
    venv = tmp_path / name
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, str(venv / "bin" / "python"))
    return str(venv)


@pytest.mark.parametrize("name", ["venv with space", "v;touch pwned;x", "v&&touch pwned"])
def test_flashinfer_probe_runs_with_the_path_as_one_word(tmp_path, name):
    venv = _venv(tmp_path, name)
    run = run_role(tmp_path, "flashinfer", {"sglang_stack_venv": venv, "flashinfer_protected_packages": ["torch"],
                                            "flashinfer_constraints_file": str(tmp_path / "constraints.txt")})
    assert not (tmp_path / "pwned").exists() and not os.path.exists(os.path.join(venv, "..", "pwned"))
    # the probe ran with the venv's python as one word (check_mode: false) and read the venv's distributions: this
    # test venv has no torch, which the role reports with the path exactly as given, before any change
    assert run.refused_before_change("%s has no torch" % venv), run
