# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Rules for hostile or careless input, shared by the ``input_problems`` filter, modules and tests.

Every rule takes ``(name, value)`` (and, for the rules with arguments, keyword arguments) and returns a list of
messages; each message names the variable and the value (``repr``, secrets masked by the caller through
:func:`mask`). An empty list means the value is acceptable. A rule is named by a *rule spec*: its name (``port``)
or a call with literal arguments (``int(min=1)``, ``number(gt=0, lt=1)``, ``commit_id(allow='x_allow')``), see
:func:`parse_spec`. Each role runs one ``assert`` at its start over ``{rule spec: {variable name: value}}``
(:func:`check`), after Ansible checked the types of its meta/argument_specs.yml and before the role reads or
changes anything on the host: argument specs have types and choices but no ranges or patterns.

Why each rule exists:

* ``line``: values rendered into line-oriented files (systemd units, environment files) must not contain ``\\n``,
  ``\\r`` or NUL: a newline in ``sglang_service_read_write_paths`` otherwise renders a separate
  ``ExecStartPre=+...`` line that runs as root, unconfined.
* ``env_key``: ``[A-Za-z_][A-Za-z0-9_]*`` (POSIX shell names; systemd's ``EnvironmentFile=`` accepts no other).
* ``abs_path`` / ``abs_path_or_empty``: an absolute path without ``..`` components; a relative path is resolved
  against whatever directory a module runs in.
* ``host``: an IP address or a DNS name (RFC 1123 labels); nothing else may go into a URL or into code.
* ``port``: an integer 1-65535. ``positive``: a number > 0. ``nonneg``: a number >= 0.
* ``git_ref``: ``git check-ref-format``'s rules plus: no leading ``-`` (``--upload-pack=...`` is an option to
  git), no whitespace or shell metacharacters, no ``..``.
* ``name_component``: one path component (release ids, rollback targets, marker names): no ``/``, not ``.`` or
  ``..``, no leading ``-``, ``[A-Za-z0-9._+@-]`` only.
* ``pip_requirement``: a PEP 508 name with an optional version specifier, without environment markers
  (``;``), URLs or options (``--index-url``).
* ``version``: a concrete version (PEP 440), never ``latest``/``main``/``""``.
* ``cmake_arg``: one ``-DNAME=value`` token without whitespace.
* ``int(min=, max=)``: a whole number (an int, or a string of one: inventories write ``"8"``) within the bounds;
  ``number(min=, max=, gt=, lt=)``: any number within them (``gt``/``lt`` exclusive). A list: every item. A
  timeout of 0 or a negative restart delay is accepted by the argument spec's ``int`` and breaks much later.
* ``env_name``: one environment-variable name (a string), e.g. the variable an API key is passed in.
* ``major_minor(min=)``: ``"13.0"``: what CUDA versions and compute capabilities look like; ``latest`` otherwise
  dies deep inside a filter (``int('latest')``). ``min``: the lowest accepted, compared numerically.
* ``cuda_arch``: ``sm_<NN>a`` / ``sm_<NN>f`` (every item): arch-specific targets; plain ``sm_120`` has no FP4 MMA.
* ``octal_mode``: a file mode as a string of octal digits (``"0755"``).
* ``duration``: a Prometheus duration (``15s``, ``2m``, ``1h30m``, ``30d``); ``timespan``: a systemd time span
  (``1min``, ``15s``, ``2h 30min``).
* ``url(schemes=, empty=)``: ``scheme://host[:port][/path]`` without whitespace; ``empty=True`` also accepts ``""``.
* ``git_url``: what git clones without reading it as an option (a URL, an absolute path, ``user@host:path``).
* ``pattern(regex, what)``: the whole value matches ``regex`` (``what`` says in words what is expected).
* ``gemm_shapes`` / ``moe_shapes``: the FP4 probe's shapes (``[{n, k}]`` with ``k % 32 == 0``;
  ``[{hidden, intermediate, experts, top_k}]`` with ``top_k <= experts``), whole numbers > 0.
* ``commit_id(allow=)``: a commit id (7 to 64 hex digits). A branch or tag moves while the release key stays the
  same, so the same release id would stand for different code; ``allow`` names the switch that accepts one.
