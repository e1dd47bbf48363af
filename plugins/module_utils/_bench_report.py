# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Benchmark results -> comparisons -> Markdown/JSON/PNG report (controller side, pure Python).

Input is what ``playbooks/benchmark.yml`` leaves on the controller::

    <results_dir>/<host>/<run_id>/c<N>.jsonl     one line per run of SGLang's serving benchmark
                                                 (``python -m sglang.bench_serving`` / ``sglang.benchmark.serving``)
    <results_dir>/<host>/<run_id>/run.json       what was asked for (levels, lengths, module, status, failures)
    <results_dir>/<host>/<run_id>/manifest.json  copy of ``{{ sglang_stack_current }}/manifest.json`` (optional)

and the report goes to ``<results_dir>/reports/<run_id>/{report.md,report.json,throughput.png}``.

The JSONL keys are the benchmark's own (sglang ``benchmark/serving.py`` ``result`` dict, checked against the
sglang 0.5.23 wheel; domain notes section 5.3). Units as the benchmark writes them: ``*_throughput`` in tokens/s
(``request_throughput`` in requests/s), ``*_ms`` in milliseconds, ``duration`` in seconds.

Run ids are UTC timestamps ``YYYYmmddTHHMMSSZ``; "previous run" is the newest earlier run id (compared as parsed
datetimes) of the same host that has at least one valid result.

Nothing here writes unless :func:`write_report` is called, and that writes every file to a temporary name first
and renames only after all of them were produced, so a bad input never replaces a good report.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import tempfile

from ansible_collections.blackwell.sglang.plugins.module_utils import _fs
from ansible_collections.blackwell.sglang.plugins.module_utils._venv_metadata import canonicalize_name

# Keys every JSONL record must carry, with a value that is a finite number (the report is built from them).
REQUIRED_KEYS = (
    "max_concurrency",
    "completed",
    "duration",
    "request_throughput",
    "output_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
)
# Carried into the report when present (numbers or short strings); absence is not an error.
OPTIONAL_KEYS = (
    "backend",
    "dataset_name",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "total_input_tokens",
    "total_output_tokens",
    "input_throughput",
    "total_throughput",
    "mean_e2e_latency_ms",
    "median_e2e_latency_ms",
    "p99_e2e_latency_ms",
    "concurrency",
    "max_output_tokens_per_s",
)
# Latency figures shown per level: (label, key prefix).
LATENCY_METRICS = (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("ITL", "itl_ms"))
STATS = ("mean", "median", "p99")

RUN_ID_FORMAT = "%Y%m%dT%H%M%SZ"
_RUN_ID_RE = re.compile(r"^\d{8}T\d{6}Z$")
_LEVEL_FILE_RE = re.compile(r"^c(\d+)\.jsonl$")
UNKNOWN = "unknown"


class BenchReportError(ValueError):
    """A result file cannot be used. ``path``, ``line`` (1-based) and ``key`` say where."""

    def __init__(self, message, path=None, line=None, key=None):
        where = path or ""
        if line is not None:
            where = "%s:%d" % (where, line)
        if key is not None:
            where = "%s: key %r" % (where, key) if where else "key %r" % key
        super(BenchReportError, self).__init__("%s: %s" % (where, message) if where else message)
        self.path, self.line, self.key = path, line, key


def parse_run_id(run_id):
    """``"20261129T224100Z"`` -> aware UTC datetime; ValueError on anything else."""
    if not _RUN_ID_RE.match(str(run_id)):
        raise ValueError("run id %r is not a UTC timestamp YYYYmmddTHHMMSSZ" % (run_id,))
    return datetime.datetime.strptime(run_id, RUN_ID_FORMAT).replace(tzinfo=datetime.timezone.utc)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_jsonl(text, path="<string>"):
    """Parse benchmark JSONL text into a list of records (dicts with the required keys).

    Each record gets ``_source`` = ``"<path>:<line>"``. Blank lines are ignored.

    :raises BenchReportError: invalid JSON, a line that is not an object, a missing required key or a
        required value that is not a finite number -- the message names file, line and key.
    """
    records = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise BenchReportError("not valid JSON (%s)" % exc, path, lineno)
        except RecursionError:
            raise BenchReportError("not valid JSON (nested too deeply)", path, lineno) from None
        if not isinstance(data, dict):
            raise BenchReportError("expected a JSON object, got %s" % type(data).__name__, path, lineno)
        for key in REQUIRED_KEYS:
            if key not in data:
                raise BenchReportError(
                    "missing required key (is this the output of sglang's serving benchmark run with "
                    "--max-concurrency?)", path, lineno, key)
            if not _is_number(data[key]):
                raise BenchReportError("expected a finite number, got %r" % (data[key],), path, lineno, key)
        record = dict((key, data[key]) for key in REQUIRED_KEYS)
        for key in OPTIONAL_KEYS:
            if key in data and (data[key] is None or isinstance(data[key], (int, float, str))):
                record[key] = data[key]
        record["max_concurrency"] = int(record["max_concurrency"])
        record["_source"] = "%s:%d" % (path, lineno)
        records.append(record)
    return records


