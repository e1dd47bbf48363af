"""Shared harness of the unit tests that run or read the real playbooks (imported by module name, never through
``conftest``: the tests run under pytest-xdist).

1. The playbooks are role calls: site.yml, rollout.yml and audit.yml call the chain roles (``CHAIN_ROLES``:
   sglang_converge, sglang_rollout, sglang_audit), whose task files call the stage roles. :func:`standin_playbook`
   writes a copy of a playbook whose stage-role calls (``include_role`` / ``import_role`` of any other role) a
   test's ``double`` may replace by a stand-in task: it walks the playbook and every task file of each chain role it
   reaches, copies those roles into ``<dest>/roles/`` with the doubles in place (their defaults, argument specs and
   the static/dynamic composition stay the real ones) and points the copy's calls at them (``roles/`` next to a
   playbook is searched first). The doubles keep the task's name, tags, ``when`` and ``vars``.
2. :func:`static_plays` reads a playbook as ``ansible-playbook --list-tasks`` sees it: static calls into the chain
   roles (``import_role``, ``import_tasks``) inlined as blocks, dynamic ones (``include_role``) left as the one task
   the listing shows; :func:`leaf_tasks` flattens the blocks; :func:`converge_stage_role` names the stage role
   behind one of sglang_converge's task files.
3. The real gateway for the gateway tests: :func:`smg_python`, :func:`free_port`, :func:`wait_http` and
   :func:`start_smg` (the role's launcher template, ``smg launch`` on 127.0.0.1 under ``timeout``), :func:`stop`.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils import _gateway

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK = ansible_run.PLAYBOOK
CHAIN_ROLES = ("sglang_converge", "sglang_rollout", "sglang_audit")
ROLE_CALLS = ("ansible.builtin.include_role", "ansible.builtin.import_role")
TASK_FILES = ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks")
BLOCK_KEYS = ("block", "rescue", "always")


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or []


def role_call(task):
    """(module key, args, short role name, entry point) of a task that calls a role, else (None, None, None, None)."""
    for key in ROLE_CALLS:
        if isinstance(task, dict) and key in task:
            args = task[key]
            return key, args, args["name"].rsplit(".", 1)[-1], args.get("tasks_from", "main")
    return None, None, None, None


def stage_facts(role, entry, switched):
    """The facts a stand-in for a stage that needs a GPU host sets, or None for another role call: the sgl-kernel
    plan a build key ("k1"), the FP4 probe a pass, the release switch ``sglang_release_switched: switched``."""
    if (role, entry) == ("sgl_kernel_sm120", "plan"):
        return {"sglang_stack_kernel_build_key": "k1"}
    if role == "fp4_probe":
        return {"fp4_probe_passed": True}
    if (role, entry) == ("sglang_release", "switch"):
        return {"sglang_release_switched": switched}
    return None


def without_call(task):
    """The task without its role call (the base of a stand-in: name, tags, when, vars, ... stay)."""
    return {k: v for k, v in task.items() if k not in ROLE_CALLS}


# ------------------------------------------------------------------------------------------- stand-in playbooks

def _walk(tasks, double, reached):
    out = []
    for task in tasks or []:
        task = dict(task)
        for key in BLOCK_KEYS:
            if key in task:
                task[key] = _walk(task[key], double, reached)
        key, args, role, _entry = role_call(task)
        if key and role in CHAIN_ROLES:
            reached.add(role)
            task[key] = dict(args, name=role)          # the copy under <dest>/roles, doubles in place
        elif key:
            task = double(task)
        out.append(task)
    return out


def standin_playbook(playbook, dest, double, select=None):
    """Write ``<dest>/<playbook>``: playbooks/<playbook> (its plays for which ``select(play)`` is true; all by
    default) with each stage-role call replaced by ``double(task)`` (return the task itself for the real role), in
    the playbook and in the chain roles' task files (copied to ``<dest>/roles``). Plays keep their keywords.
    Returns the path written."""
    dest = str(dest)
    plays = [dict(p) for p in _load(os.path.join(ROOT, "playbooks", playbook)) if select is None or select(p)]
    reached, copied = set(), set()
    for play in plays:
        for key in ("pre_tasks", "tasks", "post_tasks"):
            if key in play:
                play[key] = _walk(play[key], double, reached)
    while reached - copied:
        role = sorted(reached - copied)[0]
        copied.add(role)
        target = os.path.join(dest, "roles", role)
        shutil.copytree(os.path.join(ROOT, "roles", role), target)
        tasks_dir = os.path.join(target, "tasks")
        for name in sorted(os.listdir(tasks_dir)):
            if name.endswith(".yml"):
                path = os.path.join(tasks_dir, name)
                walked = _walk(_load(path), double, reached)
                with open(path, "w", encoding="utf-8") as handle:
                    yaml.safe_dump(walked, handle, sort_keys=False)
    out = os.path.join(dest, playbook)
    with open(out, "w", encoding="utf-8") as handle:
        yaml.safe_dump(plays, handle, sort_keys=False)
    return out


# ------------------------------------------------------------------------------------ the playbook, as listed

def _role_file(role, entry):
    return os.path.join(ROOT, "roles", role, "tasks", entry if entry.endswith(".yml") else entry + ".yml")


def _inline(tasks, tasks_dir):
    out = []
    for task in tasks or []:
        task = dict(task)
        for key in BLOCK_KEYS:
            if key in task:
                task[key] = _inline(task[key], tasks_dir)
        key, _args, role, entry = role_call(task)
        files = [k for k in TASK_FILES if k == "ansible.builtin.import_tasks" and k in task]
        if key == "ansible.builtin.import_role" and role in CHAIN_ROLES:
            path = _role_file(role, entry)
        elif files and tasks_dir:
            path = os.path.join(tasks_dir, task[files[0]])
        else:
            out.append(task)
            continue
        block = {k: v for k, v in task.items() if k not in ROLE_CALLS + TASK_FILES}
        block["block"] = _inline(_load(path), os.path.dirname(path))
        out.append(block)
    return out


def static_plays(playbook):
    """The plays of playbooks/<playbook> with the static calls into the chain roles inlined as blocks."""
    plays = [dict(p) for p in _load(os.path.join(ROOT, playbook if "/" in playbook else os.path.join("playbooks", playbook)))]
    for play in plays:
        for key in ("pre_tasks", "tasks", "post_tasks"):
            if key in play:
                play[key] = _inline(play[key], None)
    return plays


def leaf_tasks(tasks):
    """The tasks that are not blocks, in order, from every block, rescue and always section of ``tasks``."""
    out = []
    for task in tasks or []:
        if any(key in task for key in BLOCK_KEYS):
            for key in BLOCK_KEYS:
                out += leaf_tasks(task.get(key))
        else:
            out.append(task)
    return out


def converge_stage_role(entry):
    """The one stage role that sglang_converge's task file ``entry`` calls (e.g. probe -> fp4_probe)."""
    roles = {role_call(t)[2] for t in _load(_role_file("sglang_converge", entry))} - {None}
    assert len(roles) == 1, "sglang_converge/tasks/%s.yml calls %s, not one stage role" % (entry, sorted(roles))
    return roles.pop()


