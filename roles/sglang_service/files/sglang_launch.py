# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""ExecStart launcher of sglang.service: secrets from systemd credentials, never from argv or the environment.

    python sglang-launch.py [--credential NAME=--flag]... [--module MOD | --script PATH] -- ARG...

For every ``--credential NAME=--flag`` the launcher reads ``$CREDENTIALS_DIRECTORY/NAME`` (systemd's
``LoadCredential=NAME:/root-only/file`` puts it there: a per-unit, non-swappable directory readable only by the
service user, systemd.exec(5) "Credentials") and appends ``--flag <value>`` to ``sys.argv`` *inside this
process*; then it runs ``MOD`` (default ``sglang.launch_server``) as ``__main__`` with :func:`runpy.run_module`,
exactly as ``python -m MOD ARG...`` would. The kernel's copy of the command line (``/proc/<pid>/cmdline``,
``ps``, ``systemctl status``) is the one systemd exec'd, without the value; SGLang's own parser reads
``sys.argv`` (``prepare_server_args(sys.argv[1:])`` in ``sglang/launch_server.py`` at both pins and 0.5.9).

SGLang logs its parsed ``server_args`` (with ``api_key='...'``) at start-up; ``sys.stdout``/``sys.stderr`` of
this process are replaced by writers that mask every secret value before it reaches the journal. Child
processes that SGLang spawns write to the inherited file descriptors, unmasked; the collection masks the journal
lines it prints in any case (``mask_secrets``).

Standard library only (runs under the release venv's python). Exit status 2 on a usage or credential error.
"""

from __future__ import annotations

import io
import os
import runpy
import sys

MASK = "********"


class _MaskingWriter(io.TextIOBase):
    """A text stream that replaces secret values before writing to ``inner``."""

    def __init__(self, inner, secrets):
        super().__init__()
        self._inner = inner
        self._secrets = sorted(set(secrets), key=len, reverse=True)

    def write(self, text):
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return self._inner.write(text)

    def flush(self):
        return self._inner.flush()

    def fileno(self):
        return self._inner.fileno()

    def isatty(self):
        return self._inner.isatty()

    @property
    def encoding(self):
        return getattr(self._inner, "encoding", "utf-8")

    def writable(self):
        return True


def _die(message):
    sys.stderr.write("sglang-launch: %s\n" % message)
    sys.exit(2)


def parse(argv):
    """``argv`` (without the program) -> (credentials [(name, flag)], module, script, rest)."""
    credentials, module, script = [], "sglang.launch_server", None
    i = 0
    while i < len(argv) and argv[i] != "--":
        opt = argv[i]
        if i + 1 >= len(argv):
            _die("%s needs a value" % opt)
        value = argv[i + 1]
        if opt == "--credential":
            name, sep, flag = value.partition("=")
            if not sep or not name or "/" in name or name in (".", "..") or not flag.startswith("--"):
                _die("--credential wants NAME=--flag, got %r" % value)
            credentials.append((name, flag))
        elif opt == "--module":
            module = value
        elif opt == "--script":
            script = value
        else:
            _die("unknown option %r (usage: [--credential NAME=--flag]... [--module M | --script P] -- ARG...)" % opt)
        i += 2
    if i >= len(argv):
        _die("missing '--' before the server arguments")
    return credentials, module, script, argv[i + 1:]


def read_credential(name):
    """The value of credential ``name`` (one trailing newline dropped); exits 2 when absent, empty or multi-line."""
    directory = os.environ.get("CREDENTIALS_DIRECTORY")
    if not directory:
        _die("CREDENTIALS_DIRECTORY is not set: the unit needs LoadCredential=%s:<file>" % name)
    path = os.path.join(directory, name)
    try:
        with open(path, "r", encoding="utf-8") as handle:
            value = handle.read()
    except OSError as exc:
        _die("cannot read credential %s: %s" % (name, exc.strerror))
    if value.endswith("\n"):
        value = value[:-1]
    if not value or any(c in value for c in "\n\r\0"):
        _die("credential %s is empty or spans several lines" % name)
    return value


def main(argv=None):
    credentials, module, script, rest = parse(list(sys.argv[1:] if argv is None else argv))
    secrets = []
    for name, flag in credentials:
        value = read_credential(name)
        secrets.append(value)
        rest.extend([flag, value])
    if secrets:
        sys.stdout = _MaskingWriter(sys.stdout, secrets)
        sys.stderr = _MaskingWriter(sys.stderr, secrets)
    if script:
        sys.argv = [script] + rest
        runpy.run_path(script, run_name="__main__")
    else:
        sys.argv = [module] + rest
        runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