def read_jsonl(path):
    """:func:`parse_jsonl` on a file; an empty file is an error (the benchmark writes one line per run)."""
    try:
        text = _fs.read_source(path, "benchmark result record")
    except _fs.NotUtf8 as exc:
        raise BenchReportError("not UTF-8: byte 0x%02x at offset %d cannot be decoded; a result record is never "
                               "read with replacement: run the level again" % (exc.byte, exc.offset), path, exc.line)
    records = parse_jsonl(text, path)
    if not records:
        raise BenchReportError("no result line (the benchmark did not finish or wrote nothing)", path)
    return records


def _read_json_file(path):
    """(data, note): data is None with a note when the file is absent or not JSON.

    :raises BenchReportError: the file is not UTF-8 (a record is refused, naming the file and the byte offset,
        never read with replacement).
    """
    if not os.path.isfile(path):
        return None, "missing"
    try:
        return _fs.load_json(path), None
    except _fs.NotUtf8 as exc:
        raise BenchReportError("not UTF-8: byte 0x%02x at offset %d cannot be decoded; a record is never read with "
                               "replacement: write it again (rerun the benchmark or the release)" % (
                                   exc.byte, exc.offset), path, exc.line)
    except (OSError, ValueError) as exc:
        return None, "unreadable: %s" % exc


def _check_run_meta(meta, path):
    """run.json of the wrong shape is a failure naming the file and the key, not a traceback."""
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise BenchReportError("must hold a JSON object, got %s" % type(meta).__name__, path=path)
    if meta.get("failures") is not None and not isinstance(meta["failures"], list):
        raise BenchReportError("must be a list", path=path, key="failures")
    levels = meta.get("levels")
    if levels is None:
        return
    if not isinstance(levels, list):
        raise BenchReportError("must be a list", path=path, key="levels")
    for index, level in enumerate(levels):
        for key in ("max_concurrency", "num_prompts"):
            value = level.get(key) if isinstance(level, dict) else None
            # ASCII digits only: "²".isdigit() is true but int("²") fails
            if isinstance(value, bool) or not isinstance(value, (int, float, str)) or \
                    not re.match(r"^[0-9]+$", str(value).strip()):
                raise BenchReportError("must be a whole number, got %r" % (value,), path=path,
                                       key="levels[%d].%s" % (index, key))


def load_run(run_dir):
    """Read one host's run directory.

    :returns: dict ``levels`` (max_concurrency -> record; when a file holds several lines the last wins and a note
        says so), ``meta`` (run.json or {}), ``manifest`` (raw manifest or None), ``notes`` (list of str).
    :raises BenchReportError: from :func:`read_jsonl` for a malformed result file.
    """
    levels, notes = {}, []
    names = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []
    for name in names:
        if not name.endswith(".jsonl"):
            continue
        path = os.path.join(run_dir, name)
        records = read_jsonl(path)
        if len(records) > 1:
            notes.append("%s holds %d results; the last one (%s) is used" % (name, len(records), records[-1]["_source"]))
        for record in records:
            conc = record["max_concurrency"]
            if conc in levels and levels[conc]["_source"].rsplit(":", 1)[0] != path:
                notes.append("concurrency %d appears in %s and %s; the latter is used"
                             % (conc, levels[conc]["_source"], record["_source"]))
            levels[conc] = record
    meta, meta_note = _read_json_file(os.path.join(run_dir, "run.json"))
    if meta_note and meta_note != "missing":
        notes.append("run.json %s" % meta_note)
    _check_run_meta(meta, os.path.join(run_dir, "run.json"))
    manifest, manifest_note = _read_json_file(os.path.join(run_dir, "manifest.json"))
    if manifest_note and manifest_note != "missing":
        notes.append("manifest.json %s" % manifest_note)
    return {"levels": levels, "meta": meta if isinstance(meta, dict) else {}, "manifest": manifest, "notes": notes}


