# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""NCCL's configuration files: settings NCCL takes on top of the process environment without logging them (S03).

NCCL reads them once per process (``initEnv`` in NCCL's ``src/misc/param.cc``): the file named by ``NCCL_CONF_FILE``,
or, when that is unset or empty, ``.nccl.conf`` in the passwd home of the process's user (``getpwuid(getuid())``,
not ``$HOME``), and then ``/etc/nccl.conf``. Each ``KEY=VALUE`` line is exported with ``setenv(key, value, 0)``: a
variable already in the environment wins, and the first file that sets a key wins over ``/etc/nccl.conf``. A line
that starts with ``#`` or has no ``=`` is skipped; nothing is stripped or unquoted.

So a file left in an image (field report S03: ``NCCL_IB_USE_INLINE=1`` in ``/etc/nccl.conf`` froze SGLang's PyNccl
warm-up after ``Init COMPLETE``) changes what the service runs with while its unit file shows nothing.

Shapes: ``files`` is a list of ``{"path": str, "found_by": "NCCL_CONF_FILE"|"home"|"system", "keys": {KEY: value}}``
in NCCL's order; ``effective`` maps each key a file puts into effect to ``{"value": str, "file": path}``. Pure
Python, read-only; the reads go through ``read_text`` (None for a file that is missing or unreadable).
"""

from __future__ import annotations

import os
import pwd
import shlex

from ansible_collections.blackwell.sglang.plugins.module_utils._fs import read_text as _read_text
from ansible_collections.blackwell.sglang.plugins.module_utils._host import parse_environment_file

ENV_VAR = "NCCL_CONF_FILE"
SYSTEM_FILE = "/etc/nccl.conf"
USER_FILE = ".nccl.conf"


def parse(text):
    """The ``KEY=VALUE`` lines of an NCCL config file -> dict (NCCL's rule: the first line that sets a key wins)."""
    keys = {}
    for line in (text or "").splitlines():
        line = line.rstrip("\r")
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        if key and key not in keys:
            keys[key] = value
    return keys


def user_home(user):
    """The passwd home of ``user`` (a name or a numeric uid), or None when the account does not exist (yet)."""
    if user in (None, ""):
        return None
    try:
        entry = pwd.getpwuid(int(user)) if str(user).isdigit() else pwd.getpwnam(str(user))
    except (KeyError, ValueError):
        return None
    return entry.pw_dir or None


def search_paths(environment, home):
    """``[(path, found_by)]`` NCCL reads for a process with this environment whose user's home is ``home``."""
    conf = (environment or {}).get(ENV_VAR) or ""
    paths = []
    if conf:
        paths.append((conf, ENV_VAR))
    elif home:
        paths.append((os.path.join(home, USER_FILE), "home"))
    paths.append((SYSTEM_FILE, "system"))
    return paths


def read(environment=None, home=None, read_text=_read_text):
    """The NCCL config files that exist for this environment and home, in NCCL's order (``files`` above)."""
    files = []
    for path, found_by in search_paths(environment, home):
        text = read_text(path)
        if text is not None:
            files.append({"path": path, "found_by": found_by, "keys": parse(text)})
    return files


def effective(files, environment=None):
    """Which keys the files put into effect for a process with ``environment`` (its own variables win)."""
    environment = environment or {}
    out = {}
    for conf in files or []:
        for key, value in sorted((conf.get("keys") or {}).items()):
            if key not in environment and key not in out:
                out[key] = {"value": value, "file": conf["path"]}
    return out


def keys_by_file(files, environment=None):
    """``{path: [KEY, ...]}`` of the keys each file puts into effect (files whose keys are all shadowed are left
    out): the classifier's ``nccl_conf_files`` context."""
    out = {}
    for key, where in sorted(effective(files, environment).items()):
        out.setdefault(where["file"], []).append(key)
    return out


def check(found, environment, managed_by):
    """The preflight check ``nccl_conf_unmanaged_keys``: WARN naming each file and the keys it puts into effect
    beside the service environment (``environment``; ``managed_by`` names the variable that sets it).

    :param found: :func:`collect`'s result (``searched``, ``files``), or None when it was not read (then a pass that
        says so).
    """
    found = found or {}
    files = found.get("files") or []
    name = "nccl_conf_unmanaged_keys"
    remedy = ("remove the file or its keys, or set each key the host needs in %s (the unit then shows it and it wins "
              "over the file); S03: a leftover NCCL_IB_USE_INLINE=1 / NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS=1 froze "
              "the PyNccl warm-up after Init COMPLETE" % managed_by)
    in_effect = keys_by_file(files, environment)
    if in_effect:
        return {"name": name, "status": "warn", "remedy": remedy, "files": in_effect, "message": (
            "NCCL reads %s on top of the service environment without logging it: %s" % (
                ", ".join(sorted(in_effect)),
                "; ".join("%s sets %s" % (path, ", ".join(keys)) for path, keys in sorted(in_effect.items()))))}
    if files:
        return {"name": name, "status": "pass", "remedy": "", "files": {}, "message": (
            "%s: every key is also set by the service environment, which wins"
            % ", ".join(conf["path"] for conf in files))}
    searched = found.get("searched")
    return {"name": name, "status": "pass", "remedy": "", "files": {}, "message": (
        "no NCCL config file (%s)" % ", ".join(searched) if searched else "the NCCL config files were not read")}


def collect(user=None, conf_file=None, read_text=_read_text):
    """What the host holds for a service run as ``user`` with ``NCCL_CONF_FILE=conf_file`` (empty: unset).

    :returns: dict ``user``, ``home`` (None when the account does not exist yet: no ``~/.nccl.conf`` then),
        ``searched`` (the paths NCCL would read), ``files`` (those that exist, as :func:`read`).
    """
    home = user_home(user)
    environment = {ENV_VAR: conf_file} if conf_file else {}
    return {"user": user or None, "home": home,
            "searched": [path for path, _how in search_paths(environment, home)],
            "files": read(environment, home, read_text)}


def unit_context(show_output, read_text=_read_text):
    """``keys_by_file`` for a systemd unit, from ``systemctl show <unit> --property=User --property=Environment
    --property=EnvironmentFiles`` (its text): the unit's account (root when unset) and environment (``Environment=``,
    then each ``EnvironmentFile=``, which systemd applies over it) decide what NCCL reads and what wins.

    Returns {} when nothing can be read; never raises on odd input (the caller is a failure classifier).
    """
    user, env, env_files = "", {}, []
    for line in (show_output or "").splitlines():
        key, _sep, value = line.partition("=")
        if key == "User":
            user = value.strip()
        elif key == "Environment" and value.strip():
            try:
                items = shlex.split(value)
            except ValueError:
                items = value.split()
            for item in items:
                name, sep, val = item.partition("=")
                if sep:
                    env[name] = val
        elif key == "EnvironmentFiles" and value.strip():
            # "<path> (ignore_errors=yes|no)", one property line per file
            env_files.append(value.strip().rsplit(" (", 1)[0])
    for path in env_files:
        env.update(parse_environment_file(read_text(path)))
    return keys_by_file(read(env, user_home(user or "0"), read_text), env)
