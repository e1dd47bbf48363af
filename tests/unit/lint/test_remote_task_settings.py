"""Every ``ansible.builtin.script`` task in roles/ runs without ``ssh -tt``.

Over SSH, Ansible's default ``use_tty = true`` sends script and raw commands with ``ssh -tt``; through the tty the
script's stderr arrives inside its stdout (with CRLF line ends), and the roles parse that stdout as JSON
(torch_nightly's probe broke on torch's NumPy warning; docs/testing.md, "No tty"). The task-level connection
variable ``ansible_ssh_use_tty: false`` fixes it on any inventory; this test keeps a new script task from forgetting
it. The Molecule scenarios (SSH with the default use_tty) run those tasks for real.
"""

from __future__ import annotations

import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
SCRIPT_KEYS = ("ansible.builtin.script", "script")


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _script_tasks():
    found = []
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            if any(k in task for k in SCRIPT_KEYS):
                found.append((path.relative_to(ROOT), task))
    return found


def test_roles_have_script_tasks():
    # the walk finds the known ones (torch_nightly's probe among them); an empty walk would pass vacuously
    names = {(str(p), t.get("name", "")) for p, t in _script_tasks()}
    assert len(names) >= 8
    assert any(path == "roles/torch_nightly/tasks/verify.yml" for path, _name in names)


def test_every_script_task_turns_the_tty_off():
    missing = [f"{p}: {t.get('name', '<unnamed>')}" for p, t in _script_tasks()
               if (t.get("vars") or {}).get("ansible_ssh_use_tty") is not False]
    assert not missing, "script tasks without vars.ansible_ssh_use_tty: false (docs/testing.md, 'No tty'):\n" + "\n".join(missing)