def find_previous_run(host_dir, run_id):
    """Newest run of this host before ``run_id`` with at least one valid result.

    Runs whose files are malformed are passed over (their error is returned in ``skipped`` so the report can
    say why), never fatal: only the current run must be clean.

    :returns: (run_id or None, loaded run or None, skipped: list of (run_id, error))
    """
    current = parse_run_id(run_id)
    candidates = []
    if os.path.isdir(host_dir):
        for name in os.listdir(host_dir):
            try:
                stamp = parse_run_id(name)
            except ValueError:
                continue
            if stamp < current:
                candidates.append((stamp, name))
    skipped = []
    for _stamp, name in sorted(candidates, reverse=True):
        try:
            run = load_run(os.path.join(host_dir, name))
        except BenchReportError as exc:
            skipped.append((name, str(exc)))
            continue
        if run["levels"]:
            return name, run, skipped
    return None, None, skipped


# ----------------------------------------------------------------------------------------------------------------
# manifest (written by the sglang_release role; read defensively: anything missing is "unknown")

_VERSION_KEYS = ("sglang", "sgl_kernel", "torch", "cuda", "flashinfer")
# distribution names (PEP 503 normalised) that carry each version in the manifest's ``packages``
_DISTS = {"sglang": ("sglang",), "sgl_kernel": ("sglang-kernel", "sgl-kernel"),
          "flashinfer": ("flashinfer-python",), "torch": ("torch",)}


def _verdict(value):
    """Reduce one probe backend entry (bool / str / dict) to a short verdict string."""
    if isinstance(value, bool):
        return "pass" if value else "fail"
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict):
        for key in ("verdict", "status", "result"):
            if isinstance(value.get(key), str):
                return value[key]
        for key in ("ok", "passed", "pass", "usable"):
            if isinstance(value.get(key), bool):
                return "pass" if value[key] else "fail"
    return UNKNOWN


def _str(value):
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) and value != "" else None


def summarize_manifest(manifest):
    """Pick release id, stack versions and FP4 probe verdicts out of a release manifest.

    Two shapes are understood: the sglang_release role's schema 1 (``release.id``, ``sglang.{version,commit}``,
    ``torch.{version,cuda}``, ``packages`` {distribution: version}, ``probe.{verdicts, recommended, device}``) and
    the flat shape ``{release_id, versions: {torch, cuda, flashinfer, sglang, sgl_kernel}, commits,
    probe: {backends, recommended}}``. Anything absent or of another type is ``"unknown"``; this never raises.
    """
    out = {"present": isinstance(manifest, dict), "release_id": UNKNOWN,
           "versions": dict((key, UNKNOWN) for key in _VERSION_KEYS), "commits": {},
           "probe": {"backends": [], "recommended": UNKNOWN, "device": UNKNOWN}}
    if not isinstance(manifest, dict):
        return out

    def sub(key):
        value = manifest.get(key)
        return value if isinstance(value, dict) else {}

    out["release_id"] = _str(manifest.get("release_id")) or _str(sub("release").get("id")) or UNKNOWN
    packages = dict((canonicalize_name(k), v) for k, v in sub("packages").items())
    found = {"sglang": _str(sub("sglang").get("version")), "torch": _str(sub("torch").get("version")),
             "cuda": _str(sub("torch").get("cuda"))}
    for key, dists in _DISTS.items():
        found[key] = found.get(key) or next((_str(packages[d]) for d in dists if _str(packages.get(d))), None)
    for key, value in sub("versions").items():
        found[str(key)] = _str(value) or found.get(str(key))
    for key, value in found.items():
        if value:
            out["versions"][key] = value
    commits = dict((str(k), str(v)) for k, v in sub("commits").items() if _str(v))
    if not commits and _str(sub("sglang").get("commit")):
        commits["sglang"] = str(sub("sglang")["commit"])
    out["commits"] = commits
    probe = sub("probe")
    backends = probe.get("backends", probe.get("verdicts"))
    if isinstance(backends, dict):
        out["probe"]["backends"] = [{"name": str(k), "verdict": _verdict(v)} for k, v in sorted(backends.items())]
    elif isinstance(backends, list):
        for item in backends:
            if isinstance(item, dict):
                name = item.get("name", item.get("backend", UNKNOWN))
                out["probe"]["backends"].append({"name": str(name), "verdict": _verdict(item)})
    rec = probe.get("recommended")
    if isinstance(rec, dict):
        shown = ", ".join("%s=%s" % (k, v) for k, v in sorted(rec.items()) if _str(v))
        out["probe"]["recommended"] = shown or UNKNOWN
    elif _str(rec):
        out["probe"]["recommended"] = str(rec)
    device = probe.get("device")
    out["probe"]["device"] = _str(device.get("name") if isinstance(device, dict) else device) or UNKNOWN
    return out