* ``model_path``: ``""`` (none yet), an absolute path without ``..`` or a Hugging Face repository id ``org/name``.
* ``outside_collection(root=)``: a controller path (report, cache) that is not inside the installed collection.
"""

from __future__ import annotations

import ast
import ipaddress
import math
import os
import re

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DNS_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_NAME_COMPONENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._+@-]{0,199}$")
_PIP_REQ = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?(\[[A-Za-z0-9._,-]+\])?"
                      r"(\s*(===|==|!=|~=|>=|<=|>|<)\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(==|!=|~=|>=|<=|>|<)\s*[A-Za-z0-9.*+!_-]+)*)?$")
_PEP440 = re.compile(r"^v?(\d+!)?\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[A-Za-z0-9.]+)?$")
_CMAKE_ARG = re.compile(r"^-D[A-Za-z_][A-Za-z0-9_.-]*(:[A-Z]+)?=\S*$")
_GIT_BAD = re.compile(r"[\s~^:?*\[\\;&|$`'\"<>(){}!#]")


def _show(value):
    return repr(value)


def rule_line(name, value):
    """No newline, carriage return or NUL in ``value`` (str, or every item of a list / key+value of a dict)."""
    out = []
    for item in _flatten(value):
        text = str(item)
        for char, label in (("\n", "a newline"), ("\r", "a carriage return"), ("\0", "a NUL byte")):
            if char in text:
                out.append("%s contains %s (%s): refused, it would add lines to a root-owned file" % (name, label, _show(text)))
                break
    return out


def _flatten(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _flatten(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _flatten(item)
    elif value is not None:
        yield value


def rule_env_key(name, value):
    """Every key of the dict ``value`` is an environment-variable name."""
    if not isinstance(value, dict):
        return ["%s must be a dict of environment variables, got %s" % (name, type(value).__name__)]
    return ["%s: %s is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)" % (name, _show(k))
            for k in value if not (isinstance(k, str) and _ENV_KEY.match(k))]


def rule_abs_path(name, value):
    """An absolute path without ``..`` (a list: every item)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        text = "" if item is None else str(item)
        if not text.startswith("/"):
            out.append("%s must be an absolute path, got %s" % (name, _show(text)))
        elif ".." in text.split("/"):
            out.append("%s must not contain '..', got %s" % (name, _show(text)))
        elif any(c in text for c in "\n\r\0"):
            out.append("%s contains a control character: %s" % (name, _show(text)))
        elif any(c in text for c in "\"\\$`"):
            # systemd path settings (ReadWritePaths=, LoadCredential=) expand none of these the way Exec lines
            # do, and no deployment path needs them
            out.append("%s must not contain \" \\ $ or `: %s" % (name, _show(text)))
    return out


def rule_abs_path_or_empty(name, value):
    if value in (None, ""):
        return []
    return rule_abs_path(name, value)


def is_host(text):
    """True for an IP address (v4/v6) or a DNS name."""
    if not isinstance(text, str) or not text:
        return False
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        pass
    if len(text) > 253:
        return False
    labels = text[:-1].split(".") if text.endswith(".") else text.split(".")
    return all(_DNS_LABEL.match(label) for label in labels)


def rule_host(name, value):
    if is_host(value):
        return []
    return ["%s must be an IP address or a host name, got %s" % (name, _show(value))]


def _number(value):
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def rule_port(name, value):
    num = _number(value)
    if num is None or num != int(num) or not 1 <= num <= 65535:
        return ["%s must be a port 1-65535, got %s" % (name, _show(value))]
    return []


def rule_positive(name, value):
    num = _number(value)
    if num is None or num <= 0:
        return ["%s must be a number > 0, got %s" % (name, _show(value))]
    return []


def rule_nonneg(name, value):
    num = _number(value)
    if num is None or num < 0:
        return ["%s must be a number >= 0, got %s" % (name, _show(value))]
    return []


def rule_git_ref(name, value):
    """A branch, tag or commit id that git cannot read as an option or a path trick."""
    text = "" if value is None else str(value)
    reasons = []
    if not text:
        reasons.append("is empty")
    if text.startswith("-"):
        reasons.append("starts with '-' (git would read it as an option)")
    if ".." in text or text.startswith("/") or text.endswith("/") or "//" in text or text.endswith(".lock") or text.endswith("."):
        reasons.append("is not a valid ref ('..', leading/trailing '/', '.lock' or a trailing '.')")
    if _GIT_BAD.search(text) or any(ord(c) < 32 or ord(c) == 127 for c in text):
        reasons.append("contains whitespace, a control character or one of ~^:?*[\\;&|$`'\"<>(){}!#")
    if "@{" in text or text == "@":
        reasons.append("contains '@{'")
    return ["%s %s: %s" % (name, _show(text), "; ".join(reasons))] if reasons else []


