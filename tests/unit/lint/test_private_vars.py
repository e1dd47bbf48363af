"""tests/lint/private_vars.py: the one private-variable naming rule of roles/ (``__<role>_<name>``), run by make lint."""

from __future__ import annotations

import importlib.util
import pathlib
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SPEC = importlib.util.spec_from_file_location("private_vars", ROOT / "tests" / "lint" / "private_vars.py")
private_vars = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(private_vars)


@pytest.mark.parametrize("name, kind", [
    ("__demo_plan", "private"),
    ("demo_plan", "public"),
    ("demo__plan", "<role>__<name>"),
    ("__demo__plan", "__<name> without the role"),
    ("_plan", "_<name>"),
    ("__plan", "__<name> without the role"),
    ("other_plan", "another prefix or none"),
    ("plan", "another prefix or none"),
    ("ansible_python_interpreter", "ansible"),
    ("Demo_plan", "not a valid name"),
])
def test_scheme(name, kind):
    assert private_vars.scheme("demo", name) == kind


def _role(tmp_path, files):
    for rel, text in files.items():
        path = tmp_path / "roles" / "demo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return private_vars.definitions(str(tmp_path))


def test_definitions_cover_every_way_a_role_defines_a_variable(tmp_path):
    found = _role(tmp_path, {
        "defaults/main.yml": "---\ndemo_port: 1\n",
        "vars/main.yml": "---\n__demo_table: {}\n",
        "tasks/main.yml": """\
            ---
            - name: Probe
              ansible.builtin.command: "true"
              register: demo__probe
              changed_when: false
            - name: Outer
              vars:
                _tmp: 1
              block:
                - name: Facts
                  ansible.builtin.set_fact:
                    cacheable: false
                    __demo_fact: 2
                    fact_without_prefix: 3
              rescue:
                - name: Loop
                  ansible.builtin.debug:
                    msg: "{{ demo_item }}"
                  loop: [1]
                  loop_control:
                    loop_var: demo_item
                    index_var: idx
            """,
        "handlers/main.yml": "---\n- name: Restart\n  ansible.builtin.debug: {}\n  register: __demo_restart\n",
    })
    assert {name: [how for _path, how in where] for (_role, name), where in found.items()} == {
        "demo_port": ["defaults"], "__demo_table": ["vars"], "demo__probe": ["register"], "_tmp": ["vars"],
        "__demo_fact": ["set_fact"], "fact_without_prefix": ["set_fact"], "demo_item": ["loop_var"], "idx": ["index_var"],
        "__demo_restart": ["register"],
    }
    assert set(private_vars.check(found)) == {"demo:demo__probe", "demo:_tmp", "demo:fact_without_prefix", "demo:idx"}


def test_arguments_handed_to_a_called_role_are_not_the_callers_names(tmp_path):
    """vars of a task calling role X named X_..., set_fact X_... in a role that calls X, and x: "{{ x }}" define
    no name of the caller; anything else they set still counts."""
    found = _role(tmp_path, {"tasks/main.yml": """\
        ---
        - name: Call other
          ansible.builtin.import_role:
            name: blackwell.sglang.other
          vars:
            other_port: 1
            third_port: 2
        - name: Hand over
          ansible.builtin.set_fact:
            other_path: /x
            third_path: /y
            keep_me: "{{ keep_me }}"
            keep_not: "{{ keep_me }}"
        """})
    assert sorted(name for _role_name, name in found) == ["keep_not", "third_path", "third_port"]


def test_stack_contract_facts_may_be_published_by_set_fact_only(tmp_path):
    found = _role(tmp_path, {
        "defaults/main.yml": "---\nsglang_stack_root: /x\n",
        "tasks/main.yml": """\
            ---
            - name: Publish
              ansible.builtin.set_fact:
                sglang_stack_venv: /x/venv
            - name: Probe
              ansible.builtin.command: "true"
              register: sglang_stack_probe
              changed_when: false
            - name: A contract value handed to a role this role calls, by its contract name
              ansible.builtin.import_role:
                name: blackwell.sglang.other
              vars:
                sglang_stack_current: /x/staged
            - name: The same name as a task's own variable
              ansible.builtin.debug:
                msg: "{{ sglang_stack_mine }}"
              vars:
                sglang_stack_mine: /x
            """,
    })
    new = private_vars.check(found)
    assert set(new) == {"demo:sglang_stack_root", "demo:sglang_stack_probe", "demo:sglang_stack_mine"}


def test_checkout_follows_the_rule_without_exceptions(capsys):
    assert private_vars.main([]) == 0, capsys.readouterr().err
    assert not (ROOT / "tests" / "lint" / "private_vars_allowlist.txt").exists()