# ----------------------------------------------------------------------------------------------------------------
# comparisons

def pct_change(new, old):
    """Percent change of ``new`` against ``old`` (None when old is not a positive number)."""
    if not _is_number(new) or not _is_number(old) or old <= 0:
        return None
    return (float(new) - float(old)) / float(old) * 100.0


def validate_baseline(baseline):
    """Check a baseline record (docs/baselines/*.yml) and return its points.

    A point is ``{max_concurrency: N, match: exact}`` (compare the level with exactly N) or
    ``{max_concurrency: N, match: best_at_or_above}`` (compare the best output tok/s over levels >= N: the original
    deployment recorded "over 2100 tok/s at high concurrency" without saying which level), plus
    ``output_throughput`` (tok/s > 0), ``label`` and ``source``.

    :raises BenchReportError: on a malformed record (names the point and key).
    """
    if not baseline:
        return []
    if not isinstance(baseline, dict) or not isinstance(baseline.get("points"), list):
        raise BenchReportError("baseline must be a mapping with a 'points' list", key="points")
    points = []
    for index, point in enumerate(baseline["points"]):
        where = "baseline point %d" % index
        if not isinstance(point, dict):
            raise BenchReportError("%s is not a mapping" % where)
        for key in ("max_concurrency", "output_throughput"):
            if not _is_number(point.get(key)) or point[key] <= 0:
                raise BenchReportError("%s: needs a positive number" % where, key=key)
        match = point.get("match", "exact")
        if match not in ("exact", "best_at_or_above"):
            raise BenchReportError("%s: match must be exact or best_at_or_above, got %r" % (where, match), key="match")
        points.append({"max_concurrency": int(point["max_concurrency"]), "match": match,
                       "output_throughput": float(point["output_throughput"]),
                       "label": str(point.get("label", "c=%s" % point["max_concurrency"])),
                       "qualifier": str(point.get("qualifier", "")), "source": str(point.get("source", ""))})
    return points


def compare_to_baseline(levels, points, threshold_pct):
    """One row per baseline point: the host's figure, the change in percent and whether it is a regression.

    A regression is a drop of more than ``threshold_pct`` percent below the baseline tok/s. A point with no
    matching level gives ``measured: None`` (reported as "not measured", not a regression).
    """
    rows = []
    for point in points:
        if point["match"] == "exact":
            rec = levels.get(point["max_concurrency"])
        else:
            eligible = [r for c, r in levels.items() if c >= point["max_concurrency"]]
            rec = max(eligible, key=lambda r: r["output_throughput"]) if eligible else None
        measured = rec["output_throughput"] if rec else None
        change = pct_change(measured, point["output_throughput"])
        rows.append({"label": point["label"], "match": point["match"], "baseline": point["output_throughput"],
                     "baseline_concurrency": point["max_concurrency"], "qualifier": point["qualifier"],
                     "measured": measured, "measured_concurrency": rec["max_concurrency"] if rec else None,
                     "change_pct": change, "regression": change is not None and change < -threshold_pct})
    return rows


def _lengths(record, meta=None):
    """(input_len, output_len) a record was produced with (record keys first, then run.json)."""
    meta = meta or {}
    return (record.get("random_input_len", meta.get("random_input_len")),
            record.get("random_output_len", meta.get("random_output_len")))


def compare_to_previous(levels, prev_levels, threshold_pct, meta=None, prev_meta=None):
    """Per concurrency level present in both runs: output tok/s and median TTFT/TPOT changes.

    Levels run with other input/output lengths are listed as not comparable instead of compared.
    A regression is an output tok/s drop of more than ``threshold_pct`` percent.
    """
    rows = []
    for conc in sorted(set(levels) & set(prev_levels)):
        cur, old = levels[conc], prev_levels[conc]
        row = {"max_concurrency": conc, "measured": cur["output_throughput"], "previous": old["output_throughput"],
               "comparable": _lengths(cur, meta) == _lengths(old, prev_meta)}
        if row["comparable"]:
            row["change_pct"] = pct_change(cur["output_throughput"], old["output_throughput"])
            row["ttft_change_pct"] = pct_change(cur["median_ttft_ms"], old["median_ttft_ms"])
            row["tpot_change_pct"] = pct_change(cur["median_tpot_ms"], old["median_tpot_ms"])
            row["regression"] = row["change_pct"] is not None and row["change_pct"] < -threshold_pct
        else:
            row.update(change_pct=None, ttft_change_pct=None, tpot_change_pct=None, regression=False,
                       note="lengths %s/%s vs %s/%s" % (_lengths(cur, meta) + _lengths(old, prev_meta)))
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------------------------------------------
# the report model

