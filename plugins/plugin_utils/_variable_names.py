# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The variable names the collection defines, and the host variables that look like one but are not.

Ansible ignores a variable nobody reads, so a misspelt name (``sglang_servcie_tp_size: 8``) silently leaves the
default in place (``--tp-size 1``). The action plugin ``blackwell.sglang.unknown_variables`` (run first by the
preflight) compares every variable of a host with the names the collection knows and names the nearest real one.

Known names (:func:`known_names`), read from the collection's own files under ``root``:

* every option of every entry point of ``roles/*/meta/argument_specs.yml`` and every key of ``roles/*/defaults/*.yml``
  and ``roles/*/vars/*.yml``;
* every name the roles' and playbooks' tasks define: ``register``, the keys of ``set_fact``, ``vars`` of a task, block
  or play, ``include_vars``' ``name``, ``loop_control.loop_var`` / ``index_var`` (facts and results of an earlier play
  are variables of the host too, and must not be reported);
* every name they read with a default (``sglang_benchmark_hosts | default('sglang_servers')`` in a play's ``hosts``):
  a setting of the playbooks that no role defines;
* every name of :data:`PATTERNS` (an inventory stack preset, ``sglang_stack_preset_<name>``);
* every quoted name with a role prefix in the controller-side plugins (``plugins/filter``, ``plugins/action``): the
  per-host settings a filter reads from ``hostvars`` (``sglang_prometheus_scrape_address``).

A host variable is *checked* (:func:`unknown`) when it carries a role's prefix (``<role>_``, which includes the
stack contract's ``sglang_stack_``) or a misspelling of one (the start of the name within a similarity ratio of 0.8
of a prefix: ``sglang_servcie_`` for ``sglang_service_``), and is *unknown* when it is checked and not a known name.
Private names (``__<role>_x`` and the older ``<role>__x``) are never checked. :data:`RENAMED` lists names the
collection no longer reads, with their successor; :func:`renamed_names` adds the stack contract's
``sglang_stack_retired_names`` (role names retired for their contract name, which the preflight refuses).

Errors: an unreadable or unparsable file of the collection raises OSError / yaml.YAMLError (the collection itself
is broken; the caller reports it).
"""

from __future__ import annotations

import difflib
import glob
import os
import re

import yaml

# Names the collection read once and reads no longer, with the name that took over: set under the old name, the value
# would be ignored without a word.
RENAMED = {
    "blackwell_stack": "sglang_stack_preset",
    "blackwell_stack_pins": "sglang_stack_pins",
}

# Names the collection reads by pattern: an inventory stack preset (sglang_stack_preset_<name>, selected by
# sglang_stack_preset: <name>; roles/sglang_stack/defaults/main.yml).
PATTERNS = (re.compile(r"^sglang_stack_preset_[a-z0-9_]+$"),)

_SET_FACT = ("ansible.builtin.set_fact", "set_fact", "ansible.legacy.set_fact")
_INCLUDE_VARS = ("ansible.builtin.include_vars", "include_vars")
_QUOTED = re.compile(r"[\"']([a-z][a-z0-9_]*)[\"']")
# a name read with a default: "x | default(...)"
_DEFAULTED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\|\s*(?:ansible\.builtin\.)?default\b")
_BLOCKS = ("block", "rescue", "always")
_PLAY_TASKS = ("pre_tasks", "tasks", "post_tasks", "handlers")
# the similarity a name's start needs to a role prefix to count as a misspelling of it
PREFIX_RATIO = 0.8
# the similarity the nearest real name needs to be offered
NEAREST_RATIO = 0.6


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # pylint: disable=too-many-ancestors
    """Safe loading that reads Ansible's tags (``!unsafe``, ``!vault``) as plain values."""


def _tagged(loader, _suffix, node):
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    return loader.construct_mapping(node)


_Loader.add_multi_constructor("!", _tagged)


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_Loader)  # nosec B506 - a safe loader with two extra tags


def _task_names(tasks, out):
    """Add the names ``tasks`` (a task list) defines to ``out``; recurses into blocks."""
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        if isinstance(task.get("register"), str):
            out.add(task["register"])
        if isinstance(task.get("vars"), dict):
            out.update(str(k) for k in task["vars"])
        for key in _SET_FACT:
            if isinstance(task.get(key), dict):
                out.update(str(k) for k in task[key] if k != "cacheable")
        for key in _INCLUDE_VARS:
            if isinstance(task.get(key), dict) and isinstance(task[key].get("name"), str):
                out.add(task[key]["name"])
        control = task.get("loop_control")
        if isinstance(control, dict):
            out.update(str(control[k]) for k in ("loop_var", "index_var") if isinstance(control.get(k), str))
        for key in _BLOCKS:
            _task_names(task.get(key), out)


def input_names(root):
    """The names a user sets: every argument-spec option and every default of the roles of the collection at ``root``."""
    out = set()
    for path in sorted(glob.glob(os.path.join(root, "roles", "*", "meta", "argument_specs.yml"))):
        for entry in ((_load(path) or {}).get("argument_specs") or {}).values():
            out.update(str(k) for k in ((entry or {}).get("options") or {}))
    for path in sorted(glob.glob(os.path.join(root, "roles", "*", "defaults", "*.yml"))):
        data = _load(path)
        if isinstance(data, dict):
            out.update(str(k) for k in data)
    return out


def known_names(root):
    """The set of variable names the collection at ``root`` defines (see the module docstring)."""
    out = input_names(root)
    for path in sorted(glob.glob(os.path.join(root, "roles", "*", "vars", "*.yml"))):
        data = _load(path)
        if isinstance(data, dict):
            out.update(str(k) for k in data)
    for pattern in ("tasks", "handlers"):
        for path in sorted(glob.glob(os.path.join(root, "roles", "*", pattern, "*.yml"))):
            _task_names(_load(path), out)
    for path in sorted(glob.glob(os.path.join(root, "roles", "*", "tasks", "*.yml"))
                       + glob.glob(os.path.join(root, "playbooks", "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            out.update(_DEFAULTED.findall(handle.read()))
    prefixes = tuple(role_prefixes(root))
    for path in sorted(glob.glob(os.path.join(root, "plugins", "filter", "*.py"))
                       + glob.glob(os.path.join(root, "plugins", "action", "*.py"))):
        with open(path, encoding="utf-8") as handle:
            out.update(n for n in _QUOTED.findall(handle.read()) if n.startswith(prefixes))
    for path in sorted(glob.glob(os.path.join(root, "playbooks", "*.yml"))):
        for play in _load(path) or []:
            if not isinstance(play, dict):
                continue
            if isinstance(play.get("vars"), dict):
                out.update(str(k) for k in play["vars"])
            for key in _PLAY_TASKS:
                _task_names(play.get(key), out)
    return out


def renamed_names(root):
    """:data:`RENAMED` and the contract's ``sglang_stack_retired_names`` (``{old name: the name to set}``)."""
    out = dict(RENAMED)
    data = _load(os.path.join(root, "roles", "sglang_stack", "defaults", "main.yml"))
    retired = data.get("sglang_stack_retired_names") if isinstance(data, dict) else None
    if isinstance(retired, dict):
        out.update((str(k), str(v)) for k, v in retired.items())
    return out


def role_prefixes(root):
    """``["<role>_", ...]`` for every role directory of the collection at ``root``, longest first."""
    roles = [name for name in os.listdir(os.path.join(root, "roles")) if os.path.isdir(os.path.join(root, "roles", name))]
    return sorted((name + "_" for name in roles), key=lambda p: (-len(p), p))


def _prefix_of(name, prefixes):
    """The role prefix ``name`` carries or misspells, else None."""
    for prefix in prefixes:
        if name.startswith(prefix):
            return prefix
    best, best_ratio = None, 0.0
    for prefix in prefixes:
        ratio = difflib.SequenceMatcher(None, name[:len(prefix)], prefix).ratio()
        if ratio > best_ratio:
            best, best_ratio = prefix, ratio
    return best if best_ratio >= PREFIX_RATIO else None


def nearest(name, inputs):
    """The input name closest to ``name``: one that starts with it (a name cut short), else difflib's best match
    (ratio >= :data:`NEAREST_RATIO`), else None."""
    longer = sorted((n for n in inputs if n.startswith(name)), key=lambda n: (len(n), n))
    if longer:
        return longer[0]
    close = difflib.get_close_matches(name, sorted(inputs), n=1, cutoff=NEAREST_RATIO)
    return close[0] if close else None


def unknown(names, known, prefixes, inputs=None, renamed=None):
    """``[{name, nearest, message}]`` for every name of ``names`` that carries (or misspells) a role prefix and is
    not in ``known``, sorted by name. ``nearest`` is the closest of ``inputs`` (the names a user sets, default: the
    public names of ``known``; never a private one) or None; a name of ``renamed`` (default :data:`RENAMED`) is
    named with its successor."""
    known = set(known)
    renamed = RENAMED if renamed is None else renamed
    candidates = set(inputs) if inputs is not None else {n for n in known if not n.startswith("_") and "__" not in n}
    out = []
    for name in sorted(set(str(n) for n in names)):
        if name in known or name.startswith("_") or any(p.match(name) for p in PATTERNS):
            continue
        if name in renamed:
            out.append({"name": name, "nearest": renamed[name],
                        "message": "%s is no longer read by the collection: it is %s now" % (name, renamed[name])})
            continue
        prefix = _prefix_of(name, prefixes)
        if prefix is None or name[len(prefix):].startswith("_") and name.startswith(prefix):
            continue
        best = nearest(name, candidates)
        message = "%s is not a variable of any role of blackwell.sglang (role prefix %s), so nothing reads it" % (name, prefix)
        if best:
            message += ": did you mean %s?" % best
        out.append({"name": name, "nearest": best, "message": message})
    return out
