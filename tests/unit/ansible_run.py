"""The unit tests' one way to run Ansible: ``ansible-playbook``, ``ansible`` and ``ansible-inventory`` against this
checkout.

Imported by module name (``import ansible_run``: tests/unit is on ``sys.path`` through its conftest.py), like
``_playbook_standins``; no fixture, so it works the same under pytest-xdist.

* :func:`playbook` runs a playbook file; :func:`play` writes a one-play playbook from a task list (on localhost
  unless ``hosts`` and ``inventory`` say otherwise) and runs it; :func:`module` runs one module ad hoc on localhost
  and returns its result. All three return a :class:`Result` (exit status, output, ``recap()``).
* :func:`inventory` runs ``ansible-inventory -i <path> --list``: ``(Result, the listing)``, the listing being the
  parsed JSON, or None when the run failed or printed no JSON.
* :func:`env` is the environment every run gets: this checkout's ``ansible.cfg`` and ``collections/`` link (so
  ``blackwell.sglang.*`` is this tree), no colour, the ``default`` stdout callback, facts cached in memory only,
  no retry files, the C.UTF-8 locale, and the controller's temporary files under the test's ``tmp_path``. ``env=`` adds or overrides.
* :func:`role_task` reads one task of a role's task file by name, for a test that runs exactly that task.
* :func:`module_file` runs a module's file the way Ansible runs it on a host (its arguments file, no controller),
  for the many quick module tests.

The default inventory is ``localhost,`` on the local connection with this interpreter (``sys.executable``, the one
that has the collection's Python dependencies); with an inventory of its own, a test sets ``ansible_connection``
and ``ansible_python_interpreter`` there. A run that exceeds ``timeout`` raises ``subprocess.TimeoutExpired``.
"""

import copy
import itertools
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
COLLECTIONS = os.path.join(ROOT, "collections")
BIN = os.path.dirname(sys.executable)
PLAYBOOK = os.path.join(BIN, "ansible-playbook")
ANSIBLE = os.path.join(BIN, "ansible")
INVENTORY = os.path.join(BIN, "ansible-inventory")
LOCALHOST = "localhost,"

_SEQ = itertools.count()
_RECAP = re.compile(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", re.M)


class Result(object):
    """One Ansible run: ``rc``, ``stdout``, ``stderr``, ``out`` (both), ``argv``."""

    def __init__(self, proc, argv):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.out = proc.stdout + proc.stderr
        self.argv = argv

    @property
    def ok(self):
        return self.rc == 0

    @property
    def returncode(self):
        """``rc``, under subprocess's name."""
        return self.rc

    def recap(self, host="localhost"):
        """``{"ok": N, "changed": N, "failed": N, ...}`` of ``host``'s last PLAY RECAP line (KeyError when none)."""
        lines = [m.group(2) for m in _RECAP.finditer(self.stdout) if m.group(1) == host]
        if not lines:
            raise KeyError("no PLAY RECAP line for %s in:\n%s" % (host, self.out[-3000:]))
        return {k: int(v) for k, v in (field.split("=") for field in lines[-1].split())}

    def __repr__(self):
        return "Result(rc=%s, argv=%r)\n%s" % (self.rc, self.argv, self.out[-6000:])


def env(tmp_path=None, extra=None):
    """The environment of an Ansible run (see the module docstring); ``extra`` is applied last."""
    result = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                  ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_STDOUT_CALLBACK="default",
                  ANSIBLE_FACT_CACHING="memory", ANSIBLE_RETRY_FILES_ENABLED="0", LC_ALL="C.UTF-8")
    if tmp_path is not None:
        result["ANSIBLE_LOCAL_TEMP"] = os.path.join(str(tmp_path), "ansible-local")
    result.update(extra or {})
    return result


def _need(exe):
    if not os.path.exists(exe):
        pytest.skip("%s is not installed next to this Python" % os.path.basename(exe))


def _run(argv, tmp_path, env_extra, cwd, timeout):
    proc = subprocess.run(argv, capture_output=True, text=True, env=env(tmp_path, env_extra),
                          cwd=str(cwd or ROOT), timeout=timeout, check=False)
    return Result(proc, argv)


def _common(inventory, extra_vars, check, diff, tags, skip_tags, limit, tmp_path, python):
    argv = ["-i", str(inventory)]
    if str(inventory) == LOCALHOST:
        argv += ["-c", "local"]
    if python:
        argv += ["-e", "ansible_python_interpreter=%s" % python]
    if extra_vars:
        if tmp_path is not None:
            path = os.path.join(str(tmp_path), "extra-vars-%d.json" % next(_SEQ))
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(extra_vars, handle)
            argv += ["-e", "@" + path]
        else:
            argv += ["-e", json.dumps(extra_vars)]
    argv += ["--check"] if check else []
    argv += ["--diff"] if diff else []
    argv += ["--tags", ",".join(tags)] if tags else []
    argv += ["--skip-tags", ",".join(skip_tags)] if skip_tags else []
    argv += ["--limit", limit] if limit else []
    return argv