def build_report(results_dir, run_id, hosts, baseline=None, threshold_pct=5.0, skipped=None):
    """Assemble the report for one run over ``hosts``.

    :param results_dir: controller directory with ``<host>/<run_id>/`` result trees.
    :param run_id: ``YYYYmmddTHHMMSSZ`` of this run.
    :param hosts: inventory hostnames to report on (in this order).
    :param baseline: baseline record (see :func:`validate_baseline`) or None.
    :param threshold_pct: percent drop that counts as a regression (> 0).
    :param skipped: ``{host: reason}`` for hosts that were not benchmarked.
    :returns: dict (JSON-serialisable) with ``hosts`` (per host: status, levels, baseline, previous, manifest,
        failures, notes), ``findings`` (list of {host, kind, level, message}) and ``regression`` (bool).
    :raises BenchReportError: a malformed current result file or baseline record.
    """
    parse_run_id(run_id)
    if not _is_number(threshold_pct) or threshold_pct <= 0:
        raise BenchReportError("regression threshold must be a positive percentage, got %r" % (threshold_pct,))
    points = validate_baseline(baseline)
    skipped = skipped or {}
    baseline = baseline or {}
    method = baseline.get("method") if isinstance(baseline.get("method"), dict) else {}
    report = {"run_id": run_id, "threshold_pct": float(threshold_pct), "hosts": [], "findings": [],
              "baseline": {"id": _str(baseline.get("id")) or "none",
                           "description": _str(baseline.get("description")) or "",
                           "points": points, "method": method}}
    for host in hosts:
        host_dir = os.path.join(results_dir, host)
        run = load_run(os.path.join(host_dir, run_id))
        meta = run["meta"]
        entry = {"host": host, "notes": list(run["notes"]), "failures": list(meta.get("failures") or []),
                 "manifest": summarize_manifest(run["manifest"]), "meta": meta,
                 "levels": [run["levels"][c] for c in sorted(run["levels"])]}
        reason = skipped.get(host) or (meta.get("skip_reason") if meta.get("status") == "skipped" else None)
        if reason:
            entry["status"], entry["reason"] = "skipped", str(reason)
        elif not run["levels"] and not meta:
            unreadable = [n for n in run["notes"] if n.startswith("run.json ")]
            entry["status"], entry["reason"] = ("failed", unreadable[0]) if unreadable else (
                "no result", "no run.json and no results (host failed or unreachable)")
        elif entry["failures"] or not run["levels"]:
            entry["status"] = "failed"
        else:
            entry["status"] = "benchmarked"
        # requested vs completed requests
        asked = dict((int(lvl["max_concurrency"]), int(lvl["num_prompts"])) for lvl in meta.get("levels") or []
                     if isinstance(lvl, dict) and "max_concurrency" in lvl and "num_prompts" in lvl)
        for rec in entry["levels"]:
            want = asked.get(rec["max_concurrency"])
            if want is not None and rec["completed"] < want:
                report["findings"].append({"host": host, "kind": "incomplete", "level": rec["max_concurrency"],
                                           "message": "only %d of %d requests completed at concurrency %d (%s)"
                                                      % (rec["completed"], want, rec["max_concurrency"], rec["_source"])})
        for failure in entry["failures"]:
            # run.json's failures are {max_concurrency, message}; a bare string (or anything else) is its message
            failure = failure if isinstance(failure, dict) else {"message": failure}
            report["findings"].append({"host": host, "kind": "failed", "level": failure.get("max_concurrency"),
                                       "message": str(failure.get("message", failure))})
        entry["baseline"] = compare_to_baseline(run["levels"], points, threshold_pct) if run["levels"] else []
        for row in entry["baseline"]:
            if row["regression"]:
                report["findings"].append({
                    "host": host, "kind": "regression_baseline", "level": row["measured_concurrency"],
                    "message": "%s: %.1f tok/s at concurrency %d is %.1f%% below the baseline %.0f tok/s"
                               % (row["label"], row["measured"], row["measured_concurrency"], -row["change_pct"],
                                  row["baseline"])})
        prev_id, prev, prev_skipped = find_previous_run(host_dir, run_id)
        entry["notes"].extend("previous run %s passed over: %s" % item for item in prev_skipped)
        entry["previous"] = None
        if prev is not None and run["levels"]:
            rows = compare_to_previous(run["levels"], prev["levels"], threshold_pct, meta, prev["meta"])
            entry["previous"] = {"run_id": prev_id, "rows": rows,
                                 "levels": [prev["levels"][c] for c in sorted(prev["levels"])]}
            for row in rows:
                if row["regression"]:
                    report["findings"].append({
                        "host": host, "kind": "regression_previous", "level": row["max_concurrency"],
                        "message": "%.1f tok/s at concurrency %d is %.1f%% below the previous run %s (%.1f tok/s)"
                                   % (row["measured"], row["max_concurrency"], -row["change_pct"], prev_id,
                                      row["previous"])})
        report["hosts"].append(entry)
    report["regression"] = any(f["kind"].startswith("regression") for f in report["findings"])
    report["failed"] = any(f["kind"] in ("failed", "incomplete") for f in report["findings"])
    return report


