# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""GPU health: NVRM Xid lines from the kernel log plus ``nvidia-smi`` state -> a verdict per GPU and per host.

Pure Python (stdlib only), importable without Ansible. ``blackwell.sglang.gpu_health`` wraps :func:`assess`;
``roles/sglang_monitoring`` installs this file (with ``_gpu.py``) on the host for its nvidia-smi textfile
collector, and ``tests/gpu/record_gpu_health.sh`` runs it directly on a GPU machine.

Every external command goes through :func:`run_bounded`: a command that does not answer within its timeout is
killed and reported as ``timed_out`` -- a hanging ``nvidia-smi`` is a finding (the driver is wedged, field report
N03), never a hang of the caller.

Sources of the formats and the remedies:
- Kernel log lines as the NVIDIA driver prints them (``nvidia/src/kernel/.../nv.c`` ``nvErrorLog``):
  ``NVRM: Xid (PCI:0000:41:00): 79, pid=..., name=..., GPU has fallen off the bus.``; older drivers print
  ``NVRM: Xid (0000:41:00): 79, ...`` (no ``PCI:``). Recorded examples: field-reports-2.md F-N03
  (open-gpu-kernel-modules#1111 Xid 119, #1159 Xid 8, #1200 Xid 154).
- The meaning and the operator action per Xid: NVIDIA's "XID Errors" catalog (docs.nvidia.com/deploy/xid-errors)
  and its GPU memory error management guide (ECC, page retirement, row remapping); N03: on RTX (Blackwell
  workstation) cards there is no GPU-reset recovery path for the GSP errors, only a reboot helps.
- ``nvidia-smi --query-gpu`` field names: ``nvidia-smi --help-query-gpu`` (driver 580). A field the installed
  nvidia-smi does not know makes the whole query fail with ``Field "..." is not a valid field to query.`` (exit 2,
  B17): :func:`query_state` drops that field and asks again, and reports it as unsupported.
- ``clocks_event_reasons.active`` bit mask: NVML ``nvmlClocksEventReason*`` constants (nvml.h):
  0x1 GpuIdle, 0x2 ApplicationsClocksSetting, 0x4 SwPowerCap, 0x8 HwSlowdown, 0x10 SyncBoost,
  0x20 SwThermalSlowdown, 0x40 HwThermalSlowdown, 0x80 HwPowerBrakeSlowdown, 0x100 DisplayClockSetting.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import signal
import subprocess

from ._gpu import classify_nvidia_smi_failure, is_unavailable, normalize_bus_id

# ---------------------------------------------------------------------------------------------------------------
# Xid catalogue: xid -> (severity, kind suffix, summary, remedy). severity "fail" makes the GPU unhealthy.
REBOOT = "reboot or power-cycle the host (a GPU reset does not recover RTX / Blackwell workstation cards, N03); " \
         "drain it first; not a software configuration problem. If it recurs: another driver branch or a lower " \
         "power cap (suggestions from the reports, not fixes)"
DRAIN_REPLACE = "drain the host and replace the GPU (RMA) if it recurs; reboot to retire / remap the failing memory"
XID_TABLE = {
    8: ("fail", "wedged", "GPU stopped processing (RC watchdog: the GPU is probably locked)", REBOOT),
    13: ("warn", "app_error", "graphics engine exception (usually an application or kernel bug)",
         "check the service log; restart the service if it died; a GPU fault only when it repeats on other software"),
    31: ("warn", "app_error", "GPU memory page fault (an application accessed an invalid address)",
         "check the service log for an illegal memory access (spec decode, N06); not a hardware fault by itself"),
    43: ("warn", "app_error", "GPU stopped processing a channel (the application was stopped)",
         "check the service log; restart the service"),
    45: ("info", "preempted", "preemptive cleanup after an earlier error or a killed process", "none by itself"),
    48: ("fail", "ecc", "double-bit (uncorrectable) ECC error", DRAIN_REPLACE),
    61: ("fail", "wedged", "internal micro-controller breakpoint / warning", REBOOT),
    62: ("fail", "wedged", "internal micro-controller halt", REBOOT),
    63: ("warn", "ecc", "ECC page retirement or row remapping recorded", "drain and reboot (or reset the GPU) so the "
         "retirement / remap takes effect; replace the GPU if it keeps happening"),
    64: ("fail", "ecc", "ECC page retirement or row remapper failure", DRAIN_REPLACE),
    74: ("fail", "nvlink", "NVLink error", "drain; check the NVLink bridge / cabling; reboot; replace if it recurs"),
    79: ("fail", "wedged", "GPU has fallen off the bus", REBOOT + "; check PCIe seating, power cables and the "
         "slot's link if it recurs"),
    92: ("warn", "ecc", "high single-bit ECC error rate", "watch the ECC counters; drain and replace if it grows"),
    94: ("warn", "ecc", "contained ECC error (the affected application was stopped)",
         "restart the service; drain and reset the GPU when convenient"),
    95: ("fail", "ecc", "uncontained ECC error", "drain and reboot; " + DRAIN_REPLACE),
    109: ("warn", "app_error", "context switch timeout", "check the service log; reboot if it repeats"),
    119: ("fail", "wedged", "GSP RPC timeout", REBOOT),
    120: ("fail", "wedged", "GSP error", REBOOT),
    140: ("fail", "ecc", "unrecovered ECC error", DRAIN_REPLACE),
    154: ("fail", "wedged", "GPU recovery action changed (GPU reset or node reboot required)", REBOOT),
}
# Xids after which a failing nvidia-smi means a wedged GPU, not a missing driver (F-N03).
WEDGE_XIDS = (8, 61, 62, 79, 119, 120, 154)

_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\): "
    r"(?P<xid>\d+),\s*(?P<rest>.*)$")