# ------------------------------------------------------------------------------------------------ the gateway

def smg_python():
    """A python that has smg (SGLANG_GATEWAY_TEST_SMG_PYTHON, else this one), or None."""
    cand = os.environ.get("SGLANG_GATEWAY_TEST_SMG_PYTHON") or sys.executable
    try:
        subprocess.run([cand, "-c", "import smg.launch_router"], check=True, capture_output=True, timeout=60)
    except (subprocess.SubprocessError, OSError):
        return None
    return cand


def require(smg_py):
    """Skip the test without smg (``smg_py`` None) or without ansible-playbook next to this python."""
    if smg_py is None:
        pytest.skip("no smg installed (set SGLANG_GATEWAY_TEST_SMG_PYTHON to a venv with smg 1.13.0)")
    if not os.path.exists(PLAYBOOK):
        pytest.skip("ansible-playbook not installed next to this python")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url, timeout=30.0):
    """Wait until ``url`` answers (any status that urllib does not raise for); AssertionError after ``timeout`` s."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except Exception:  # pylint: disable=broad-except
            time.sleep(0.2)
    raise AssertionError("%s did not answer in %ss" % (url, timeout))


def start_smg(smg_py, tmp, worker_urls, key, port=None, prometheus_port=None, env=None, lifetime_s=300, settings=None):
    """The real ``smg launch`` through the role's launcher template (roles/sglang_gateway/templates/smg-launch.py.j2)
    on 127.0.0.1:``port`` in front of ``worker_urls`` (round robin, health checked every second, one success or
    failure flips a worker; ``settings`` overrides these keys of ``_gateway.render_args``), the key from the
    environment, bounded by ``timeout lifetime_s``, output in ``<tmp>/smg.log``. Returns (Popen, port,
    prometheus_port)."""
    port = port or free_port()
    prometheus_port = prometheus_port or free_port()
    launcher = os.path.join(str(tmp), "smg-launch.py")
    with open(os.path.join(ROOT, "roles", "sglang_gateway", "templates", "smg-launch.py.j2"), encoding="utf-8") as src:
        text = src.read()
    with open(launcher, "w", encoding="utf-8") as out:
        out.write(text.replace("{{ ansible_managed | comment(decoration='') | trim }}", "test copy")
                  .replace("{{ sglang_gateway_api_key_env }}", "SMG_GATEWAY_API_KEY"))
    argv = _gateway.render_args({"host": "127.0.0.1", "port": port, "policy": "round_robin",
                                 "prometheus_host": "127.0.0.1", "prometheus_port": prometheus_port,
                                 "health_check_interval_secs": 1, "health_success_threshold": 1,
                                 "health_failure_threshold": 1, **(settings or {})},
                                [{"url": u} for u in worker_urls])
    with open(os.path.join(str(tmp), "smg.log"), "w", encoding="utf-8") as log:
        proc = subprocess.Popen(["timeout", str(lifetime_s), smg_py, launcher] + argv, stdout=log,
                                stderr=subprocess.STDOUT, env=dict(os.environ, SMG_GATEWAY_API_KEY=key, **(env or {})))
    return proc, port, prometheus_port


def stop(procs):
    """Terminate the processes, wait up to 20 s each, kill what is left."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
