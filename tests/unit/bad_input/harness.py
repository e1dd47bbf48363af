"""Drive roles in --check against localhost with host-changing modules blocked, and modules for real.

``run_role`` writes a one-task play (``include_role``), runs ``ansible-playbook --check`` (tests/unit/ansible_run.py)
with the ``block_changes`` callback (callback_plugins/), and returns a :class:`Run` with the output, the exit status and the
first blocked task (or None). A refusal is *before any change* when the run failed (rc 2) and no task was blocked.
``Batches`` (the ``batches`` fixture of conftest.py) answers many such cases from one run (below).
"""

import fcntl
import json
import os
import pathlib
import re
import subprocess
import sys

import yaml

import ansible_run

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = ansible_run.ROOT


class Run(object):
    def __init__(self, proc, blocked):
        self.rc = proc.returncode
        self.out = proc.stdout + proc.stderr
        self.whole = self.out
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


# --- batches: many parametrized cases of one kind in one ansible-playbook run ------------------------------------------
#
# A parametrized test of the kind above pays one ansible-playbook start (about half of its CPU) for one role include.
# A batch runs every case of a list at once: one play over one local host per case (the case id is the host name, its
# values are that host's inventory variables, as a user's group_vars are), each host including its case's role. The
# per-host result is taken from that host's own lines (its first ``fatal:`` with the task header above it, and its
# recap). The batch is an accelerator, never the authority: a case whose batch result does not pass its test (a
# regression, or a run ended by another case's blocked task, which leaves the rest undecided) is run again alone with
# run_role, and that run is the one asserted on. Under pytest-xdist the workers share one batch per list: the first
# to need it runs it under a file lock in the run's common temporary directory, the others read its result.

_FATAL = re.compile(r"^fatal: \[([^\]]+)\]: FAILED! => (.*)$")
_TASK = re.compile(r"^TASK \[(.*)\] \**$")
_RECAP = re.compile(r"^(\S+)\s+:\s+ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)")


class HostRun(Run):
    """One case's share of a batch, shaped as :class:`Run` (``rc``, ``out``, ``blocked``): ``out`` is the host's first
    failure as the single-host output shows it (the task header, then the ``fatal:`` line and its message);
    ``whole`` is the batch's whole output (what a secret must not be found in)."""

    def __init__(self, rc, out, blocked, whole=""):  # pylint: disable=super-init-not-called
        self.rc = rc
        self.out = out
        self.blocked = blocked
        self.whole = whole


def _parse_batch(stdout, hosts, blocked):
    """Each host's result from the batch's output: its first failure that was not ignored (rc 2) when its recap
    says it failed; rc 97 (undecided, ``blocked``) for every host when the run has no recap (it ended at a blocked
    task, or a rescued failure could have gone on); rc 0 for a host whose recap has no failure."""
    first = {}
    task = None
    recap = {}
    lines = stdout.splitlines()
    for number, line in enumerate(lines):
        head = _TASK.match(line)
        if head:
            task = head.group(1)
            continue
        fatal = _FATAL.match(line)
        ignored = number + 1 < len(lines) and lines[number + 1].strip() == "...ignoring"
        if fatal and not ignored and fatal.group(1) in hosts and fatal.group(1) not in first:
            try:
                msg = json.loads(fatal.group(2)).get("msg", "")
            except ValueError:
                msg = fatal.group(2)
            first[fatal.group(1)] = "TASK [%s] ***\n%s\n%s\n" % (task, line, msg)
        end = _RECAP.match(line)
        if end and end.group(1) in hosts:
            recap[end.group(1)] = int(end.group(2)) + int(end.group(3))
    results = {}
    for host in hosts:
        if host not in recap:
            results[host] = {"rc": 97, "out": "", "blocked": blocked}
        elif recap[host] and host in first:
            results[host] = {"rc": 2, "out": first[host], "blocked": None}
        else:
            results[host] = {"rc": 2 if recap[host] else 0, "out": "", "blocked": None}
    return results


def run_batch(workdir, cases, timeout=600):
    """Run ``cases`` ({case id: (role, tasks_from or None, vars)}) as one --check play, one local host per case.

    :returns: {case id: {"rc", "out", "blocked"}} (see :class:`HostRun`), plus ``"__batch__"``: the run's exit
        status and whole output.
    """
    os.makedirs(workdir, exist_ok=True)
    hosts, includes = {}, {}
    for case_id, (role, tasks_from, variables) in cases.items():
        entry = "%s:%s" % (role, tasks_from or "main")
        hosts[case_id] = dict(variables or {}, ansible_connection="local", ansible_python_interpreter=sys.executable,
                              bad_input_entry=entry)
        # one static include per entry point: Ansible merges the include results of one include_role task whose
        # tasks_from is templated per host (its include arguments compare equal without it), so a templated one
        # would run one host's entry point for another
        includes[entry] = {"name": "the role (%s)" % entry, "when": "bad_input_entry == %s" % json.dumps(entry),
                           "ansible.builtin.include_role": {"name": "blackwell.sglang." + role,
                                                            "tasks_from": tasks_from or "main"}}
    inventory = os.path.join(workdir, "inventory.yml")
    with open(inventory, "w", encoding="utf-8") as handle:
        yaml.safe_dump({"all": {"hosts": hosts}}, handle, sort_keys=False)
    tmp = pathlib.Path(workdir)
    log = tmp / "blocked.log"
    path = ansible_run.write_play(tmp, list(includes.values()), hosts="all", name="bad input batch")
    proc = ansible_run.playbook(path, tmp, inventory=inventory, check=True, python=False, timeout=timeout,
                                env=block_env(tmp, {"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}), cwd=tmp)
    blocked = log.read_text().strip() if log.exists() else None
    results = _parse_batch(proc.stdout, set(cases), blocked)
    results["__batch__"] = {"rc": proc.rc, "out": proc.stdout + proc.stderr}
    return results


class Batches(object):
    """One batch result per list of cases for the whole pytest run (see the comment above)."""

    def __init__(self, root):
        self.root = root
        self._loaded = {}

    def _results(self, name, cases):
        if name not in self._loaded:
            os.makedirs(self.root, exist_ok=True)
            path = os.path.join(self.root, name + ".json")
            with open(os.path.join(self.root, name + ".lock"), "w", encoding="utf-8") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not os.path.exists(path):
                    try:
                        results = run_batch(os.path.join(self.root, name), cases)
                    except (subprocess.SubprocessError, OSError) as exc:   # every case then runs alone, once each
                        results = {"__batch__": {"rc": None, "out": "", "error": repr(exc)}}
                    with open(path + ".tmp", "w", encoding="utf-8") as handle:
                        json.dump(results, handle)
                    os.rename(path + ".tmp", path)
                with open(path, encoding="utf-8") as handle:
                    self._loaded[name] = json.load(handle)
        return self._loaded[name]

    def run(self, name, cases, case_id, passes, tmp_path):
        """Case ``case_id`` of the list ``name``: its batch result when ``passes(result)`` holds, else the result of
        running it alone (:func:`run_role`), the one to assert on."""
        results = self._results(name, cases)
        got = results.get(case_id)
        if got is not None:
            host = HostRun(got["rc"], got["out"], got["blocked"], results["__batch__"]["out"])
            if passes(host):
                return host
        with open(os.path.join(self.root, name + ".alone"), "a", encoding="utf-8") as handle:
            handle.write(case_id + "\n")      # which cases the batch could not answer (a regression shows here first)
        role, tasks_from, variables = cases[case_id]
        return run_role(tmp_path, role, variables, tasks_from=tasks_from)