_PID_RE = re.compile(r"pid=(?P<pid>'?[^,']*'?)")
_NAME_RE = re.compile(r"name=(?P<name>[^,]*)")
_RECOVERY_RE = re.compile(r"recovery action changed from \S+ \(([^)]*)\) to \S+ \(([^)]*)\)")
_FELL_OFF_RE = re.compile(r"NVRM: GPU (?:at PCI:)?(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
                          r"\S*: GPU has fallen off the bus")
_RMINIT_RE = re.compile(r"NVRM: .*RmInitAdapter failed! \((?P<code>[0-9a-fA-Fx:]+)\)")
# Timestamps at the start of a line: journalctl -o short-iso (2026-11-30T22:14:03+0000), dmesg --time-format iso
# (2026-11-30T22:14:03,123456+00:00), syslog (Nov 30 22:14:03 host kernel: ...) has no year and is not parsed.
_ISO_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[,.](\d+))?([+-]\d\d:?\d\d|Z)?\s")

# ---------------------------------------------------------------------------------------------------------------
# nvidia-smi state query: (field, key, kind). Order = CSV column order.
STATE_FIELDS = (
    ("index", "index", "int"),
    ("pci.bus_id", "pci_bus_id", "busid"),
    ("uuid", "uuid", "str"),
    ("name", "name", "str"),
    ("driver_version", "driver_version", "str"),
    ("vbios_version", "vbios_version", "str"),
    ("persistence_mode", "persistence_mode", "str"),
    ("pstate", "pstate", "str"),
    ("temperature.gpu", "temperature_c", "float"),
    ("power.draw", "power_draw_w", "float"),
    ("power.limit", "power_limit_w", "float"),
    ("clocks.sm", "clocks_sm_mhz", "float"),
    ("clocks.mem", "clocks_mem_mhz", "float"),
    ("clocks.applications.graphics", "clocks_app_sm_mhz", "float"),
    ("clocks.applications.memory", "clocks_app_mem_mhz", "float"),
    ("utilization.gpu", "utilization_gpu_pct", "float"),
    ("utilization.memory", "utilization_mem_pct", "float"),
    ("memory.used", "memory_used_mib", "float"),
    ("memory.total", "memory_total_mib", "float"),
    ("ecc.mode.current", "ecc_mode", "str"),
    ("ecc.errors.corrected.volatile.total", "ecc_corrected_volatile", "int"),
    ("ecc.errors.uncorrected.volatile.total", "ecc_uncorrected_volatile", "int"),
    ("ecc.errors.corrected.aggregate.total", "ecc_corrected_aggregate", "int"),
    ("ecc.errors.uncorrected.aggregate.total", "ecc_uncorrected_aggregate", "int"),
    ("retired_pages.single_bit_ecc.count", "retired_pages_sbe", "int"),
    ("retired_pages.double_bit.count", "retired_pages_dbe", "int"),
    ("retired_pages.pending", "retired_pages_pending", "yesno"),
    ("remapped_rows.correctable", "remapped_rows_correctable", "int"),
    ("remapped_rows.uncorrectable", "remapped_rows_uncorrectable", "int"),
    ("remapped_rows.pending", "remapped_rows_pending", "yesno"),
    ("remapped_rows.failure", "remapped_rows_failure", "yesno"),
    ("clocks_event_reasons.active", "clocks_event_reasons", "hex"),
)
# Telemetry every working GPU reports; [N/A] in all of them is the N03 "telemetry goes to N/A" symptom.
CORE_TELEMETRY = ("temperature_c", "memory_used_mib", "utilization_gpu_pct")

CLOCK_EVENT_BITS = (
    (0x1, "gpu_idle", "info"),
    (0x2, "applications_clocks_setting", "info"),
    (0x4, "sw_power_cap", "info"),
    (0x8, "hw_slowdown", "warn"),
    (0x10, "sync_boost", "info"),
    (0x20, "sw_thermal_slowdown", "warn"),
    (0x40, "hw_thermal_slowdown", "warn"),
    (0x80, "hw_power_brake_slowdown", "warn"),
    (0x100, "display_clock_setting", "info"),
)

SEVERITY_ORDER = {"info": 0, "warn": 1, "fail": 2}
STATUS_BY_SEVERITY = {None: "healthy", "info": "healthy", "warn": "degraded", "fail": "unhealthy"}

