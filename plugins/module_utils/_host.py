# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Host facts the preflight needs that Ansible's setup module does not give in the right shape.

Pure Python, stdlib only, read-only. Units: bytes unless a key says otherwise (``*_kib``, ``*_mib``, ``*_gib``).

- ``/dev/shm`` size: NCCL puts its shared-memory segments there; 64 MiB (the container default) kills TP > 1 with
  ``posix_fallocate failed : No space left on device`` (field report B27).
- Free disk at the nearest existing ancestor of each path the stack will write (venv, build tree): the path itself
  may not exist before the first run.
- ``MemAvailable`` (``/proc/meminfo``, kB) and usable cores (``sched_getaffinity``) feed the build sizing rule (B05).
- Proxy variables from this process's environment and ``/etc/environment`` (what systemd services and logins
  inherit): SGLang's warmup request to ``http://0.0.0.0:<port>`` goes through ``http_proxy`` unless ``no_proxy``
  covers it (B24).
- glibc version (``os.confstr``) for the pip/existing CUDA install methods (manylinux wheels).
- Kernel release and whether ``/lib/modules/<release>/build`` exists (headers for DKMS, B32).
"""

from __future__ import annotations

import os
import platform
import re

from ansible_collections.blackwell.sglang.plugins.module_utils._fs import read_text as _read

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
              "FTP_PROXY")
NO_PROXY_VARS = ("no_proxy", "NO_PROXY")
GIB = 1024 ** 3


def parse_meminfo(text):
    """``/proc/meminfo`` -> dict of bytes (values are kB in the file)."""
    out = {}
    for line in (text or "").splitlines():
        match = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if match:
            out[match.group(1)] = int(match.group(2)) * 1024
    return out


def parse_environment_file(text):
    """``/etc/environment`` (``KEY=value`` lines, optional quotes, ``#`` comments, optional ``export``) -> dict."""
    env = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        if "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def proxy_settings(environ, environment_file_text=None):
    """Proxy variables seen by this process and in ``/etc/environment``.

    :returns: dict ``{proxies: {var: value}, no_proxy: [entries], sources: {var: "env"|"/etc/environment"}}``;
        empty values are ignored.
    """
    proxies, sources, no_proxy = {}, {}, []
    file_env = parse_environment_file(environment_file_text)
    for source, env in (("env", environ or {}), ("/etc/environment", file_env)):
        for var in PROXY_VARS:
            if env.get(var) and var not in proxies:
                proxies[var] = env[var]
                sources[var] = source
        for var in NO_PROXY_VARS:
            for entry in (env.get(var) or "").split(","):
                entry = entry.strip()
                if entry and entry not in no_proxy:
                    no_proxy.append(entry)
    return {"proxies": proxies, "no_proxy": no_proxy, "sources": sources}


def nearest_existing(path):
    """The path itself or its nearest existing ancestor (``/`` at worst)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def fs_space(path):
    """Free space for unprivileged writers at ``path`` (or its nearest existing ancestor).

    :returns: dict ``{path, checked_path, total_bytes, free_bytes, free_gib}``.
    """
    checked = nearest_existing(path)
    st = os.statvfs(checked)
    free = st.f_bavail * st.f_frsize
    return {"path": path, "checked_path": checked, "total_bytes": st.f_blocks * st.f_frsize, "free_bytes": free,
            "free_gib": round(free / float(GIB), 2), "device": os.stat(checked).st_dev}


def glibc_version():
    """``"2.36"`` or None (musl, or not Linux)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):
        return None
    match = re.match(r"glibc (\d+\.\d+)", text or "")
    return match.group(1) if match else None


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def collect(paths=None, environ=None, proc_root="/proc", etc_root="/etc", shm_path="/dev/shm", modules_root="/lib/modules",
            stat_paths=None):
    """All host facts.

    :param paths: dict label -> path to measure free disk for (``{"venv": "/opt/sglang/venv"}``).
    :param stat_paths: dict label -> path whose existence is reported (``{"model": "/models/x"}``).
    :returns: dict ``{shm, disk, memory, cpus, proxy, glibc, kernel, paths}``.
    """
    facts = {}
    if os.path.isdir(shm_path):
        st = os.statvfs(shm_path)
        facts["shm"] = {"path": shm_path, "size_bytes": st.f_blocks * st.f_frsize,
                        "free_bytes": st.f_bavail * st.f_frsize,
                        "size_gib": round(st.f_blocks * st.f_frsize / float(GIB), 2)}
    else:
        facts["shm"] = {"path": shm_path, "size_bytes": None, "free_bytes": None, "size_gib": None}
    facts["disk"] = dict((label, fs_space(path)) for label, path in (paths or {}).items() if path)
    mem = parse_meminfo(_read(os.path.join(proc_root, "meminfo")))
    facts["memory"] = {"mem_total_bytes": mem.get("MemTotal"), "mem_available_bytes": mem.get("MemAvailable"),
                       "mem_available_mib": mem["MemAvailable"] // (1024 * 1024) if "MemAvailable" in mem else None}
    facts["cpus"] = usable_cpus()
    facts["proxy"] = proxy_settings(environ if environ is not None else os.environ,
                                    _read(os.path.join(etc_root, "environment")))
    facts["glibc"] = glibc_version()
    release = platform.release()
    facts["kernel"] = {"release": release, "machine": platform.machine(),
                       "headers_present": os.path.isdir(os.path.join(modules_root, release, "build"))}
    facts["paths"] = {}
    for label, path in (stat_paths or {}).items():
        if path:
            facts["paths"][label] = {"path": path, "exists": os.path.exists(path), "is_dir": os.path.isdir(path)}
    return facts
