"""Every role variable a role reads is defined somewhere (a misspelt name fails only on the host that reaches it).

A task of cuda_toolchain read ``cuda_toolchain__system_packages`` where ``__cuda_toolchain_system_packages`` was
meant: the sandbox image had the packages, so the task never ran there, and every fresh host failed with
``'cuda_toolchain__system_packages' is undefined``. This walk finds that kind of defect without running anything.

References: the names every Jinja expression reads in roles/*/tasks, handlers, templates, defaults and vars (``{{ }}``
and ``{% %}`` in strings, and the bare expressions of ``when``, ``changed_when``, ``failed_when``, ``until`` and
``assert``'s ``that``), parsed by Jinja's own parser; names a template or expression sets itself (``{% set %}``,
``{% for %}``, macro arguments) are left out. Only names that belong to a role are checked: ``__<anything>`` and
``<role>_<name>`` for a role of roles/ (other names are Ansible's, the inventory's or the playbooks' own).

Definitions: keys of roles/*/defaults and vars, options of every entry point in meta/argument_specs.yml, and in every
task list of roles/ and playbooks/ (blocks and handlers included) ``register``, ``set_fact`` keys, ``vars`` of tasks,
blocks and plays, ``loop_control.loop_var`` / ``index_var``, ``set_stats`` data, ``include_vars``' ``name``; plus the
example inventory's group_vars and host_vars (inventories/blackwell: what a user starts from).
"""

from __future__ import annotations

import pathlib
import textwrap
import warnings

import jinja2
import jinja2.nodes
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
SET_FACT = ("ansible.builtin.set_fact", "set_fact", "ansible.legacy.set_fact")
SET_STATS = ("ansible.builtin.set_stats", "set_stats")
INCLUDE_VARS = ("ansible.builtin.include_vars", "include_vars")
ASSERT = ("ansible.builtin.assert", "assert", "ansible.legacy.assert")
CONDITIONALS = ("when", "changed_when", "failed_when", "until")
BLOCK_KEYS = ("block", "rescue", "always")
PLAY_TASK_KEYS = ("pre_tasks", "tasks", "post_tasks", "handlers")
# Jinja's parser only: unknown filters and tests are fine (nothing is compiled or rendered)
ENV = jinja2.Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])


def _load(path):
    text = path.read_text(encoding="utf-8")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _names_read(source, expression=False):
    """Names a Jinja template (or a bare expression) reads and does not set itself."""
    if expression:
        source = "{{ %s }}" % source
    if "{{" not in source and "{%" not in source:
        return set()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)   # Jinja's lexer on regex escapes in literals
            tree = ENV.parse(source)
    except jinja2.TemplateSyntaxError:
        return set()        # ansible-lint's jinja rule owns syntax; this check owns names
    loads = {n.name for n in tree.find_all(jinja2.nodes.Name) if n.ctx == "load"}
    stores = {n.name for n in tree.find_all(jinja2.nodes.Name) if n.ctx in ("store", "param")}
    stores |= {arg.name for m in tree.find_all(jinja2.nodes.Macro) for arg in m.args}
    return loads - stores


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _tasks(items):
    """Every task dict of a task list, blocks included."""
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in BLOCK_KEYS:
            if isinstance(task.get(key), list):
                yield from _tasks(task[key])


def _task_reads(task):
    """Names a task reads (its own keys only: the tasks of a block are walked separately)."""
    found = set()
    for key, value in task.items():
        if key in BLOCK_KEYS:
            continue
        if key in CONDITIONALS:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, str):
                    found |= _names_read(item, expression=not ("{{" in item or "{%" in item))
            continue
        if key in ASSERT and isinstance(value, dict):
            that = value.get("that")
            for item in that if isinstance(that, list) else [that]:
                if isinstance(item, str):
                    found |= _names_read(item, expression=True)
            value = {k: v for k, v in value.items() if k != "that"}
        for text in _strings(value):
            found |= _names_read(text)
    return found


def _task_defines(task):
    names = set()
    if isinstance(task.get("register"), str):
        names.add(task["register"])
    for key in SET_FACT:
        if isinstance(task.get(key), dict):
            names |= {k for k in task[key] if k != "cacheable"}
    for key in SET_STATS:
        if isinstance(task.get(key), dict) and isinstance(task[key].get("data"), dict):
            names |= set(task[key]["data"])
    for key in INCLUDE_VARS:
        if isinstance(task.get(key), dict) and isinstance(task[key].get("name"), str):
            names.add(task[key]["name"])
    if isinstance(task.get("vars"), dict):
        names |= set(task["vars"])
    loop_control = task.get("loop_control")
    if isinstance(loop_control, dict):
        names |= {loop_control[k] for k in ("loop_var", "index_var") if isinstance(loop_control.get(k), str)}
    return names


def _var_files(directory):
    if directory.is_file():
        return [directory]
    if directory.is_dir():
        return sorted(p for p in directory.rglob("*") if p.suffix in (".yml", ".yaml") or p.name == "main")
    return []