def rule_name_component(name, value):
    """One path component: release ids, rollback targets, marker names, user and unit names (a list: every item)."""
    out = []
    for label, item in _items(name, value):
        text = "" if item is None else str(item)
        if text in (".", "..") or not _NAME_COMPONENT.match(text):
            out.append("%s must be a single name ([A-Za-z0-9_][A-Za-z0-9._+@-]*, no '/', not '.' or '..'), got %s"
                       % (label, _show(text)))
    return out


def rule_pip_requirement(name, value):
    items = value if isinstance(value, (list, tuple)) else [value]
    return ["%s: %s is not a plain requirement (name[extras] and version specifiers only; no ';' markers, URLs or "
            "options)" % (name, _show(item)) for item in items if not (isinstance(item, str) and _PIP_REQ.match(item.strip()))]


def rule_version(name, value):
    text = "" if value is None else str(value)
    if text.lower() in ("latest", "main", "master", "head", "nightly", "") or not _PEP440.match(text):
        return ["%s must be a concrete version (e.g. 0.6.5), got %s" % (name, _show(text))]
    return []


def rule_cmake_arg(name, value):
    items = value if isinstance(value, (list, tuple)) else [value]
    return ["%s: %s must be one -DNAME=value token without whitespace" % (name, _show(item))
            for item in items if not (isinstance(item, str) and _CMAKE_ARG.match(item))]


def _whole(value):
    """``value`` as an int when it is a whole number (int, integral float, or a string of digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.match(r"^\s*[-+]?\d+\s*$", value):
        return int(value)
    return None


def _bounds_text(lo=None, hi=None, gt=None, lt=None):
    parts = []
    if gt is not None:
        parts.append("> %s" % gt)
    if lo is not None:
        parts.append(">= %s" % lo)
    if lt is not None:
        parts.append("< %s" % lt)
    if hi is not None:
        parts.append("<= %s" % hi)
    return " and ".join(parts)


def _items(name, value):
    """``[(label, item)]``: the value itself, or each item of a list as ``name[i]``."""
    if isinstance(value, (list, tuple)):
        return [("%s[%d]" % (name, i), item) for i, item in enumerate(value)]
    return [(name, value)]


def rule_int(name, value, min=None, max=None):  # pylint: disable=redefined-builtin
    """A whole number within ``[min, max]`` (a list: every item)."""
    out = []
    for label, item in _items(name, value):
        num = _whole(item)
        if num is None or (min is not None and num < min) or (max is not None and num > max):
            bounds = _bounds_text(min, max)
            out.append("%s must be a whole number%s, got %s" % (label, (" " + bounds) if bounds else "", _show(item)))
    return out


def rule_number(name, value, min=None, max=None, gt=None, lt=None):  # pylint: disable=redefined-builtin
    """A number within the bounds (``min``/``max`` inclusive, ``gt``/``lt`` exclusive; a list: every item)."""
    out = []
    for label, item in _items(name, value):
        num = _number(item)
        bad = (num is None or math.isnan(num) or (min is not None and num < min) or (max is not None and num > max)
               or (gt is not None and num <= gt) or (lt is not None and num >= lt))
        if bad:
            bounds = _bounds_text(min, max, gt, lt)
            out.append("%s must be a number%s, got %s" % (label, (" " + bounds) if bounds else "", _show(item)))
    return out


def rule_env_name(name, value):
    if isinstance(value, str) and _ENV_KEY.match(value):
        return []
    return ["%s must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got %s" % (name, _show(value))]


_MAJOR_MINOR = re.compile(r"^(\d+)\.(\d+)$")


def rule_major_minor(name, value, min=None):  # pylint: disable=redefined-builtin
    """``"13.0"``: digits, one dot, digits (a number as YAML reads ``13.0`` too); at least ``min`` (a major.minor
    string) when given."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    match = _MAJOR_MINOR.match(value) if isinstance(value, str) else None
    if not match:
        return ["%s must be a major.minor version such as \"13.0\", got %s" % (name, _show(value))]
    if min is not None:
        low = tuple(int(p) for p in _MAJOR_MINOR.match(str(min)).groups())
        if (int(match.group(1)), int(match.group(2))) < low:
            return ["%s must be %s or later, got %s" % (name, min, _show(value))]
    return []


_CUDA_ARCH = re.compile(r"^sm_[0-9]{2,3}[af]$")