def playbook(path, tmp_path=None, inventory=LOCALHOST, extra_vars=None, check=False, diff=False, tags=None,
             skip_tags=None, limit=None, args=(), env=None, cwd=None, timeout=300, python=None):
    """``ansible-playbook <path>``; ``extra_vars`` (a mapping) go in as one JSON ``-e``; ``args`` are appended.

    ``python``: the interpreter for the hosts, as an extra variable; by default this one on the ``localhost,``
    inventory and none (the inventory's own, or discovery) on any other. ``python=False`` passes none."""
    _need(PLAYBOOK)
    if python is None:
        python = sys.executable if str(inventory) == LOCALHOST else None
    argv = [PLAYBOOK] + _common(inventory, extra_vars, check, diff, tags, skip_tags, limit, tmp_path, python) \
        + [str(path)] + list(args)
    return _run(argv, tmp_path, env, cwd, timeout)


def write_play(tmp_path, tasks=None, hosts="localhost", vars=None, name="test play", gather_facts=False,
               file="play.yml", **play):
    """Write a one-play playbook (``tasks`` and any other play keys: ``roles``, ``post_tasks``, ...); its path."""
    body = {"name": name, "hosts": hosts, "gather_facts": gather_facts}
    if vars:
        body["vars"] = vars
    if tasks is not None:
        body["tasks"] = tasks
    body.update(play)
    os.makedirs(str(tmp_path), exist_ok=True)
    path = os.path.join(str(tmp_path), file)
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump([body], handle, sort_keys=False)
    return path


def play(tmp_path, tasks=None, hosts="localhost", vars=None, name="test play", gather_facts=False, file="play.yml",
         play_keys=None, **kwargs):
    """:func:`write_play` then :func:`playbook` (``kwargs`` go to :func:`playbook`)."""
    path = write_play(tmp_path, tasks, hosts=hosts, vars=vars, name=name, gather_facts=gather_facts, file=file,
                      **(play_keys or {}))
    return playbook(path, tmp_path, **kwargs)


def module(name, args, tmp_path=None, check=False, diff=False, extra_vars=None, env=None, cwd=None, timeout=120):
    """``ansible localhost -m <name> -a <args>`` (a mapping goes in as JSON, a string as it is): the host's result (a
    dict, ``failed`` set when it failed).

    Uses the ``json`` stdout callback; a run whose output holds no result raises AssertionError with the output.
    """
    _need(ANSIBLE)
    argv = [ANSIBLE, "localhost"] + _common(LOCALHOST, extra_vars, check, diff, None, None, None, tmp_path,
                                            sys.executable) + ["-m", name, "-a", args if isinstance(args, str) else json.dumps(args)]
    extra = {"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"}
    extra.update(env or {})
    res = _run(argv, tmp_path, extra, cwd, timeout)
    try:
        doc = json.JSONDecoder().raw_decode(res.stdout[res.stdout.index("{"):])[0]
        host = doc["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible -m %s printed no result (rc %s):\n%s" % (name, res.rc, res.out[-6000:]))
    return host


def inventory(path, tmp_path=None, env=None, cwd=None, timeout=120):
    """``ansible-inventory -i <path> --list``: ``(Result, the parsed listing or None)``."""
    _need(INVENTORY)
    argv = [INVENTORY, "-i", str(path), "--list"]
    res = _run(argv, tmp_path, env, cwd, timeout)
    listing = None
    if res.ok:
        try:
            listing = json.loads(res.stdout)
        except ValueError:
            pass
    return res, listing


def module_file(name, args, tmp_path, env=None, pythonpath=(), timeout=120):
    """A module as Ansible runs it on a host: this interpreter runs ``plugins/modules/<name>.py`` with an arguments
    file (``ANSIBLE_MODULE_ARGS``), ``pythonpath`` and the collection on ``PYTHONPATH``; its JSON result (a dict).

    Faster than :func:`module` (no AnsiballZ, no controller); AssertionError with the output when it prints no JSON.
    """
    path = os.path.join(str(tmp_path), "args-%s-%d.json" % (name, next(_SEQ)))
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(p) for p in pythonpath] + [COLLECTIONS]))
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "plugins", "modules", name + ".py"), path],
                          env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
    for text in (proc.stdout, (proc.stdout.strip().splitlines() or [""])[-1]):
        try:
            return json.loads(text)
        except ValueError:
            continue
    raise AssertionError("module %s printed no JSON (rc %s): %s %s" % (name, proc.returncode, proc.stdout, proc.stderr))


def role_task(role, task_file, name):
    """A copy of the task called ``name`` in ``roles/<role>/tasks/<task_file>`` (blocks searched too)."""
    with open(os.path.join(ROOT, "roles", role, "tasks", task_file), encoding="utf-8") as handle:
        todo = list(yaml.safe_load(handle) or [])
    while todo:
        task = todo.pop(0)
        if task.get("name") == name:
            return copy.deepcopy(task)
        for key in ("block", "rescue", "always"):
            todo.extend(task.get(key) or [])
    raise KeyError("no task %r in roles/%s/tasks/%s" % (name, role, task_file))