def definitions(root):
    """Every role-variable name the tree defines (see the module docstring)."""
    root = pathlib.Path(root)
    names = set()
    for role in sorted(p for p in (root / "roles").iterdir() if p.is_dir()):
        for sub in ("defaults", "vars"):
            for path in _var_files(role / sub) + _var_files(role / (sub + ".yml")):
                data = _load(path)
                if isinstance(data, dict):
                    names |= set(data)
        spec = role / "meta" / "argument_specs.yml"
        if spec.is_file():
            for entry in ((_load(spec) or {}).get("argument_specs") or {}).values():
                names |= set((entry or {}).get("options") or {})
        for path in sorted(role.glob("tasks/**/*.yml")) + sorted(role.glob("handlers/**/*.yml")):
            for task in _tasks(_load(path)):
                names |= _task_defines(task)
    for path in sorted((root / "playbooks").glob("*.yml")) if (root / "playbooks").is_dir() else []:
        for play in _load(path) or []:
            if not isinstance(play, dict):
                continue
            if isinstance(play.get("vars"), dict):
                names |= set(play["vars"])
            for key in PLAY_TASK_KEYS:
                for task in _tasks(play.get(key)):
                    names |= _task_defines(task)
    for inventory_vars in sorted((root / "inventories" / "blackwell").glob("*_vars")):
        for path in _var_files(inventory_vars):
            data = _load(path)
            if isinstance(data, dict):
                names |= set(data)
    return names


def references(root):
    """{name: [where, ...]} of the role-variable names read in roles/ (see the module docstring)."""
    root = pathlib.Path(root)
    roles = sorted(p.name for p in (root / "roles").iterdir() if p.is_dir())
    prefixes = tuple(r + "_" for r in roles)
    found = {}

    def add(names, where):
        for name in names:
            if name.startswith("__") or name.startswith(prefixes):
                found.setdefault(name, []).append(where)

    for role in roles:
        base = root / "roles" / role
        for path in sorted(base.glob("tasks/**/*.yml")) + sorted(base.glob("handlers/**/*.yml")):
            where = str(path.relative_to(root))
            for task in _tasks(_load(path)):
                add(_task_reads(task), "%s: %s" % (where, task.get("name", "<unnamed>")))
        for path in sorted(base.glob("templates/**/*")):
            if path.is_file():
                add(_names_read(path.read_text(encoding="utf-8")), str(path.relative_to(root)))
        for sub in ("defaults", "vars"):
            for path in _var_files(base / sub):
                data = _load(path)
                for key, value in (data.items() if isinstance(data, dict) else []):
                    add({n for text in _strings(value) for n in _names_read(text)},
                        "%s: %s" % (path.relative_to(root), key))
    return found


def undefined(root):
    defined = definitions(root)
    return {name: where for name, where in sorted(references(root).items()) if name not in defined}


def _tree(tmp_path, files):
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def test_finds_a_misspelt_private_variable(tmp_path):
    """The defect as it was: defined under one name (task vars), read under another."""
    root = _tree(tmp_path, {
        "roles/demo/defaults/main.yml": "---\ndemo_packages: [g++]\n",
        "roles/demo/tasks/main.yml": """\
            ---
            - name: Install
              ansible.builtin.apt:
                name: "{{ demo__packages }}"
              when: __demo_missing | length > 0
              vars:
                __demo_missing: "{{ demo_packages }}"
            """,
    })
    assert undefined(root) == {"demo__packages": ["roles/demo/tasks/main.yml: Install"]}


def test_every_way_of_defining_and_reading(tmp_path):
    root = _tree(tmp_path, {
        "roles/demo/defaults/main.yml": "---\ndemo_port: 1\ndemo_url: \"http://x:{{ demo_port }}{{ demo_nope }}\"\n",
        "roles/demo/meta/argument_specs.yml": "---\nargument_specs:\n  main:\n    options:\n      demo_input: {type: str}\n",
        "roles/demo/templates/a.j2": "{% set __demo_local = 1 %}{% for demo_x in demo_input %}{{ demo_x }}{% endfor %}"
                                     "{{ __demo_local }}{{ __demo_fact }}{{ __demo_gone }}\n",
        "roles/demo/tasks/main.yml": """\
            ---
            - name: Probe
              ansible.builtin.command: "true"
              register: __demo_probe
              changed_when: __demo_probe.rc != 0 or __demo_unset
              loop: "{{ demo_input }}"
              loop_control:
                loop_var: __demo_item
            - name: Facts
              block:
                - name: Set
                  ansible.builtin.set_fact:
                    __demo_fact: "{{ __demo_item }}"
                - name: Check
                  ansible.builtin.assert:
                    that:
                      - other_role_var is defined
                      - __demo_missing_too
            """,
    })
    assert sorted(undefined(root)) == ["__demo_gone", "__demo_missing_too", "__demo_unset", "demo_nope"]


def test_no_role_reads_a_variable_that_is_defined_nowhere():
    found = undefined(ROOT)
    assert not found, "role variables read but defined nowhere (a misspelling?):\n" + "\n".join(
        "%s  <- %s" % (name, "; ".join(where[:3])) for name, where in found.items())


@pytest.mark.parametrize("name", ["__cuda_toolchain_apt_source", "cuda_toolchain_home", "preflight_checks"])
def test_the_walk_sees_the_known_definitions(name):
    # an empty walk would make the check above pass vacuously
    assert name in definitions(ROOT)
    assert name in references(ROOT)
