# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Rules for hostile or careless input, shared by the ``input_problems`` filter, modules and tests.

Every rule takes ``(name, value)`` and returns a list of messages; each message names the variable and the value
(``repr``, secrets masked by the caller through :func:`mask`). An empty list means the value is acceptable. The
roles run one ``assert`` per rule over a dict ``{variable name: value}`` before anything changes on the host.

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

Stack-contract aliases (:func:`alias_problems`): a role variable that stands for a value of the stack contract
(``sglang_release_torch_version`` for ``sglang_stack_torch_version``, the table ``sglang_stack_pin_aliases`` of
roles/sglang_stack) must resolve to the contract's value; otherwise the roles would build one stack and key the
release on another (an inventory that still sets the role's own name). A retired name (``torch_nightly_version``,
the table ``sglang_stack_retired_names``), one that the roles no longer read, must not be set at all.
"""

from __future__ import annotations

import ipaddress
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
    """One path component: release ids, rollback targets, marker names."""
    text = "" if value is None else str(value)
    if text in (".", "..") or not _NAME_COMPONENT.match(text):
        return ["%s must be a single name ([A-Za-z0-9_][A-Za-z0-9._+@-]*, no '/', not '.' or '..'), got %s"
                % (name, _show(text))]
    return []


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
}


def problems(values, rule):
    """Apply ``rule`` to every ``{name: value}`` of ``values``; returns the list of messages (sorted by name)."""
    if rule not in RULES:
        raise ValueError("unknown input rule %r (known: %s)" % (rule, ", ".join(sorted(RULES))))
    out = []
    for name in sorted(values):
        out.extend(RULES[rule](name, values[name]))
    return out


def _same(left, right):
    """Equal values; scalars also when their text is equal (an inventory's ``"8"`` against ``8``)."""
    if left == right:
        return True
    scalar = (str, int, float, bool, type(None))
    return isinstance(left, scalar) and isinstance(right, scalar) and str(left) == str(right)


def alias_problems(values, aliases, contract, retired=None):
    """Messages for every role alias whose value differs from its contract variable's value, and for every retired
    name that is set.

    ``values``: ``{name: resolved value}`` of the aliases and retired names that are defined (a name that is not
    defined cannot differ). ``aliases``: ``{alias name: contract name}`` (``sglang_stack_pin_aliases``). ``contract``:
    ``{contract name: resolved value}``. ``retired``: ``{old name: contract name}`` (``sglang_stack_retired_names``):
    names no role reads any more, so a value set under one would be ignored; any value is refused, naming the contract
    name to set instead. A contract name missing from ``contract`` is an error of the caller (ValueError). Returns the
    messages sorted by name; empty = no divergence.
    """
    retired = retired or {}
    out = []
    for alias in sorted(values):
        if alias in retired:
            out.append("%s is no longer read: the roles read the stack contract's %s. Set %s "
                       "(inventories/<name>/group_vars/all/sglang_stack.yml) and remove %s from the inventory"
                       % (alias, retired[alias], retired[alias], alias))
            continue
        if alias not in aliases:
            continue
        name = aliases[alias]
        if name not in contract:
            raise ValueError("%s is listed as an alias of %s, which the stack contract does not define" % (alias, name))
        if not _same(values[alias], contract[name]):
            out.append("%s is %s but the stack contract's %s is %s: the roles would disagree on it. Set the value once, "
                       "as %s (inventories/<name>/group_vars/all/sglang_stack.yml), and remove %s from the inventory"
                       % (alias, _show(values[alias]), name, _show(contract[name]), name, alias))
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
