"""The one naming rule for the variables a role defines (run by ``make lint``).

Every variable a role defines -- ``register``, ``set_fact`` keys, ``vars`` of a task or block, ``loop_var`` /
``index_var``, keys of ``defaults/`` and ``vars/`` -- is named either

* ``<role>_<name>``: public (an argument in meta/argument_specs.yml, a default, a fact other roles read), or
* ``__<role>_<name>``: private to the role (ansible-lint's ``var-naming[no-role-prefix]`` accepts the leading
  underscores; the same scheme as geerlingguy's roles and the project rules in docs/architecture.md).

One more public kind: ``sglang_stack_<name>`` set with ``set_fact`` in any role is a fact of the stack contract
(roles/sglang_stack defines it with its fallback; the role that produces the value publishes it; docs/architecture.md).
Anywhere else (``register``, task ``vars``, another role's ``defaults/``) that prefix is another role's.

Not allowed: ``<role>__<name>``, ``_<name>``, ``__<name>`` without the role, another role's prefix or none.
Ansible's own variables (``ansible_*``, e.g. ``ansible_python_interpreter`` in a task's ``vars``) are exempt.
(Variables handed *to* a role by a playbook or another role's ``include_role`` are that role's arguments and are not
checked here: the ``vars`` of a task that calls role X (itself, or through the role's task file it imports) named
``X_...`` or ``sglang_stack_...`` (a stack contract value
the called role reads by its contract name, e.g. the staged release handed to a check as ``sglang_stack_current``),
and a ``set_fact`` key ``X_...`` in a role that
calls X (the argument set as a fact, so that it outlives the play, e.g. sglang_converge handing the verified model to
sglang_service). Neither is a variable re-published as a fact under its own name (``x: "{{ x }}"``). ``item`` and
Ansible's magic variables are never defined by a role.)

There are no exceptions: every name under another scheme fails, with the name to use instead.

Exit status 0 when every variable follows the rule, 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SET_FACT = ("ansible.builtin.set_fact", "set_fact", "ansible.legacy.set_fact")
ROLE_CALLS = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")
TASK_FILES = ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks", "import_tasks", "include_tasks")
NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
CONTRACT_PREFIX = "sglang_stack_"   # the stack contract's facts (roles/sglang_stack), published by set_fact


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _called_role(task):
    """The short name of the role an include_role / import_role task calls, else None."""
    for key in ROLE_CALLS:
        if isinstance(task.get(key), dict) and isinstance(task[key].get("name"), str):
            return task[key]["name"].rsplit(".", 1)[-1]
    return None


def _handed_over(name, value, called):
    """True for a set_fact key that defines no name of this role: the argument of a role this role calls, set as a
    fact so that it outlives the play (``<called role>_<name>``), or a variable re-published as a fact under its own
    name (``x: "{{ x }}"``: role defaults do not outlive a play, facts do)."""
    if any(str(name).startswith(role + "_") for role in called):
        return True
    return isinstance(value, str) and re.sub(r"\s+", "", value) == "{{%s}}" % name


def _roles_called(tasks):
    """The short names of the roles a task list calls (include_role / import_role), recursing into blocks."""
    found = set()
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if _called_role(task):
            found.add(_called_role(task))
        for key in ("block", "rescue", "always"):
            found |= _roles_called(task.get(key) if isinstance(task.get(key), list) else [])
    return found


def _targets(task, tasks_dir):
    """The roles a task hands its ``vars`` to: the role it calls, or the roles the task file it imports or includes
    (from ``tasks_dir``, the role's own) calls."""
    found = {_called_role(task)} - {None}
    for key in TASK_FILES:
        if tasks_dir and isinstance(task.get(key), str) and "{" not in task[key]:
            path = os.path.join(tasks_dir, task[key])
            if os.path.isfile(path):
                data = _load(path)
                found |= _roles_called(data if isinstance(data, list) else [])
    return found


def _task_definitions(tasks, called=frozenset(), tasks_dir=None):
    """(name, how) of every variable the task list defines, recursing into blocks; ``called``: the roles this role
    calls (their arguments are not this role's names); ``tasks_dir``: the role's tasks/ (for the task files a task
    imports)."""
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if isinstance(task.get("register"), str):
            yield task["register"], "register"
        for key in SET_FACT:
            if isinstance(task.get(key), dict):
                for name, value in task[key].items():
                    if name == "cacheable" or _handed_over(name, value, called):
                        continue
                    yield name, "set_fact"
        if isinstance(task.get("vars"), dict):
            targets = _targets(task, tasks_dir)
            for name in task["vars"]:
                if targets and str(name).startswith(tuple(t + "_" for t in targets) + (CONTRACT_PREFIX,)):
                    continue        # an argument handed to a role this task calls (its name is that role's or the contract's)
                yield name, "vars"
        loop_control = task.get("loop_control")
        if isinstance(loop_control, dict):
            for key in ("loop_var", "index_var"):
                if isinstance(loop_control.get(key), str):
                    yield loop_control[key], key
        for key in ("block", "rescue", "always"):
            if isinstance(task.get(key), list):
                yield from _task_definitions(task[key], called, tasks_dir)


def definitions(repo=REPO):
    """{(role, name): [(relative path, how)]} of every variable defined in roles/."""
    found = collections.defaultdict(list)
    roles_dir = os.path.join(repo, "roles")
    for role in sorted(os.listdir(roles_dir)):
        role_dir = os.path.join(roles_dir, role)
        if not os.path.isdir(role_dir):
            continue
        called = set()
        for dirpath, _dirnames, files in os.walk(os.path.join(role_dir, "tasks")):
            for fname in files:
                if fname.endswith((".yml", ".yaml")):
                    data = _load(os.path.join(dirpath, fname))
                    called |= _roles_called(data if isinstance(data, list) else [])
        called.discard(role)
        for sub in ("tasks", "handlers", "defaults", "vars"):
            for dirpath, _dirnames, files in os.walk(os.path.join(role_dir, sub)):
                for fname in sorted(files):
                    if not fname.endswith((".yml", ".yaml")):
                        continue
                    path = os.path.join(dirpath, fname)
                    rel = os.path.relpath(path, repo)
                    data = _load(path)
                    if sub in ("defaults", "vars"):
                        pairs = ((name, sub) for name in (data or {}) if isinstance(data, dict))
                    else:
                        pairs = _task_definitions(data if isinstance(data, list) else [], frozenset(called),
                                                  os.path.join(role_dir, "tasks"))
                    for name, how in pairs:
                        found[(role, str(name))].append((rel, how))
    return found


def scheme(role, name):
    """'public', 'private' or the name of the scheme the rule forbids."""
    if not NAME.match(name):
        return "not a valid name"
    if name.startswith("ansible_"):
        return "ansible"   # Ansible's own (connection) variables set for a task, e.g. ansible_python_interpreter
    if name.startswith("__" + role + "_") and not name.startswith("__" + role + "__"):
        return "private"
    if name.startswith(role + "__"):
        return "<role>__<name>"
    if name.startswith(role + "_"):
        return "public"
    if name.startswith("__"):
        return "__<name> without the role"
    if name.startswith("_"):
        return "_<name>"
    return "another prefix or none"


def check(found):
    """The violations: {'role:name': (scheme, where)}."""
    violations = {}
    for (role, name), where in sorted(found.items()):
        kind = scheme(role, name)
        if name.startswith(CONTRACT_PREFIX) and all(how == "set_fact" for _rel, how in where):
            kind = "contract"
        if kind not in ("public", "private", "ansible", "contract"):
            violations["%s:%s" % (role, name)] = (kind, where)
    return violations


def main(argv=None):
    """Entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.parse_args(argv)
    found = definitions()
    violations = check(found)
    counts = collections.Counter(scheme(role, name) for role, name in found)
    print("private-variable rule: %d variables in roles/: %s"
          % (len(found), ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    for key, (kind, where) in sorted(violations.items()):
        role, name = key.split(":", 1)
        rel, how = where[0]
        base = name[len(role) + 2:] if name.startswith(role + "__") else name.lstrip("_")
        print("%s: %s (%s) is named %s: name it __%s_%s (private) or %s_%s (public)"
              % (rel, name, how, kind, role, base, role, base), file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