# ----------------------------------------------------------------------------------------------------------------
# rendering

def _fmt(value, digits=1):
    if value is None:
        return "-"
    if isinstance(value, float):
        return "%.*f" % (digits, value)
    return str(value)


def _fmt_pct(value):
    return "-" if value is None else "%+.1f%%" % value


def render_markdown(report, plot_name=None, plot_note=None):
    """The report as Markdown (deterministic for the same input: no wall-clock time in it)."""
    out = []
    add = out.append
    add("# SGLang serving benchmark, run %s" % report["run_id"])
    add("")
    add("Regression threshold: output tok/s more than %.1f%% below the baseline or the host's previous run. "
        "Units: throughput in tokens/s (requests/s for req/s), latencies in ms." % report["threshold_pct"])
    add("")
    if report["findings"]:
        add("## Findings")
        add("")
        for f in report["findings"]:
            add("- **%s** `%s`: %s" % (f["kind"].replace("_", " "), f["host"], f["message"]))
        add("")
    else:
        add("No regression and no failed level.")
        add("")
    if plot_name:
        add("![output tok/s against concurrency](%s)" % plot_name)
        add("")
    elif plot_note:
        add("_Plot not written: %s._" % plot_note)
        add("")
    base = report["baseline"]
    if base["points"]:
        add("Baseline `%s`: %s" % (base["id"], base["description"].strip()))
        method = base.get("method") or {}
        lengths = (method.get("random_input_len"), method.get("random_output_len"))
        add("Baseline lengths: %s." % ("input %s / output %s tokens" % lengths if None not in lengths else
                                       "not recorded by the original deployment, so a difference may be partly "
                                       "the method's, not the stack's"))
        add("")
    for host in report["hosts"]:
        add("## %s (%s)" % (host["host"], host["status"]))
        add("")
        if host.get("reason"):
            add("Reason: %s" % host["reason"])
            add("")
        meta = host["meta"]
        if meta.get("module"):
            add("Benchmark: `python -m %s --backend %s --dataset-name %s`, input %s / output %s tokens "
                "(range ratio %s), SGLang at %s." % (
                    meta.get("module"), meta.get("backend", UNKNOWN), meta.get("dataset_name", UNKNOWN),
                    meta.get("random_input_len", UNKNOWN), meta.get("random_output_len", UNKNOWN),
                    meta.get("random_range_ratio", UNKNOWN), meta.get("base_url", UNKNOWN)))
            add("")
        man = host["manifest"]
        vers = man["versions"]
        add("Stack: release `%s`; %s%s" % (
            man["release_id"], ", ".join("%s %s" % (k, vers[k]) for k in sorted(vers)),
            "" if man["present"] else " (no manifest.json on the host)"))
        add("")
        probe = man["probe"]
        add("FP4 probe (%s): %s; recommended: %s" % (
            probe["device"], ", ".join("%s %s" % (b["name"], b["verdict"]) for b in probe["backends"]) or UNKNOWN,
            probe["recommended"]))
        if man["commits"]:
            add("")
            add("Commits: %s" % ", ".join("%s `%s`" % (k, v) for k, v in sorted(man["commits"].items())))
        add("")
        if host["levels"]:
            add("| concurrency | completed | duration s | req/s | output tok/s | total tok/s "
                "| TTFT mean / median / p99 | TPOT mean / median / p99 | ITL mean / median / p99 |")
            add("|---:|---:|---:|---:|---:|---:|---|---|---|")
            for rec in host["levels"]:
                lat = ["%s / %s / %s" % tuple(_fmt(rec["%s_%s" % (s, key)]) for s in STATS)
                       for _label, key in LATENCY_METRICS]
                add("| %d | %d | %s | %s | %s | %s | %s |" % (
                    rec["max_concurrency"], rec["completed"], _fmt(rec["duration"]), _fmt(rec["request_throughput"], 2),
                    _fmt(rec["output_throughput"]), _fmt(rec.get("total_throughput")), " | ".join(lat)))
            add("")
        if host["baseline"]:
            add("Against the baseline:")
            add("")
            add("| point | baseline tok/s | measured tok/s (at concurrency) | change | regression |")
            add("|---|---:|---:|---:|---|")
            for row in host["baseline"]:
                if row["measured"] is None:
                    measured = "not measured"
                else:
                    measured = "%s (c=%d)" % (_fmt(row["measured"]), row["measured_concurrency"])
                add("| %s | %s%s | %s | %s | %s |" % (
                    row["label"], row["qualifier"] + " " if row["qualifier"] else "", _fmt(row["baseline"], 0),
                    measured, _fmt_pct(row["change_pct"]), "**yes**" if row["regression"] else "no"))
            add("")
        prev = host.get("previous")
        if prev:
            add("Against the previous run `%s`:" % prev["run_id"])
            add("")
            add("| concurrency | previous tok/s | now tok/s | change | median TTFT change | median TPOT change "
                "| regression |")
            add("|---:|---:|---:|---:|---:|---:|---|")
            for row in prev["rows"]:
                add("| %d | %s | %s | %s | %s | %s | %s |" % (
                    row["max_concurrency"], _fmt(row["previous"]), _fmt(row["measured"]),
                    _fmt_pct(row["change_pct"]) if row["comparable"] else "not comparable (%s)" % row["note"],
                    _fmt_pct(row["ttft_change_pct"]), _fmt_pct(row["tpot_change_pct"]),
                    "**yes**" if row["regression"] else "no"))
            add("")
        elif host["levels"]:
            add("No previous run of this host to compare with.")
            add("")
        for note in host["notes"]:
            add("- note: %s" % note)
        if host["notes"]:
            add("")
    return "\n".join(out).rstrip("\n") + "\n"


