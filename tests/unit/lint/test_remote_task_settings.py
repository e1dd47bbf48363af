"""Settings every task of a kind in roles/ needs on a real server, whatever the inventory says.

* ``ansible.builtin.script`` runs without ``ssh -tt``. Over SSH, Ansible's default ``use_tty = true`` sends script
  and raw commands with ``ssh -tt``; through the tty the script's stderr arrives inside its stdout (with CRLF line
  ends), and the roles parse that stdout as JSON (torch_nightly's probe broke on torch's NumPy warning;
  docs/testing.md, "No tty"). The task-level connection variable ``ansible_ssh_use_tty: false`` fixes it on any
  inventory.
* ``ansible.builtin.pip`` and ``ansible.builtin.git`` run with ``umask: "0022"``. A host hardened to umask 027 or
  077 (CIS benchmarks) would otherwise get a root-only venv or checkout, and the service, gateway and exporter users
  could not run its python (seen in the sandbox when its SSH session had umask 077; docs/testing.md, "Umask").

The walk keeps a new task from forgetting either; the Molecule scenarios run those tasks for real, over SSH.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _role_tasks(*modules):
    found = []
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            if any(m in task for m in modules):
                found.append((str(path.relative_to(ROOT)), task))
    return found


def _args(task, modules):
    return next(task[m] for m in modules if m in task)


SCRIPT = ("ansible.builtin.script", "script")
INSTALLERS = ("ansible.builtin.pip", "pip", "ansible.builtin.git", "git")


@pytest.mark.parametrize("modules, at_least, known", [
    (SCRIPT, 5, "roles/cuda_toolchain/tasks/install_pip.yml"),
    # the shared venv install holds the pip task of torch_nightly, cuda_toolchain and flashinfer
    (INSTALLERS, 7, "roles/sglang_stack/tasks/venv_install_steps.yml"),
])
def test_the_walk_finds_the_known_tasks(modules, at_least, known):
    # an empty walk would pass the checks below vacuously
    found = _role_tasks(*modules)
    assert len(found) >= at_least
    assert any(path == known for path, _task in found)


def test_every_script_task_turns_the_tty_off():
    missing = [f"{p}: {t.get('name', '<unnamed>')}" for p, t in _role_tasks(*SCRIPT)
               if (t.get("vars") or {}).get("ansible_ssh_use_tty") is not False]
    assert not missing, "script tasks without vars.ansible_ssh_use_tty: false (docs/testing.md, 'No tty'):\n" + "\n".join(missing)


def test_every_pip_and_git_task_sets_a_umask_other_users_can_read():
    missing = [f"{p}: {t.get('name', '<unnamed>')}" for p, t in _role_tasks(*INSTALLERS)
               if str(_args(t, INSTALLERS).get("umask", "")) != "0022"]
    assert not missing, "pip/git tasks without umask: \"0022\" (docs/testing.md, 'Umask'):\n" + "\n".join(missing)