# NVIDIA's memory error guide: a GPU with this many retired pages is due for replacement (60 on page-retirement
# GPUs up to Volta); row-remapping GPUs report remapped_rows.failure instead. Overridable (gpu_health option).
DEFAULT_RETIRED_PAGES_MAX = 60


class CommandResult(object):
    """Outcome of :func:`run_bounded`: ``rc`` (None when not run), ``stdout``, ``stderr``, ``timed_out``, ``error``."""

    def __init__(self, argv, rc=None, stdout="", stderr="", timed_out=False, error=None, timeout=None):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout or ""
        self.stderr = stderr or ""
        self.timed_out = timed_out
        self.error = error
        self.timeout = timeout

    def as_dict(self):
        return {"argv": self.argv, "rc": self.rc, "timed_out": self.timed_out, "error": self.error,
                "timeout_s": self.timeout}


def run_bounded(argv, timeout, env=None):
    """Run ``argv`` (no shell) for at most ``timeout`` seconds.

    The child runs in its own session; on timeout the whole process group gets SIGKILL and we wait at most 5 s
    more for it to go: a process stuck in the kernel (an nvidia-smi on a wedged GPU sits in D state) cannot be
    reaped, and is then left behind rather than blocking the caller.

    :returns: :class:`CommandResult`; ``timed_out`` True after a timeout, ``error`` set when it could not start.
    """
    child_env = dict(os.environ, LC_ALL="C")
    child_env.update(env or {})
    try:
        # logs and tool output: bytes that are not UTF-8 (a driver message, a process name) are replaced, never
        # fatal, so that a verdict still comes out
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env,
                                start_new_session=True, universal_newlines=True, encoding="utf-8", errors="replace")
    except OSError as exc:
        return CommandResult(argv, error="cannot run %s: %s" % (argv[0], exc), timeout=timeout)
    try:
        out, err = proc.communicate(timeout=timeout)
        return CommandResult(argv, rc=proc.returncode, stdout=out, stderr=err, timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = "", ""
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        return CommandResult(argv, stdout=out, stderr=err, timed_out=True, timeout=timeout,
                             error="%s did not answer within %ss (killed)" % (os.path.basename(argv[0]), timeout))


# ---------------------------------------------------------------------------------------------------------------
# Kernel log


def parse_since(value, now=None):
    """``since`` -> aware UTC datetime or None (= the whole current boot).

    Accepts ``""``/``boot`` (None), an epoch number (``1764540000`` or ``@1764540000``), ISO 8601
    (``2026-11-30T22:00:00Z``, ``2026-11-30 22:00:00+01:00``; naive = UTC) or a relative ``-2h`` / ``-30m`` /
    ``-1d`` (before ``now``). :raises ValueError: anything else.
    """
    if value is None:
        return None
    text = str(value).strip()
    if text in ("", "boot"):
        return None
    now = now or datetime.datetime.now(datetime.timezone.utc)
    try:
        rel = re.match(r"^-(\d+(?:\.\d+)?)\s*([smhd])$", text)
        if rel:
            mult = {"s": 1, "m": 60, "h": 3600, "d": 86400}[rel.group(2)]
            return now - datetime.timedelta(seconds=float(rel.group(1)) * mult)
        epoch = re.match(r"^@?(\d+(?:\.\d+)?)$", text)
        if epoch:
            return datetime.datetime.fromtimestamp(float(epoch.group(1)), datetime.timezone.utc)
    except (OverflowError, OSError, ValueError) as exc:
        # -99999999999d, @1e20: a time before year 1 or after 9999 (or past the platform's time_t)
        raise ValueError("since %r is out of range (%s)" % (value, exc)) from None
    iso = text.replace("Z", "+00:00").replace(" ", "T", 1)
    iso = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", iso)
    try:
        parsed = datetime.datetime.fromisoformat(iso)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.timezone.utc)
        return parsed.astimezone(datetime.timezone.utc)
    except (ValueError, OverflowError) as exc:
        raise ValueError("since %r is not an epoch, ISO 8601 time, -<n>[smhd] or 'boot'" % value) from exc


def _line_time(line):
    match = _ISO_RE.match(line)
    if not match:
        return None
    tz = match.group(3) or "+00:00"
    if tz == "Z":
        tz = "+00:00"
    elif ":" not in tz:
        tz = tz[:3] + ":" + tz[3:]
    try:
        return datetime.datetime.fromisoformat(match.group(1) + tz).astimezone(datetime.timezone.utc)
    except (ValueError, OverflowError):    # 9999-12-31T23:59:59-23:59 is past year 9999 in UTC
        return None


def _xid_bus(bus):
    """``0000:41:00`` (Xid line, no function) -> ``0000:41:00.0`` as :func:`normalize_bus_id` writes nvidia-smi's."""
    text = bus.lower()
    if not re.search(r"\.[0-7]$", text):
        text += ".0"
    return normalize_bus_id(text)


