"""No role's defaults read another role's variables or facts (docs/architecture.md "The stack contract").

A role default may read the role's own variables (``<role>_*``, ``__<role>_*``), the stack contract
(``sglang_stack_*``, roles/sglang_stack) and Ansible's magic variables; anything else means the role reads another
role's variable and no longer works alone, the coupling the contract removed. Names are taken from the Jinja
expressions of every default (string literals and filter/test names left out).
"""

from __future__ import annotations

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
MAGIC = {"groups", "hostvars", "inventory_hostname", "inventory_dir", "playbook_dir", "role_path", "omit",
         "ansible_play_hosts_all", "ansible_play_hosts", "item", "true", "false", "none", "True", "False", "None"}
# Jinja keywords and the callables that appear without a pipe
KEYWORDS = {"if", "else", "elif", "for", "in", "not", "and", "or", "is", "endfor", "endif", "set", "range", "dict",
            "lookup", "query", "loop"}
EXPR = re.compile(r"\{\{(.*?)\}\}|\{%(.*?)%\}", re.S)
STRING = re.compile(r"'[^']*'|\"[^\"]*\"")
NAME = re.compile(r"(?<![\w.])([A-Za-z_]\w*)")


def _names(expression):
    """Variable names an expression reads: no string contents, no attribute/filter/test names, no loop targets."""
    text = STRING.sub("''", expression)
    text = re.sub(r"\|\s*[\w.]+", "|", text)              # filters
    text = re.sub(r"\bis\s+(not\s+)?\w+", "", text)         # tests
    loop_targets = set(re.findall(r"\bfor\s+([\w\s,]+?)\s+in\b", text))
    targets = {t.strip() for group in loop_targets for t in group.split(",")}
    set_targets = set(re.findall(r"\bset\s+(\w+)", text))
    kwargs = set(re.findall(r"(\w+)\s*=(?!=)", text))      # keyword arguments of filters/tests
    return set(NAME.findall(text)) - KEYWORDS - MAGIC - targets - set_targets - kwargs


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


def _cross_reads():
    found = []
    for path in sorted((ROOT / "roles").glob("*/defaults/main.yml")):
        role = path.parent.parent.name
        defaults = yaml.safe_load(path.read_text()) or {}
        for key, value in defaults.items():
            for match in (m for text in _strings(value) for m in EXPR.finditer(text)):
                for name in _names(" ".join(g for g in match.groups() if g)):
                    if (name.startswith((role + "_", "__" + role + "_", "sglang_stack_", "ansible_"))
                            or name in defaults):
                        continue
                    found.append(f"{path.relative_to(ROOT)}: {key} reads {name}")
    return found


def test_the_checker_sees_a_cross_read():
    assert _names("{{ torch_nightly_venv | default('/opt/sglang/venv') }}") == {"torch_nightly_venv"}
    assert _names("{{ groups[x] | map('extract', hostvars) | list }}") == {"x"}
    assert _names("{% for k in items %}{{ k.name }}{% endfor %}") == {"items"}


def test_no_role_default_reads_another_roles_variable():
    found = _cross_reads()
    assert not found, "role defaults that read another role's variables (use the stack contract):\n" + "\n".join(found)
