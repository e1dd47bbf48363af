# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Input-rule filters (module_utils/_inputs.py): one assert per role, messages naming the variable and value."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs


def input_problems(values, rule=None):
    """Messages for bad values (empty = acceptable).

    ``{name: value} | input_problems(rule)``: one rule spec for every value. ``{rule spec: {name: value}} |
    input_problems``: a role's whole input check in one call (module_utils/_inputs.py ``check``).
    """
    if not isinstance(values, dict):
        raise AnsibleFilterError("input_problems expects a dict, got %s" % type(values).__name__)
    try:
        if rule is None:
            return _inputs.check({k: dict(v) if isinstance(v, dict) else v for k, v in values.items()})
        return _inputs.problems(dict(values), rule)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def mask_secrets(text, secrets=None):
    """``text`` (or each line of a list) with secret values and key-looking patterns masked."""
    secrets = [s for s in (secrets or []) if s]
    if isinstance(text, (list, tuple)):
        return [_inputs.mask(line, secrets) for line in text]
    return _inputs.mask(text, secrets)


def mask_url(url):
    """A URL with the password or token of its user part masked."""
    return _inputs.mask_url(url)


def systemd_env_value(value):
    """A value quoted for a systemd ``EnvironmentFile=`` line (double quotes; ``\\``, ``"``, `` ` ``, ``$`` escaped).

    Refuses newline, carriage return and NUL (they would end the assignment and start a new one).
    """
    text = "" if value is None else str(value)
    if any(c in text for c in "\n\r\0"):
        raise AnsibleFilterError("environment value %r contains a newline, carriage return or NUL" % text)
    for char in ("\\", '"', "`", "$"):
        text = text.replace(char, "\\" + char)
    return '"%s"' % text


class FilterModule(object):
    def filters(self):
        return {
            "input_problems": input_problems,
            "mask_secrets": mask_secrets,
            "mask_url": mask_url,
            "systemd_env_value": systemd_env_value,
        }