def rule_cuda_arch(name, value):
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items:
        return ["%s must name at least one GPU architecture (e.g. sm_120a)" % name]
    return ["%s: %s must be an arch-specific target such as sm_120a (plain sm_120 has no FP4 MMA)" % (name, _show(item))
            for item in items if not (isinstance(item, str) and _CUDA_ARCH.match(item))]


def rule_octal_mode(name, value):
    if isinstance(value, str) and re.match(r"^0?[0-7]{3,4}$", value):
        return []
    return ["%s must be a file mode as a quoted string of octal digits such as \"0755\", got %s" % (name, _show(value))]


_PROM_DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
_SYSTEMD_SPAN = re.compile(r"^(\s*\d+(\.\d+)?\s*(usec|us|msec|ms|seconds|second|sec|s|minutes|minute|min|m|hours|hour|hr|h|"
                           r"days|day|d|weeks|week|w|months|month|M|years|year|y)?\s*)+$")


def rule_duration(name, value):
    """A Prometheus duration: units y w d h m s ms in that order, each at most once (``1h30m``)."""
    text = value if isinstance(value, str) else ""
    if text and _PROM_DURATION.match(text) and re.search(r"[1-9]", text):
        return []
    return ["%s must be a Prometheus duration such as 15s, 2m, 1h30m or 30d, got %s" % (name, _show(value))]


def rule_timespan(name, value):
    """A systemd time span (``1min``, ``15s``, ``2h 30min``; a bare number is seconds), not zero."""
    text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
    if text.strip() and _SYSTEMD_SPAN.match(text) and re.search(r"[1-9]", text):
        return []
    return ["%s must be a systemd time span such as 15s, 1min or 2h 30min, got %s" % (name, _show(value))]


def rule_url(name, value, schemes=("http", "https"), empty=False):
    """``scheme://host[:port][/path]`` (``file:///path`` for the scheme file); credentials are masked in the message.
    A list: every item."""
    if isinstance(value, (list, tuple)):
        return [m for label, item in _items(name, value) for m in rule_url(label, item, schemes, empty)]
    text = "" if value is None else value
    if empty and text == "":
        return []
    if isinstance(text, str) and "file" in schemes and re.match(r"^file:///[^\s]*$", text):
        return []
    if isinstance(text, str):
        match = re.match(r"^([a-z][a-z0-9+.-]*)://([^\s/?#@]+@)?(\[[0-9A-Fa-f:.]+\]|[^\s/:?#\[\]@]+)(:\d{1,5})?([/?#]\S*)?$", text)
        if match and match.group(1) in schemes and (match.group(3).startswith("[") or is_host(match.group(3))):
            return []
    return ["%s must be a %s URL (scheme://host[:port][/path], no whitespace), got %s"
            % (name, "/".join(schemes), _show(mask_url(text) if isinstance(text, str) else text))]


_GIT_URL = re.compile(r"^(https?|ssh|git|file)://\S+$|^/\S*$|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S+$")


def rule_git_url(name, value):
    """A repository git can clone that it cannot read as an option: a URL (https, ssh, git, file), an absolute path or
    ``user@host:path``; credentials in it are masked in the message."""
    if isinstance(value, str) and _GIT_URL.match(value):
        return []
    shown = mask_url(value) if isinstance(value, str) else value
    return ["%s must be a URL, an absolute path or user@host:path, got %s" % (name, _show(shown))]


def rule_pattern(name, value, regex, what):
    """The whole value (a list: every item) matches ``regex``; ``what`` describes it in words."""
    out = []
    for label, item in _items(name, value):
        if not (isinstance(item, str) and re.fullmatch(regex, item)):
            out.append("%s must be %s, got %s" % (label, what, _show(item)))
    return out


def _dims(name, value, keys):
    """Messages for ``value``: a list of dicts whose ``keys`` are whole numbers > 0."""
    if not isinstance(value, (list, tuple)):
        return ["%s must be a list of dicts with %s, got %s" % (name, ", ".join(keys), _show(value))]
    out = []
    for index, shape in enumerate(value):
        label = "%s[%d]" % (name, index)
        if not isinstance(shape, dict):
            out.append("%s must be a dict with %s, got %s" % (label, ", ".join(keys), _show(shape)))
            continue
        missing = [k for k in keys if k not in shape]
        if missing:
            out.append("%s needs %s, got %s" % (label, ", ".join(keys), _show(shape)))
            continue
        for key in keys:
            num = _whole(shape[key])
            if num is None:
                out.append("%s.%s must be a whole number, got %s" % (label, key, _show(shape[key])))
            elif num <= 0:
                out.append("%s.%s must be > 0, got %s" % (label, key, _show(shape[key])))
    return out


