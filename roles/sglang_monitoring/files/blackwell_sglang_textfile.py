#!/usr/bin/env python3
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Write blackwell.sglang metrics for the node exporter's textfile collector (Prometheus text format 0.0.4).

  blackwell_sglang_textfile.py facts --current /opt/sglang/current --out /var/lib/prometheus/node-exporter
      the collection's own facts from the live release's manifest.json (sglang_release, schema 1): release id,
      stack, SGLang commit, kernel build key, FP4 probe verdicts per backend, KV-cache dtype, model revision, and
      the manifest's modification time as the last converge that changed the host -> blackwell_sglang.prom
  blackwell_sglang_textfile.py gpu --lib /usr/local/lib/blackwell-sglang-monitoring --out ... [--expected N]
      per-GPU state from nvidia-smi --query-gpu and the Xid lines of this boot, through gpu_health's own code
      (plugins/module_utils/_gpu_health.py installed as blackwell_gpu/) -> blackwell_sglang_gpu.prom

Files are written to a temporary name in the same directory and renamed, so the exporter never reads half a file
(node exporter documentation, textfile collector). Stdlib only; run by the systemd units of roles/sglang_monitoring.
"""

import argparse
import json
import os
import sys
import tempfile
import time

HELP = {}


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics(object):
    """Collects samples grouped by metric name, in insertion order, with HELP and TYPE once per name."""

    def __init__(self):
        self.order = []
        self.meta = {}
        self.samples = {}

    def add(self, name, value, labels=None, help_text="", kind="gauge"):
        if value is None:
            return
        if name not in self.meta:
            self.order.append(name)
            self.meta[name] = (help_text or name, kind)
            self.samples[name] = []
        if isinstance(value, bool):
            value = 1 if value else 0
        lab = ""
        if labels:
            lab = "{" + ",".join('%s="%s"' % (k, _escape(v if v is not None else "")) for k, v in labels.items()) + "}"
        self.samples[name].append("%s%s %s" % (name, lab, repr(float(value)) if isinstance(value, float) else value))

    def text(self):
        out = []
        for name in self.order:
            help_text, kind = self.meta[name]
            out.append("# HELP %s %s" % (name, help_text))
            out.append("# TYPE %s %s" % (name, kind))
            out.extend(self.samples[name])
        return "\n".join(out) + "\n"


def write_atomic(directory, name, text):
    """Write ``directory/name`` through a temporary file and a rename; returns False (and writes nothing) when the
    file already has this content."""
    try:
        with open(os.path.join(directory, name)) as handle:
            if handle.read() == text:
                return False
    except (IOError, OSError):
        pass
    fd, tmp = tempfile.mkstemp(prefix="." + name + ".", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def _get(data, *path):
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def facts_metrics(current):
    """Metrics from ``<current>/manifest.json``; a missing or unreadable manifest gives manifest_present 0."""
    m = Metrics()
    path = os.path.join(current, "manifest.json")
    try:
        with open(path) as handle:
            manifest = json.load(handle)
        mtime = os.stat(path).st_mtime
    except (IOError, OSError, ValueError):
        manifest, mtime = None, None
    m.add("blackwell_sglang_manifest_present", manifest is not None, None,
          "1 when the live release has a readable manifest.json (sglang_release tasks_from: manifest)")
    if manifest is None:
        return m
    release_id = _get(manifest, "release", "id") or os.path.basename(os.path.realpath(current))
    key = _get(manifest, "release", "key") or {}
    info = {
        "release_id": release_id,
        "stack": _get(key, "extra", "stack") or "",
        "sglang_commit": _get(manifest, "sglang", "commit") or "",
        "sglang_version": _get(manifest, "sglang", "version") or "",
        "torch_version": _get(manifest, "torch", "version") or "",
        "cuda_version": key.get("cuda_version") or _get(manifest, "torch", "cuda") or "",
        "kernel_build_key": _get(manifest, "kernel", "build_key") or "",
        "kv_cache_dtype": _get(manifest, "service", "kv_cache_dtype") or "",
        "model": _get(manifest, "model", "path") or "",
        "model_revision": _get(manifest, "model", "revision") or "",
    }
    m.add("blackwell_sglang_release_info", 1, info, "the live release (labels from its manifest.json; value always 1)")
    m.add("blackwell_sglang_kv_cache_dtype_info", 1, {"kv_cache_dtype": info["kv_cache_dtype"]},
          "KV-cache dtype the service was rendered with (the KV-cache guard's choice)")
    rec = _get(manifest, "probe", "recommended") or {}
    m.add("blackwell_sglang_fp4_probe_recommended_info", 1,
          {"fp4_gemm_backend": rec.get("fp4_gemm_backend") or "", "moe_runner_backend": rec.get("moe_runner_backend") or "",
           "device": _get(manifest, "probe", "device") or ""},
          "FP4 backends the probe recommended for the live release")
    verdicts = _get(manifest, "probe", "verdicts") or {}
    for backend in sorted(verdicts):
        m.add("blackwell_sglang_fp4_probe_verdict", 1, {"backend": backend, "verdict": verdicts[backend] or "none"},
              "FP4 probe verdict per backend for the live release (value always 1)")
    for backend in sorted(verdicts):
        m.add("blackwell_sglang_fp4_probe_pass", verdicts[backend] == "pass", {"backend": backend},
              "1 when the FP4 probe passed this backend on the live release, else 0")
    m.add("blackwell_sglang_last_converge_timestamp_seconds", mtime, None,
          "modification time of the live release's manifest.json: the last converge that changed what the host runs")
    m.add("blackwell_sglang_release_rolled_back", os.path.exists(os.path.join(current, "ROLLED_BACK")), None,
          "1 when the live release carries the ROLLED_BACK marker of an automatic rollback")
    return m


GPU_GAUGES = (
    # (state key, metric, help, scale)
    ("utilization_gpu_pct", "blackwell_sglang_gpu_utilization_percent", "GPU utilisation (nvidia-smi utilization.gpu)", 1),
    ("utilization_mem_pct", "blackwell_sglang_gpu_memory_utilization_percent", "memory controller utilisation", 1),
    ("memory_used_mib", "blackwell_sglang_gpu_memory_used_bytes", "GPU memory used", 1048576),
    ("memory_total_mib", "blackwell_sglang_gpu_memory_total_bytes", "GPU memory total", 1048576),
    ("temperature_c", "blackwell_sglang_gpu_temperature_celsius", "GPU core temperature", 1),
    ("power_draw_w", "blackwell_sglang_gpu_power_draw_watts", "power draw", 1),
    ("power_limit_w", "blackwell_sglang_gpu_power_limit_watts", "enforced power limit", 1),
    ("clocks_sm_mhz", "blackwell_sglang_gpu_clock_sm_hertz", "SM clock", 1000000),
    ("clocks_mem_mhz", "blackwell_sglang_gpu_clock_memory_hertz", "memory clock", 1000000),
    ("clocks_event_reasons", "blackwell_sglang_gpu_clocks_event_reasons", "clocks event (throttle) reasons bit mask", 1),
    ("retired_pages_pending", "blackwell_sglang_gpu_retired_pages_pending", "1 when a page retirement is pending", 1),
    ("remapped_rows_pending", "blackwell_sglang_gpu_remapped_rows_pending", "1 when a row remap is pending", 1),
    ("remapped_rows_failure", "blackwell_sglang_gpu_remapped_rows_failure", "1 when row remapping failed", 1),
)
STATUS_CODE = {"healthy": 0, "degraded": 1, "unhealthy": 2}


def gpu_metrics(gh, nvidia_smi, expected, timeout, kernel_log=None):
    """Metrics from gpu_health's collect() (nvidia-smi state + the Xids of this boot; ``kernel_log``: read that
    file instead of the journal / dmesg)."""
    m = Metrics()
    start = time.time()
    verdict, smi = gh.collect(nvidia_smi, kernel_log_source="file" if kernel_log else "auto", kernel_log_path=kernel_log,
                              since="boot", expected_gpu_count=expected, timeout=timeout,
                              journalctl=_which("journalctl"), dmesg=_which("dmesg"))
    m.add("blackwell_sglang_gpu_nvidia_smi_up", bool(smi and smi.get("ok")), None,
          "1 when nvidia-smi answered within the timeout, 0 when it failed or hung")
    m.add("blackwell_sglang_gpus_visible", verdict["gpu_count"], None, "GPUs nvidia-smi lists")
    if expected is not None:
        m.add("blackwell_sglang_gpus_expected", expected, None, "GPUs the inventory expects")
    m.add("blackwell_sglang_gpu_host_health", STATUS_CODE[verdict["status"]], None,
          "gpu_health verdict of the host: 0 healthy, 1 degraded, 2 unhealthy")
    m.add("blackwell_sglang_gpu_reboot_required", verdict["reboot_required"], None,
          "1 when a finding needs a reboot or power-cycle (Xid 79/119/154/8, nvidia-smi hang)")
    for gpu in verdict["gpus"]:
        labels = {"gpu": gpu["index"], "bus_id": gpu["bus_id"] or "", "name": gpu["name"] or "", "uuid": gpu["uuid"] or ""}
        state = gpu["state"]
        m.add("blackwell_sglang_gpu_health", STATUS_CODE[gpu["status"]], labels,
              "gpu_health verdict per GPU: 0 healthy, 1 degraded, 2 unhealthy")
        pm = state.get("persistence_mode")
        m.add("blackwell_sglang_gpu_persistence_mode", None if pm is None else pm.lower() == "enabled", labels,
              "1 when persistence mode is on")
        for key, name, help_text, scale in GPU_GAUGES:
            value = state.get(key)
            if isinstance(value, bool) or value is None:
                m.add(name, value, labels, help_text)
            else:
                m.add(name, value * scale, labels, help_text)
        for bit, reason, _sev in gh.CLOCK_EVENT_BITS:
            mask = state.get("clocks_event_reasons")
            m.add("blackwell_sglang_gpu_clocks_event_reason", None if mask is None else bool(mask & bit),
                  dict(labels, reason=reason), "1 while this clocks event (throttle) reason is active")
        for kind in ("corrected", "uncorrected"):
            for scope in ("volatile", "aggregate"):
                m.add("blackwell_sglang_gpu_ecc_errors", state.get("ecc_%s_%s" % (kind, scope)),
                      dict(labels, type=kind, scope=scope),
                      "ECC error counters (volatile: since the driver loaded; aggregate: lifetime)")
        m.add("blackwell_sglang_gpu_retired_pages", state.get("retired_pages_sbe"), dict(labels, cause="single_bit"),
              "retired memory pages")
        m.add("blackwell_sglang_gpu_retired_pages", state.get("retired_pages_dbe"), dict(labels, cause="double_bit"),
              "retired memory pages")
        m.add("blackwell_sglang_gpu_remapped_rows", state.get("remapped_rows_correctable"),
              dict(labels, cause="correctable"), "remapped memory rows")
        m.add("blackwell_sglang_gpu_remapped_rows", state.get("remapped_rows_uncorrectable"),
              dict(labels, cause="uncorrectable"), "remapped memory rows")
    counts = {}
    for event in verdict["xids"]:
        key = (str(event["xid"]), event["bus_id"])
        counts[key] = counts.get(key, 0) + 1
    m.add("blackwell_sglang_gpu_xid_events", sum(counts.values()), {"xid": "any", "bus_id": "any"},
          "NVRM Xid lines in the kernel log of this boot, per Xid and GPU (xid=any: all)")
    for (xid, bus), count in sorted(counts.items()):
        m.add("blackwell_sglang_gpu_xid_events", count, {"xid": xid, "bus_id": bus})
    fell = verdict.get("xids") and [x for x in verdict["xids"] if x["xid"] == 79]
    m.add("blackwell_sglang_gpu_fell_off_bus", len(set(x["bus_id"] for x in fell or [])), None,
          "GPUs that fell off the bus this boot (Xid 79)")
    m.add("blackwell_sglang_gpu_collector_duration_seconds", round(time.time() - start, 3), None,
          "time the collector took (bounded by its command timeout)")
    m.add("blackwell_sglang_gpu_collector_timestamp_seconds", int(time.time()), None, "when the collector last ran")
    return m


def _which(name):
    for directory in os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(os.pathsep):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what")
    facts = sub.add_parser("facts")
    facts.add_argument("--current", required=True)
    facts.add_argument("--out", required=True)
    gpu = sub.add_parser("gpu")
    gpu.add_argument("--lib", required=True)
    gpu.add_argument("--out", required=True)
    gpu.add_argument("--nvidia-smi", default="")
    gpu.add_argument("--expected", type=int, default=None)
    gpu.add_argument("--timeout", type=int, default=20)
    gpu.add_argument("--kernel-log", default="", help="read this file instead of the journal / dmesg")
    opts = parser.parse_args(argv)
    if opts.what == "facts":
        # "changed" / "unchanged" on stdout: the role's converge step reports a change only when the facts changed
        changed = write_atomic(opts.out, "blackwell_sglang.prom", facts_metrics(opts.current).text())
        print("changed" if changed else "unchanged")
        return 0
    if opts.what == "gpu":
        sys.path.insert(0, opts.lib)
        from blackwell_gpu import _gpu_health as gh  # pylint: disable=import-outside-toplevel
        nvidia_smi = opts.nvidia_smi or _which("nvidia-smi")
        metrics = gpu_metrics(gh, nvidia_smi, opts.expected, opts.timeout, opts.kernel_log or None)
        write_atomic(opts.out, "blackwell_sglang_gpu.prom", metrics.text())
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
