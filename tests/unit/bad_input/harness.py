"""Drive roles in --check against localhost with host-changing modules blocked, and modules for real.

``run_role`` writes a one-task play (``include_role``), runs ``ansible-playbook --check`` (tests/unit/ansible_run.py)
with the ``block_changes`` callback (callback_plugins/), and returns a :class:`Run` with the output, the exit status and the
first blocked task (or None). A refusal is *before any change* when the run failed (rc 2) and no task was blocked.
"""

import os

import ansible_run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = ansible_run.ROOT


class Run(object):
    def __init__(self, proc, blocked):
        self.rc = proc.returncode
        self.out = proc.stdout + proc.stderr
        self.blocked = blocked

    def refused_before_change(self, *needles):
        """The run failed, no host-changing task started, and the output names every needle."""
        missing = [n for n in needles if n not in self.out]
        return self.rc not in (0, 97) and self.blocked is None and not missing

    def failed_task(self):
        """The name of the task that failed (the last ``TASK [...]`` header before the first ``fatal:``), else None."""
        head = self.out.split("\nfatal: ", 1)[0] if "\nfatal: " in self.out else None
        if head is None or "TASK [" not in head:
            return None
        return head.rsplit("TASK [", 1)[1].split("]", 1)[0]

    def refused_by(self, task_part, *needles):
        """Refused before any change, by the task whose name contains ``task_part`` (the role's input check: nothing
        of the host was read before it), the output naming every needle."""
        return self.refused_before_change(*needles) and task_part in (self.failed_task() or "")

    def __repr__(self):
        return "Run(rc=%s, blocked=%r)\n%s" % (self.rc, self.blocked, self.out[-6000:])


def block_env(tmp_path, extra=None):
    """ansible_run's environment plus the block_changes callback (and its log) and a remote temp under tmp_path."""
    env = {"ANSIBLE_CALLBACK_PLUGINS": os.path.join(HERE, "callback_plugins"),
           "ANSIBLE_CALLBACKS_ENABLED": "block_changes", "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
           "BAD_INPUT_BLOCK_LOG": str(tmp_path / "blocked.log")}
    env.update(extra or {})
    return env


def run_play(tmp_path, tasks, extra_vars=None, check=True, env=None, timeout=240):
    log = tmp_path / "blocked.log"
    if log.exists():
        log.unlink()
    proc = ansible_run.play(tmp_path, tasks, name="bad input", extra_vars=extra_vars, check=check,
                            env=block_env(tmp_path, env), cwd=tmp_path, timeout=timeout)
    blocked = log.read_text().strip() if log.exists() else None
    return Run(proc, blocked)


def run_role(tmp_path, role, extra_vars=None, tasks_from=None, env=None, check=True):
    task = {"name": "the role", "ansible.builtin.include_role": {"name": "blackwell.sglang." + role}}
    if tasks_from:
        task["ansible.builtin.include_role"]["tasks_from"] = tasks_from
    return run_play(tmp_path, [task], extra_vars, check=check, env=env)


def run_module(name, args, tmp_path, timeout=120, env=None):
    """A module as Ansible runs it (a subprocess reading ANSIBLE_MODULE_ARGS); returns its JSON result."""
    return ansible_run.module_file(name, args, tmp_path, env=env, timeout=timeout)