def render_plot(report, path):
    """Write the PNG: output tok/s against concurrency (log2 x axis) and median/p99 TPOT.

    One solid line per host for this run, dotted for its previous run, baseline points as black stars
    (a best-at-or-above point is drawn as a horizontal dashed line from its concurrency to the largest level).

    :raises ImportError: matplotlib is not installed (callers report it and skip the plot).
    """
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    fig, (ax_tp, ax_lat) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=100)
    all_conc = set()
    any_flagged = False
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, host in enumerate(h for h in report["hosts"] if h["levels"]):
        color = colors[index % len(colors)]
        xs = [r["max_concurrency"] for r in host["levels"]]
        all_conc.update(xs)
        ax_tp.plot(xs, [r["output_throughput"] for r in host["levels"]], "o-", color=color,
                   label="%s %s" % (host["host"], report["run_id"]))
        for x, rec in zip(xs, host["levels"]):
            # stagger the value labels per host so that hosts with similar figures stay readable
            ax_tp.annotate("%.0f" % rec["output_throughput"], (x, rec["output_throughput"]),
                           textcoords="offset points", xytext=(0, 7 + 10 * (index % 4)), ha="center", fontsize=8,
                           color=color)
        ax_lat.plot(xs, [r["median_tpot_ms"] for r in host["levels"]], "o-", color=color,
                    label="%s median TPOT" % host["host"])
        ax_lat.plot(xs, [r["p99_tpot_ms"] for r in host["levels"]], "^--", color=color,
                    label="%s p99 TPOT" % host["host"])
        flagged = set(f["level"] for f in report["findings"]
                      if f["host"] == host["host"] and f["kind"].startswith("regression"))
        bad = [r for r in host["levels"] if r["max_concurrency"] in flagged]
        if bad:
            ax_tp.plot([r["max_concurrency"] for r in bad], [r["output_throughput"] for r in bad], "o",
                       markersize=14, markerfacecolor="none", markeredgecolor="red", markeredgewidth=1.5,
                       label="regression" if not any_flagged else None)
            any_flagged = True
        prev = host.get("previous")
        if prev and prev["levels"]:
            pxs = [r["max_concurrency"] for r in prev["levels"]]
            all_conc.update(pxs)
            ax_tp.plot(pxs, [r["output_throughput"] for r in prev["levels"]], "s:", color=color, alpha=0.6,
                       label="%s previous %s" % (host["host"], prev["run_id"]))
    points = report["baseline"]["points"]
    for point in points:
        all_conc.add(point["max_concurrency"])
    top = max(all_conc) if all_conc else 1
    for n, point in enumerate(points):
        label = "baseline" if n == 0 else None
        ax_tp.plot([point["max_concurrency"]], [point["output_throughput"]], "k*", markersize=12, label=label)
        if point["match"] == "best_at_or_above" and top > point["max_concurrency"]:
            ax_tp.plot([point["max_concurrency"], top], [point["output_throughput"]] * 2, "k--", linewidth=1)
        at_right = point["max_concurrency"] >= top
        ax_tp.annotate("baseline %s%.0f" % ("> " if point["match"] == "best_at_or_above" else "",
                                            point["output_throughput"]),
                       (point["max_concurrency"], point["output_throughput"]), textcoords="offset points",
                       xytext=(-8 if at_right else 8, -14), ha="right" if at_right else "left", fontsize=8)
    for ax in (ax_tp, ax_lat):
        ax.set_xscale("log", base=2)
        ticks = sorted(all_conc) or [1]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("max concurrency (requests in flight, log scale)")
        ax.margins(x=0.06)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_ylim(bottom=0)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper left")
    ax_tp.set_ylabel("output throughput (tokens/s)")
    ax_tp.set_title("Output tok/s against concurrency")
    ax_lat.set_ylabel("time per output token (ms)")
    ax_lat.set_title("TPOT (median, p99)")
    fig.suptitle("SGLang serving benchmark %s" % report["run_id"])
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)