def parse_kernel_log(text, since=None):
    """Find NVRM events in kernel-log text (journalctl -k, dmesg, or a file).

    :param since: aware datetime; lines with a parseable timestamp before it are ignored, lines without one are
        kept (the caller already bounded the source, e.g. ``journalctl --since``).
    :returns: dict ``{xids: [{xid, bus_id, pid, process, message, time, line, severity, kind, summary, remedy,
        recovery_action}], fell_off_bus: [bus_id...], rminit_failed: [{code, line}], lines_read: int}``.
    """
    xids = []
    fell_off = []
    rminit = []
    count = 0
    for line in (text or "").splitlines():
        count += 1
        if "NVRM" not in line:
            continue
        when = _line_time(line)
        if since is not None and when is not None and when < since:
            continue
        match = _XID_RE.search(line)
        if match:
            xid = int(match.group("xid"))
            rest = match.group("rest").strip()
            pid = _PID_RE.search(rest)
            name = _NAME_RE.search(rest)
            message = rest
            if pid or name:
                # "pid=48694, name=python3, channel 0x00000008" -> "channel 0x00000008"
                message = re.sub(r"^(?:pid=[^,]*,\s*)?(?:name=[^,]*,\s*)?", "", rest)
            severity, kind, summary, remedy = XID_TABLE.get(
                xid, ("warn", "unknown", "Xid %d (not in the collection's table)" % xid,
                      "look it up in NVIDIA's XID catalog; drain the host if it repeats"))
            recovery = _RECOVERY_RE.search(rest)
            xids.append({
                "xid": xid,
                "bus_id": _xid_bus(match.group("bus")),
                "pid": pid.group("pid").strip("'") if pid else None,
                "process": name.group("name").strip() if name else None,
                "message": message,
                "time": when.isoformat() if when else None,
                "line": line.strip(),
                "severity": severity,
                "kind": "gpu_%s_xid_%d" % (kind, xid),
                "summary": summary,
                "remedy": remedy,
                "recovery_action": recovery.group(2) if recovery else None,
            })
            continue
        match = _FELL_OFF_RE.search(line)
        if match:
            bus = _xid_bus(match.group("bus"))
            if bus not in fell_off:
                fell_off.append(bus)
            continue
        match = _RMINIT_RE.search(line)
        if match:
            rminit.append({"code": match.group("code"), "line": line.strip()})
    for event in xids:
        if event["xid"] == 79 and event["bus_id"] not in fell_off:
            fell_off.append(event["bus_id"])
    return {"xids": xids, "fell_off_bus": fell_off, "rminit_failed": rminit, "lines_read": count}


def kernel_log_argv(source, since, journalctl="journalctl", dmesg="dmesg"):
    """The command that reads the kernel log of the current boot (a reboot clears a wedge, so older boots are not
    read): ``journalctl -k -b 0 -o short-iso`` (``--since @<epoch>`` when given) or ``dmesg --time-format iso``."""
    if source == "journal":
        argv = [journalctl, "-k", "-b", "0", "-o", "short-iso", "--no-pager", "-q"]
        if since is not None:
            argv += ["--since", "@%d" % int(since.timestamp())]
        return argv
    if source == "dmesg":
        return [dmesg, "--kernel", "--time-format", "iso"]
    raise ValueError("kernel log source %r has no command" % source)


def read_kernel_log(source, since, timeout, path=None, journalctl=None, dmesg=None, run=run_bounded):
    """Read the kernel log from ``source`` (``journal``, ``dmesg``, ``file`` or ``auto``: journal, else dmesg).

    :returns: ``(text or None, info)`` with info ``{source, argv, rc, timed_out, error, path}``.
    """
    info = {"source": source, "path": path, "argv": None, "rc": None, "timed_out": False, "error": None}
    if source == "none":
        return None, info
    if source == "file":
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:   # a log: replaced, never fatal
                return handle.read(), info
        except (IOError, OSError, TypeError) as exc:
            info["error"] = "cannot read kernel log file %s: %s" % (path, exc)
            return None, info
    order = ["journal", "dmesg"] if source == "auto" else [source]
    tools = {"journal": journalctl, "dmesg": dmesg}
    errors = []
    for src in order:
        if not tools[src]:
            errors.append("%s not found" % ("journalctl" if src == "journal" else "dmesg"))
            continue
        res = run(kernel_log_argv(src, since, journalctl=journalctl or "journalctl", dmesg=dmesg or "dmesg"), timeout)
        info.update(source=src, argv=res.argv, rc=res.rc, timed_out=res.timed_out)
        if res.timed_out:
            errors.append(res.error)
            continue
        if res.error or res.rc != 0:
            errors.append(res.error or "%s rc=%s: %s" % (src, res.rc, (res.stderr or res.stdout).strip()[:200]))
            continue
        info["error"] = None
        return res.stdout, info
    info["error"] = "; ".join(errors) or "no kernel log source"
    return None, info


# ---------------------------------------------------------------------------------------------------------------
# nvidia-smi


