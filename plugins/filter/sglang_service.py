# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Controller-side filter of the sglang_service and sglang_gateway unit templates (rendering only; the server's
argv is planned and checked by the sglang_server_args module)."""

from __future__ import annotations

import re

DOCUMENTATION_NOTE = """
systemd_exec_args(argv) -> str             argv quoted for a systemd Exec line (%% and $$ escaped, ${VAR} kept)
"""

_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def systemd_exec_args(argv, per_flag=False):
    """Quote tokens for an ``ExecStart=`` line.

    systemd splits on whitespace, honours double quotes and C-style escapes, expands ``%`` specifiers and
    ``$VAR``/``${VAR}`` (systemd.service(5) "Command lines"). A token that is exactly ``${NAME}`` stays an
    environment reference (the API key); everywhere else ``%`` -> ``%%`` and ``$`` -> ``$$`` so values are literal.
    With ``per_flag`` the result is a list of lines, one per flag with its values (for backslash continuations).
    """
    out = []
    for token in argv:
        token = str(token)
        if _ENV_REF.match(token):
            out.append(token)
            continue
        escaped = token.replace("%", "%%").replace("$", "$$")
        if _SAFE.match(escaped):
            out.append(escaped)
        else:
            out.append('"%s"' % escaped.replace("\\", "\\\\").replace('"', '\\"'))
    if not per_flag:
        return " ".join(out)
    lines = []
    for raw, quoted in zip([str(t) for t in argv], out):
        if raw.startswith("--") or not lines:
            lines.append(quoted)
        else:
            lines[-1] += " " + quoted
    return lines


class FilterModule(object):
    def filters(self):
        return {
            "systemd_exec_args": systemd_exec_args,
        }