def _same_content(path, data):
    try:
        with open(path, "rb") as handle:
            return handle.read() == data
    except OSError:
        return False


def write_report(report, report_dir, plot=True, check_mode=False):
    """Render everything, then move it into ``report_dir`` (report.md, report.json, throughput.png).

    All files are first written to temporary names in ``report_dir``; only when every one was produced are they
    renamed over the old ones (``os.replace``). Files whose content did not change are left alone.

    :returns: dict ``changed`` (bool), ``paths`` {markdown, json, plot (None when not written)}, ``plot_note``.
    """
    paths = {"markdown": os.path.join(report_dir, "report.md"), "json": os.path.join(report_dir, "report.json"),
             "plot": os.path.join(report_dir, "throughput.png") if plot else None}
    blobs, plot_note = {}, None if plot else "disabled"
    if not check_mode and not os.path.isdir(report_dir):
        os.makedirs(report_dir)
    if plot:
        png_dir = report_dir if os.path.isdir(report_dir) else tempfile.gettempdir()
        fd, tmp_png = tempfile.mkstemp(prefix=".throughput.", suffix=".png", dir=png_dir)
        os.close(fd)
        try:
            render_plot(report, tmp_png)
            with open(tmp_png, "rb") as handle:
                blobs["plot"] = handle.read()
        except ImportError as exc:
            plot_note, paths["plot"] = "matplotlib is not installed on the controller (%s)" % exc, None
        finally:
            os.unlink(tmp_png)
    blobs["markdown"] = render_markdown(report, os.path.basename(paths["plot"]) if paths["plot"] else None,
                                        plot_note).encode("utf-8")
    blobs["json"] = (json.dumps(report, indent=2, sort_keys=True) + "\n").encode("utf-8")
    todo = dict((k, v) for k, v in blobs.items() if not _same_content(paths[k], v))
    if check_mode or not todo:
        return {"changed": bool(todo), "paths": paths, "plot_note": plot_note}
    staged = {}
    try:
        for key, data in todo.items():
            fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(paths[key]), dir=report_dir)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, 0o644)
            staged[key] = tmp
    except Exception:
        for tmp in staged.values():
            os.unlink(tmp)
        raise
    for key, tmp in staged.items():
        os.replace(tmp, paths[key])
    return {"changed": True, "paths": paths, "plot_note": plot_note}