def _convert(kind, raw):
    if is_unavailable(raw):
        return None
    raw = raw.strip()
    try:
        if kind == "int":
            return int(float(raw))
        if kind == "float":
            value = float(raw)
            return value if math.isfinite(value) else None
        if kind == "hex":
            return int(raw, 16)
    except (ValueError, OverflowError):    # "inf", "1e400": no reading
        return None
    if kind == "busid":
        return normalize_bus_id(raw)
    if kind == "yesno":
        low = raw.lower()
        return True if low in ("yes", "true", "1") else False if low in ("no", "false", "0") else None
    return raw


def parse_state_csv(text, fields):
    """``--query-gpu`` CSV (noheader, nounits) for ``fields`` (a sub-sequence of :data:`STATE_FIELDS`) -> GPU dicts.

    Raw cells are kept in ``raw`` so that ``[N/A]`` can be told from a missing column. A comma inside the GPU name
    (the only free text) is kept by splitting around it.
    """
    keys = [f[1] for f in fields]
    kinds = [f[2] for f in fields]
    name_pos = keys.index("name") if "name" in keys else None
    gpus = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(keys):
            raise ValueError("nvidia-smi line has %d columns, expected %d: %r" % (len(cells), len(keys), line))
        extra = len(cells) - len(keys)
        if extra and name_pos is not None:
            cells = cells[:name_pos] + [", ".join(cells[name_pos:name_pos + extra + 1])] + cells[name_pos + extra + 1:]
        gpu = dict((k, _convert(t, c)) for k, t, c in zip(keys, kinds, cells))
        gpu["raw"] = dict(zip(keys, cells))
        gpus.append(gpu)
    return gpus


def state_query_argv(nvidia_smi, fields):
    return [nvidia_smi, "--query-gpu=" + ",".join(f[0] for f in fields), "--format=csv,noheader,nounits"]


def query_state(nvidia_smi, timeout, run=run_bounded, fields=STATE_FIELDS, max_retries=8):
    """Ask nvidia-smi for the state fields; fields it does not know are dropped (and listed) and the query repeated.

    :returns: dict ``{ok, gpus, unsupported_fields, result (CommandResult.as_dict()), failure (classify dict or
        None), stdout, stderr}``; ``ok`` False when nvidia-smi failed, timed out or could not start.
    """
    fields = list(fields)
    unsupported = []
    res = None
    for _attempt in range(max_retries + 1):
        res = run(state_query_argv(nvidia_smi, fields), timeout)
        text = "%s\n%s" % (res.stdout, res.stderr)
        bad = re.search(r'Field "([^"]+)" is not a valid field to query', text)
        if res.rc not in (None, 0) and bad and any(f[0] == bad.group(1) for f in fields) \
                and bad.group(1) not in ("index", "pci.bus_id", "name"):
            unsupported.append(bad.group(1))
            fields = [f for f in fields if f[0] != bad.group(1)]
            continue
        break
    out = {"ok": False, "gpus": [], "unsupported_fields": unsupported, "result": res.as_dict(), "failure": None,
           "stdout": res.stdout, "stderr": res.stderr, "fields": [f[0] for f in fields]}
    if res.timed_out or res.error:
        return out
    if res.rc != 0:
        out["failure"] = classify_nvidia_smi_failure(res.rc, res.stdout, res.stderr)
        return out
    try:
        out["gpus"] = parse_state_csv(res.stdout, fields)
    except ValueError as exc:
        out["failure"] = {"kind": "unparsable", "message": "nvidia-smi output not understood: %s" % exc,
                          "reboot_required": False, "no_gpu": False}
        return out
    if not out["gpus"]:
        # rc 0 with no lines: treat like "No devices were found"
        failure = classify_nvidia_smi_failure(0, res.stdout, res.stderr)
        out["failure"] = failure
        if failure["kind"] == "unknown":
            out["failure"] = {"kind": "no_devices", "no_gpu": True, "reboot_required": False,
                              "message": "nvidia-smi lists no GPUs"}
        return out
    out["ok"] = True
    return out


def clock_event_reasons(mask):
    """Bit mask -> list of ``(name, severity)`` for the active reasons (see :data:`CLOCK_EVENT_BITS`)."""
    if mask is None:
        return []
    return [(name, sev) for bit, name, sev in CLOCK_EVENT_BITS if mask & bit]


# ---------------------------------------------------------------------------------------------------------------
# Verdicts


def _finding(kind, severity, message, remedy, **extra):
    item = {"kind": kind, "severity": severity, "message": message, "remedy": remedy}
    item.update(extra)
    return item


