"""Field report B34: long build tasks must run with async (+ a log), never as one silent SSH-held command.

The check is applied to the F-B34 lint fixture of field-reports.md and to every task file of every role in the
collection. A task counts as a long build when its command line builds wheels or native code (pip wheel, a
--no-build-isolation install, cmake --build, make build, uv build, setup.py build/bdist_wheel, ninja).
"""

import glob
import os
import re

import pytest
import yaml

from conftest import ROOT

LONG_BUILD = re.compile(r"pip(3)?\s+wheel|-m\s+pip\s+wheel|--no-build-isolation|cmake\s+--build|make\s+build\b|"
                        r"uv\s+build|setup\.py\s+(build|bdist_wheel)|(^|\s)ninja(\s|$)")
COMMAND_MODULES = {"ansible.builtin.command", "ansible.builtin.shell", "command", "shell",
                   "ansible.builtin.pip", "pip"}

F_B34_FAIL = """
- name: Build sgl-kernel wheel
  ansible.builtin.command: python -m pip wheel --no-build-isolation -v ./sgl-kernel
"""
F_B34_PASS = """
- name: Build sgl-kernel wheel
  ansible.builtin.command: python -m pip wheel --no-build-isolation -v ./sgl-kernel
  args:
    creates: /opt/stamp
  async: 14400
  poll: 30
"""


def _command_text(task):
    for mod in COMMAND_MODULES:
        if mod in task:
            val = task[mod]
            if isinstance(val, dict):
                parts = [val.get("cmd", ""), " ".join(map(str, val.get("argv", []) or [])),
                         str(val.get("extra_args", "")), " ".join(map(str, val.get("name", []) or []))
                         if isinstance(val.get("name"), list) else str(val.get("name", ""))]
                return " ".join(parts)
            return str(val)
    return ""


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        for key in ("block", "rescue", "always"):
            if key in task:
                yield from _tasks(task[key])
        yield task


def violations(text):
    """Names of long build tasks without async in a task list (YAML text)."""
    out = []
    for task in _tasks(yaml.safe_load(text)):
        cmd = _command_text(task)
        if cmd and LONG_BUILD.search(cmd) and not task.get("async"):
            out.append(task.get("name", cmd[:60]))
    return out


def test_f_b34_fixture():
    assert violations(F_B34_FAIL) == ["Build sgl-kernel wheel"]
    assert violations(F_B34_PASS) == []


def test_sgl_kernel_build_task_is_async():
    path = os.path.join(ROOT, "roles", "sgl_kernel_sm120", "tasks", "build.yml")
    with open(path) as fh:
        tasks = list(_tasks(yaml.safe_load(fh)))
    # the wheel build; the configure check beside it (build_wheel.sh ... configure) is bounded by timeout(1)
    runs = [t for t in tasks if "build_wheel.sh" in _command_text(t)]
    build = [t for t in runs if not _command_text(t).rstrip().endswith("configure")]
    assert len(build) == 1 and build[0]["async"] and build[0]["poll"] == 0
    assert all(t["ansible.builtin.command"]["argv"][0] == "timeout" for t in runs if t not in build)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "*.yml"))),
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_roles_have_no_long_build_without_async(path):
    with open(path) as fh:
        assert violations(fh.read()) == [], "B34: run long builds with async + poll and a log (%s)" % path
