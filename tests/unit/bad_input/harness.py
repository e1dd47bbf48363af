"""Drive roles in --check against localhost with host-changing modules blocked, and modules for real.

``run_role`` writes a one-task play (``include_role``), runs ``ansible-playbook --check`` with the
``block_changes`` callback (callback_plugins/), and returns a :class:`Run` with the output, the exit status and the
first blocked task (or None). A refusal is *before any change* when the run failed (rc 2) and no task was blocked.
"""

import json
import os
import pathlib
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
COLLECTIONS = os.path.join(ROOT, "collections")
MODULES = os.path.join(ROOT, "plugins", "modules")


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


def ansible_env(tmp_path, extra=None):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_FACT_CACHING="memory",
               ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
               ANSIBLE_CALLBACKS_ENABLED="block_changes", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"), ANSIBLE_REMOTE_TEMP=str(tmp_path / "ansible-remote"),
               BAD_INPUT_BLOCK_LOG=str(tmp_path / "blocked.log"))
    env.update(extra or {})
    return env


def run_play(tmp_path, tasks, extra_vars=None, check=True, env=None, timeout=240):
    exe = pathlib.Path(sys.executable).parent / "ansible-playbook"
    play = [{"name": "bad input", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable}, "tasks": tasks}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    cmd = [str(exe), "-i", "localhost,", str(tmp_path / "play.yml")]
    if extra_vars:
        (tmp_path / "vars.json").write_text(json.dumps(extra_vars))
        cmd += ["-e", "@" + str(tmp_path / "vars.json")]
    if check:
        cmd.append("--check")
    log = tmp_path / "blocked.log"
    if log.exists():
        log.unlink()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(tmp_path), env=ansible_env(tmp_path, env),
                          timeout=timeout, check=False)
    blocked = log.read_text().strip() if log.exists() else None
    return Run(proc, blocked)


def run_role(tmp_path, role, extra_vars=None, tasks_from=None, env=None, check=True):
    task = {"name": "the role", "ansible.builtin.include_role": {"name": "blackwell.sglang." + role}}
    if tasks_from:
        task["ansible.builtin.include_role"]["tasks_from"] = tasks_from
    return run_play(tmp_path, [task], extra_vars, check=check, env=env)


def run_module(name, args, tmp_path, timeout=120, env=None):
    """A module as Ansible runs it (a subprocess reading ANSIBLE_MODULE_ARGS); returns its JSON result."""
    path = tmp_path / ("args-%s.json" % name)
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    full_env = dict(os.environ, PYTHONPATH=COLLECTIONS)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, os.path.join(MODULES, name + ".py"), str(path)], env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError("module %s printed no JSON (rc %s): %s %s" % (name, proc.returncode, proc.stdout, proc.stderr))