def gpu_findings(gpu, retired_pages_max=DEFAULT_RETIRED_PAGES_MAX):
    """Findings from one GPU's nvidia-smi state (see :data:`STATE_FIELDS` for the keys)."""
    found = []
    raw = gpu.get("raw", {})
    core = [k for k in CORE_TELEMETRY if k in raw]
    if core and all(gpu.get(k) is None for k in core):
        found.append(_finding("telemetry_unavailable", "fail",
                              "nvidia-smi answers but reports [N/A] for %s (the N03 wedge symptom)" % ", ".join(core),
                              REBOOT))
    if gpu.get("persistence_mode") and gpu["persistence_mode"].lower() == "disabled":
        found.append(_finding("persistence_off", "warn", "persistence mode is off",
                              "enable nvidia-persistenced (roles/sglang_monitoring GPU policy) so the driver stays "
                              "initialised between clients"))
    uv = gpu.get("ecc_uncorrected_volatile")
    if uv:
        found.append(_finding("ecc_uncorrected", "fail", "%d uncorrectable ECC error(s) since the last driver load" % uv,
                              DRAIN_REPLACE, count=uv))
    ua = gpu.get("ecc_uncorrected_aggregate")
    if ua and not uv:
        found.append(_finding("ecc_uncorrected_history", "warn",
                              "%d uncorrectable ECC error(s) over the GPU's lifetime" % ua,
                              "watch it; drain and replace if the count grows", count=ua))
    cv = gpu.get("ecc_corrected_volatile")
    if cv:
        found.append(_finding("ecc_corrected", "info", "%d corrected ECC error(s) since the last driver load" % cv,
                              "none (corrected); watch the rate", count=cv))
    if gpu.get("retired_pages_pending"):
        found.append(_finding("retired_pages_pending", "warn", "a page retirement is pending",
                              "drain and reboot so the retirement takes effect"))
    retired = (gpu.get("retired_pages_sbe") or 0) + (gpu.get("retired_pages_dbe") or 0)
    if retired >= retired_pages_max:
        found.append(_finding("retired_pages_limit", "fail", "%d retired pages (limit %d)" % (retired, retired_pages_max),
                              DRAIN_REPLACE, count=retired))
    if gpu.get("remapped_rows_failure"):
        found.append(_finding("row_remap_failure", "fail", "row remapping failed (no spare rows left)", DRAIN_REPLACE))
    if gpu.get("remapped_rows_pending"):
        found.append(_finding("row_remap_pending", "warn", "a row remap is pending",
                              "drain and reset the GPU (or reboot) so the remap takes effect"))
    ur = gpu.get("remapped_rows_uncorrectable")
    if ur:
        found.append(_finding("rows_remapped_uncorrectable", "info", "%d row(s) remapped after uncorrectable errors" % ur,
                              "none while remapping succeeds; replace when row_remap_failure appears", count=ur))
    for name, sev in clock_event_reasons(gpu.get("clocks_event_reasons")):
        if sev == "info":
            continue
        found.append(_finding("clocks_" + name, sev, "clocks are reduced: %s" % name.replace("_", " "),
                              "check cooling, power cables and the PSU; lower the power limit if it persists"))
    return found


def _worst(findings):
    worst = None
    for item in findings:
        if worst is None or SEVERITY_ORDER[item["severity"]] > SEVERITY_ORDER[worst]:
            worst = item["severity"]
    return worst