def rule_gemm_shapes(name, value):
    """FP4 dense GEMM shapes ``[{n, k}]``: whole numbers > 0, ``k`` a multiple of 32 (one NVFP4 scale block is 16
    values and the kernels tile K by 32)."""
    out = _dims(name, value, ("n", "k"))
    if out:
        return out
    return ["%s[%d].k must be a multiple of 32, got %s" % (name, i, _show(s["k"]))
            for i, s in enumerate(value) if _whole(s["k"]) % 32]


def rule_moe_shapes(name, value):
    """FP4 MoE shapes ``[{hidden, intermediate, experts, top_k}]``: whole numbers > 0, ``top_k <= experts``."""
    out = _dims(name, value, ("hidden", "intermediate", "experts", "top_k"))
    if out:
        return out
    return ["%s[%d].top_k must be at most experts (%s), got %s" % (name, i, s["experts"], _show(s["top_k"]))
            for i, s in enumerate(value) if _whole(s["top_k"]) > _whole(s["experts"])]


def rule_commit_id(name, value, allow=None):
    """A commit id: 7 to 64 hex digits (a branch or tag name moves under the same release key)."""
    text = "" if value is None else str(value)
    if re.match(r"^[0-9a-fA-F]{7,64}$", text):
        return []
    hint = (" or set %s: true to deploy a moving ref anyway" % allow) if allow else ""
    return ["%s must be a commit id (7 to 64 hex digits), got %s: a branch or tag moves, and the release built from it "
            "would keep its release id while the code changes. Pin the commit (git ls-remote <repository> %s)%s"
            % (name, _show(text), text or "<ref>", hint)]


# The collection this file belongs to: plugins/module_utils/<this file> (on the controller, where the filters run).
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rule_outside_collection(name, value, root=None):
    """A controller path (a report, a cache) not inside the installed collection (``root``, default the one this file
    belongs to). An installed collection is the directory with ``MANIFEST.json`` that ``ansible-galaxy collection
    install`` replaces as a whole: what is written there is lost on the next install, and a model copy of hundreds of
    GB fills the collections path. A checkout (no ``MANIFEST.json``) keeps its ``.cache/`` for development."""
    root = root or COLLECTION_ROOT
    text = "" if value is None else str(value)
    if not text or not os.path.isfile(os.path.join(root, "MANIFEST.json")):
        return []
    real, top = os.path.realpath(os.path.expanduser(text)), os.path.realpath(root)
    if real != top and not real.startswith(top + os.sep):
        return []
    return ["%s is %s, inside the installed collection %s: ansible-galaxy replaces that directory on the next install. "
            "Put it in your inventory's directory or under $XDG_CACHE_HOME (~/.cache/blackwell-sglang)"
            % (name, _show(text), top)]


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def rule_model_path(name, value):
    """``""``, an absolute path (no ``..``), or a Hugging Face repository id ``org/name``."""
    text = "" if value is None else value
    if not isinstance(text, str):
        return ["%s must be a path or a Hugging Face repository id (a string), got %s" % (name, _show(value))]
    if text == "" or (_HUB_ID.match(text) and ".." not in text):
        return []
    if text.startswith("/"):
        return rule_abs_path(name, text)
    return ["%s must be an absolute path or a Hugging Face repository id such as org/name, got %s" % (name, _show(text))]


RULES = {
    "line": rule_line,
    "env_key": rule_env_key,
    "abs_path": rule_abs_path,
    "abs_path_or_empty": rule_abs_path_or_empty,
    "host": rule_host,
    "port": rule_port,
    "positive": rule_positive,
    "nonneg": rule_nonneg,
    "git_ref": rule_git_ref,
    "name_component": rule_name_component,
    "pip_requirement": rule_pip_requirement,
    "version": rule_version,
    "cmake_arg": rule_cmake_arg,
    "int": rule_int,
    "number": rule_number,
    "env_name": rule_env_name,
    "major_minor": rule_major_minor,
    "cuda_arch": rule_cuda_arch,
    "octal_mode": rule_octal_mode,
    "duration": rule_duration,
    "timespan": rule_timespan,
    "url": rule_url,
    "pattern": rule_pattern,
    "git_url": rule_git_url,
    "gemm_shapes": rule_gemm_shapes,
    "moe_shapes": rule_moe_shapes,
    "commit_id": rule_commit_id,
    "model_path": rule_model_path,
    "outside_collection": rule_outside_collection,
}