def assess(kernel_log, smi, expected_gpu_count=None, retired_pages_max=DEFAULT_RETIRED_PAGES_MAX,
           kernel_log_info=None):
    """Combine kernel-log events and nvidia-smi state into the verdict.

    :param kernel_log: :func:`parse_kernel_log` result, or None when the log could not be read.
    :param smi: :func:`query_state` result, or None when there is no nvidia-smi on the host.
    :param expected_gpu_count: GPUs the inventory expects (None: do not check).
    :returns: dict ``{status: healthy|degraded|unhealthy, reboot_required, drain, gpu_count, expected_gpu_count,
        gpus: [{index, bus_id, name, uuid, status, findings}], host_findings, xids, remedy, summary}``.
        ``remedy`` is the remedy of the most severe finding ("" when healthy).
    """
    kernel_log = kernel_log or {"xids": [], "fell_off_bus": [], "rminit_failed": []}
    xids = kernel_log.get("xids", [])
    host = []
    gpus = []
    by_bus = {}
    if smi is not None:
        for gpu in smi.get("gpus", []):
            entry = {"index": gpu.get("index"), "bus_id": gpu.get("pci_bus_id"), "name": gpu.get("name"),
                     "uuid": gpu.get("uuid"), "findings": gpu_findings(gpu, retired_pages_max),
                     "state": dict((k, v) for k, v in gpu.items() if k != "raw")}
            gpus.append(entry)
            if entry["bus_id"]:
                by_bus[entry["bus_id"]] = entry
    wedge_seen = [x for x in xids if x["xid"] in WEDGE_XIDS]
    for event in xids:
        finding = _finding(event["kind"], event["severity"],
                           "Xid %d on %s: %s%s" % (event["xid"], event["bus_id"], event["summary"],
                                                   (" (%s)" % event["recovery_action"]) if event["recovery_action"] else ""),
                           event["remedy"], xid=event["xid"], bus_id=event["bus_id"], line=event["line"],
                           time=event["time"])
        target = by_bus.get(event["bus_id"])
        if target is not None:
            target["findings"].append(finding)
        else:
            host.append(finding)
    for bus in kernel_log.get("fell_off_bus", []):
        if not any(x["xid"] == 79 and x["bus_id"] == bus for x in xids):
            item = _finding("gpu_fell_off_bus", "fail", "GPU %s has fallen off the bus" % bus, XID_TABLE[79][3], bus_id=bus)
            (by_bus[bus]["findings"] if bus in by_bus else host).append(item)
    for item in kernel_log.get("rminit_failed", []):
        remedy = "check the kernel module (Blackwell needs the open kernel modules) and the BIOS"
        if item["code"] == "0x22:0x56:884":
            remedy = "enable Above 4G Decoding and Resizable BAR in the BIOS (N20)"
        host.append(_finding("rminit_adapter_failed", "fail", "RmInitAdapter failed! (%s)" % item["code"], remedy,
                             line=item["line"]))
    if smi is not None and not smi.get("ok"):
        res = smi.get("result") or {}
        failure = smi.get("failure") or {}
        if res.get("timed_out"):
            host.append(_finding("nvidia_smi_hang", "fail", "nvidia-smi did not answer within %ss: the driver or a GPU "
                                 "is wedged" % res.get("timeout_s"), REBOOT))
        elif res.get("error"):
            host.append(_finding("nvidia_smi_unusable", "fail", res["error"], "reinstall the NVIDIA driver utilities"))
        elif wedge_seen and failure.get("kind") in ("driver_not_loaded", "unknown", "no_devices"):
            host.append(_finding("gpu_wedged", "fail",
                                 "nvidia-smi fails (%s) after Xid %s: a wedged GPU, not a missing driver"
                                 % (failure.get("message"), ", ".join(sorted(set(str(x["xid"]) for x in wedge_seen)))),
                                 REBOOT))
        elif failure.get("kind") == "no_devices" and not expected_gpu_count:
            pass  # a host without GPUs that nobody expects to have any
        elif failure:
            host.append(_finding("nvidia_smi_" + failure["kind"], "fail", failure["message"],
                                 "reboot (pending driver upgrade)" if failure.get("reboot_required")
                                 else "check the NVIDIA driver installation ('dkms status', 'modprobe nvidia')"))
    if smi is None and expected_gpu_count:
        host.append(_finding("nvidia_smi_missing", "fail", "no nvidia-smi on the host but %d GPU(s) expected"
                             % expected_gpu_count, "install the NVIDIA driver (open kernel modules for Blackwell)"))
    count = len(gpus)
    if expected_gpu_count is not None and count < expected_gpu_count and (smi is not None and smi.get("ok")):
        gone = [b for b in kernel_log.get("fell_off_bus", []) if b not in by_bus]
        host.append(_finding("gpus_missing", "fail", "%d of %d expected GPU(s) visible%s" % (
            count, expected_gpu_count, ("; gone: " + ", ".join(gone)) if gone else ""),
            REBOOT if gone or wedge_seen else "reseat / check the missing GPU(s) and the BIOS (Above 4G, ReBAR); "
            "reboot", missing=expected_gpu_count - count, bus_ids=gone))
    for entry in gpus:
        entry["status"] = STATUS_BY_SEVERITY[_worst(entry["findings"])]
    everything = host + [f for g in gpus for f in g["findings"]]
    worst = _worst(everything)
    status = STATUS_BY_SEVERITY[worst]
    ranked = sorted(everything, key=lambda f: -SEVERITY_ORDER[f["severity"]])
    reboot = any(f["remedy"] == REBOOT or f["remedy"].startswith(REBOOT) for f in everything if f["severity"] == "fail")
    drain = status == "unhealthy"
    problems = [f for f in ranked if f["severity"] != "info"]
    summary = "healthy: %d GPU(s)%s" % (count, (", %d expected" % expected_gpu_count) if expected_gpu_count is not None
                                        else "")
    if smi is None:
        summary = "healthy: no nvidia-smi (no NVIDIA driver) on this host"
    elif not smi.get("ok") and not problems:
        summary = "healthy: %s" % ((smi.get("failure") or {}).get("message") or "nvidia-smi lists no GPUs")
    if problems:
        summary = "%s: %s" % (status, "; ".join(f["message"] for f in problems[:3]))
    report = ["GPU %s %s %s: %s%s" % (g["index"], g["bus_id"], g["name"], g["status"],
                                      (" (%s)" % ", ".join(f["kind"] for f in g["findings"])) if g["findings"] else "")
              for g in gpus]
    report += ["host: %s %s: %s" % (f["severity"], f["kind"], f["message"]) for f in host]
    if problems:
        report.append("remedy: " + problems[0]["remedy"])
    return {
        "status": status,
        "healthy": status == "healthy",
        "report": report,
        "reboot_required": reboot,
        "drain": drain,
        "gpu_count": count,
        "expected_gpu_count": expected_gpu_count,
        "gpus": gpus,
        "host_findings": host,
        "xids": xids,
        "xid_counts": dict((str(k), sum(1 for x in xids if x["xid"] == k)) for k in sorted(set(x["xid"] for x in xids))),
        "remedy": problems[0]["remedy"] if problems else "",
        "summary": summary,
        "kernel_log": kernel_log_info,
        "nvidia_smi": None if smi is None else {
            "ok": smi.get("ok"), "result": smi.get("result"), "failure": smi.get("failure"),
            "unsupported_fields": smi.get("unsupported_fields", [])},
    }


def collect(nvidia_smi, kernel_log_source="auto", since=None, expected_gpu_count=None, timeout=20,
            kernel_log_path=None, journalctl=None, dmesg=None, retired_pages_max=DEFAULT_RETIRED_PAGES_MAX,
            run=run_bounded):
    """Read the kernel log and nvidia-smi (each bounded by ``timeout`` seconds) and :func:`assess` them.

    :param nvidia_smi: path or None (no nvidia-smi on the host).
    :param since: value for :func:`parse_since`. :raises ValueError: on a bad ``since``.
    """
    when = parse_since(since)
    text, info = read_kernel_log(kernel_log_source, when, timeout, path=kernel_log_path, journalctl=journalctl,
                                 dmesg=dmesg, run=run)
    info["since"] = when.isoformat() if when else "boot"
    log = parse_kernel_log(text, since=when) if text is not None else None
    if log is not None:
        info["lines_read"] = log["lines_read"]
    smi = query_state(nvidia_smi, timeout, run=run) if nvidia_smi else None
    verdict = assess(log, smi, expected_gpu_count=expected_gpu_count, retired_pages_max=retired_pages_max,
                     kernel_log_info=info)
    if log is None and kernel_log_source != "none":
        verdict["host_findings"].append(_finding("kernel_log_unreadable", "info", info.get("error") or "no kernel log",
                                                 "run as root (journalctl -k needs the journal; dmesg may be "
                                                 "restricted by kernel.dmesg_restrict)"))
    return verdict, smi


def policy_plan(gpus, models):
    """What the GPU policy changes, per GPU: the first ``models`` entry whose ``model`` (a regular expression)
    is found in the GPU's name applies.

    :param gpus: ``gpus`` of a gpu_health result (each with ``index``, ``name`` and ``state``).
    :param models: ``[{model, power_limit_w?, application_clocks?: {memory_mhz, graphics_mhz}}]``.
    :returns: list (one per GPU) of ``{index, name, model, persistence: bool (on now), power_limit_w (wanted or
        None), power_limit_now, set_power: bool, clocks (``"<memory>,<graphics>"`` or None), clocks_now,
        set_clocks: bool, changes: the nvidia-smi arguments that set them, ``[{args, label}]``}``. Power limits
        equal within 0.5 W (nvidia-smi prints two decimals).
    """
    plan = []
    for gpu in gpus or []:
        state = gpu.get("state") or {}
        name = gpu.get("name") or ""
        entry = next((m for m in models or [] if re.search(str(m.get("model", "")), name)), None) or {}
        want_pl = entry.get("power_limit_w")
        now_pl = state.get("power_limit_w")
        clocks = entry.get("application_clocks")
        want_ac = "%d,%d" % (int(clocks["memory_mhz"]), int(clocks["graphics_mhz"])) if clocks else None
        now_ac = None
        if state.get("clocks_app_mem_mhz") is not None and state.get("clocks_app_sm_mhz") is not None:
            now_ac = "%d,%d" % (int(state["clocks_app_mem_mhz"]), int(state["clocks_app_sm_mhz"]))
        pm = state.get("persistence_mode")
        set_power = want_pl is not None and (now_pl is None or abs(float(now_pl) - float(want_pl)) > 0.5)
        set_clocks = want_ac is not None and want_ac != now_ac
        where = "GPU %s %s: " % (gpu.get("index"), name)
        changes = []
        if set_power:
            changes.append({"args": ["-i", str(gpu.get("index")), "-pl", str(want_pl)],
                            "label": "%s%s W -> %s W" % (where, now_pl, want_pl)})
        if set_clocks:
            changes.append({"args": ["-i", str(gpu.get("index")), "-ac", want_ac],
                            "label": "%s%s -> %s" % (where, now_ac, want_ac)})
        plan.append({
            "index": gpu.get("index"),
            "name": name,
            "model": entry.get("model"),
            "persistence": bool(pm) and pm.lower() == "enabled",
            "power_limit_w": want_pl,
            "power_limit_now": now_pl,
            "set_power": set_power,
            "clocks": want_ac,
            "clocks_now": now_ac,
            "set_clocks": set_clocks,
            "changes": changes,
        })
    return plan


def table_row(res):
    """A gpu_health result as its row of the fleet table (playbooks/health.yml): ``[status, gpus (visible/expected),
    xids (this boot, ``79,119x3``; ``-`` for none), summary with the remedy]``."""
    expected = res.get("expected_gpu_count")
    gpus = "%s/%s" % (res.get("gpu_count"), expected) if expected is not None else str(res.get("gpu_count"))
    xids = ",".join("%s%s" % (k, ("x%d" % v) if v > 1 else "") for k, v in sorted(
        (res.get("xid_counts") or {}).items(), key=lambda kv: int(kv[0])))
    detail = res.get("summary", "")
    if res.get("remedy"):
        detail += " -> " + res["remedy"]
    return [str(res.get("status")), gpus, xids or "-", detail]