_SPECS = {}


def parse_spec(spec):
    """``(rule function, args, kwargs)`` of a rule spec: ``"port"`` or ``"int(min=1, max=65535)"``.

    Arguments are Python literals (numbers, strings, lists, None). ValueError for an unknown rule, a call that is not
    ``name(literals)``, or arguments the rule does not take.
    """
    if spec in _SPECS:
        return _SPECS[spec]
    text = str(spec).strip()
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ValueError("input rule %r is not a rule name or a call such as int(min=1)" % spec)
    if isinstance(node, ast.Name):
        rule, args, kwargs = node.id, (), {}
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        try:
            rule = node.func.id
            args = tuple(ast.literal_eval(arg) for arg in node.args)
            kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        except ValueError:
            raise ValueError("input rule %r: the arguments must be literals" % spec)
    else:
        raise ValueError("input rule %r is not a rule name or a call such as int(min=1)" % spec)
    if rule not in RULES:
        raise ValueError("unknown input rule %r (known: %s)" % (rule, ", ".join(sorted(RULES))))
    try:
        if rule == "pattern":
            re.compile(args[0] if args else kwargs.get("regex", ""))
        RULES[rule]("probe", None, *args, **kwargs)
    except re.error as exc:
        raise ValueError("input rule %r: %s" % (spec, exc))
    except TypeError as exc:
        raise ValueError("input rule %r: %s" % (spec, exc))
    _SPECS[spec] = (RULES[rule], args, kwargs)
    return _SPECS[spec]


def problems(values, rule):
    """Apply the rule spec ``rule`` to every ``{name: value}`` of ``values``; the messages, sorted by name."""
    func, args, kwargs = parse_spec(rule)
    out = []
    for name in sorted(values):
        out.extend(func(name, values[name], *args, **kwargs))
    return out


def check(table):
    """Every message of ``{rule spec: {variable name: value}}`` (a role's one input check), in the table's order.

    A rule's group may be empty (``{}``: nothing to check, e.g. a switch turned the rule off). ValueError for a
    table that is not a dict of dicts or an unknown rule spec (an error of the role, not of the inventory).
    """
    if not isinstance(table, dict):
        raise ValueError("the input table must be a dict {rule: {variable: value}}, got %s" % type(table).__name__)
    out = []
    for rule, values in table.items():
        if not isinstance(values, dict):
            raise ValueError("input rule %r: expected a dict {variable: value}, got %s" % (rule, type(values).__name__))
        out.extend(problems(values, rule))
    return out


# --- masking secrets in text the collection prints -------------------------------------------------------------
_SECRET_PATTERNS = [
    # ServerArgs repr / JSON dumps: api_key='...', "admin_api_key": "..."
    re.compile(r"""((?:admin_)?api_key['"]?\s*[=:]\s*['"])([^'"]+)(['"])""", re.IGNORECASE),
    # argv: --api-key VALUE / --api-key=VALUE
    re.compile(r"(--(?:admin-)?api-key[= ])(\S+)()"),
    # HTTP headers
    re.compile(r"((?:Authorization:\s*)?Bearer\s+)([A-Za-z0-9._~+/=-]+)()", re.IGNORECASE),
    # Hugging Face tokens
    re.compile(r"()(hf_[A-Za-z0-9]{20,})()"),
    # credentials in URLs: scheme://user:password@host
    re.compile(r"(://[^/\s:@]+:)([^@\s/]+)(@)"),
]
MASK = "********"


def mask(text, secrets=None):
    """``text`` with every known secret value and every key-looking pattern replaced by :data:`MASK`."""
    if text is None:
        return text
    out = str(text)
    for secret in sorted((s for s in (secrets or []) if s and len(str(s)) >= 1), key=lambda s: -len(str(s))):
        out = out.replace(str(secret), MASK)
    for pattern in _SECRET_PATTERNS:
        out = pattern.sub(lambda m: m.group(1) + MASK + m.group(3), out)
    return out


def mask_url(url):
    """A repository URL without its password / token (``https://user:tok@host/x`` -> ``https://user:********@host/x``)."""
    text = "" if url is None else str(url)
    text = re.sub(r"(://[^/\s:@]+:)([^@\s/]+)(@)", lambda m: m.group(1) + MASK + m.group(3), text)
    # a token alone as user: https://ghp_xxx@host/
    return re.sub(r"(://)([^/\s:@]{16,})(@)", lambda m: m.group(1) + MASK + m.group(3), text)
