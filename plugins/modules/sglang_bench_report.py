#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module ``blackwell.sglang.sglang_bench_report``: write the benchmark report for one run (run on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_bench_report
short_description: Write the Markdown/JSON/PNG report of an SGLang serving benchmark run
version_added: 0.1.0
description:
  - Reads the JSONL files that SGLang's serving benchmark (C(python -m sglang.bench_serving) or
    C(python -m sglang.benchmark.serving)) wrote for each host and run, plus the C(run.json) and C(manifest.json)
    that C(blackwell.sglang.sglang_benchmark) stored next to them, from O(results_dir)C(/<host>/<run_id>/).
  - Compares every host against the recorded baseline of the original deployment and against the host's previous
    run (the newest earlier run id with valid results), flags output tok/s drops beyond O(threshold_pct) and writes
    C(report.md), C(report.json) and C(throughput.png) (output tok/s against concurrency, log x axis; median and p99
    TPOT) to O(results_dir)C(/reports/<run_id>/).
  - Files are rendered to temporary names first and renamed only when all succeeded, so a malformed result file
    leaves an earlier report untouched. Unchanged files are not rewritten (the task reports C(changed=false)).
  - "Run it on the controller (C(delegate_to: localhost)); the plot needs matplotlib there. Without matplotlib the
    report is written without the plot and a warning says so."
author:
  - blackwell.sglang maintainers (!UNKNOWN)
options:
  results_dir:
    description: Controller directory holding C(<host>/<run_id>/c<N>.jsonl) result trees.
    type: path
    required: true
  run_id:
    description: UTC timestamp C(YYYYmmddTHHMMSSZ) of the run to report.
    type: str
    required: true
  hosts:
    description: Inventory hostnames to include, in report order.
    type: list
    elements: str
    required: true
  skipped:
    description: Hosts that were not benchmarked, mapped to the reason shown in the report.
    type: dict
    default: {}
  baseline:
    description:
      - Baseline record (see C(docs/baselines/)); a mapping with C(id), C(description) and C(points), each point
        C(max_concurrency), C(match) (C(exact) or C(best_at_or_above)), C(output_throughput) in tokens/s,
        C(label), C(qualifier), C(source).
      - Omit or pass an empty mapping for no baseline comparison.
    type: dict
    default: {}
  threshold_pct:
    description: Output tok/s drop in percent (against the baseline or the previous run) flagged as a regression.
    type: float
    default: 5.0
  plot:
    description: Write C(throughput.png).
    type: bool
    default: true
  fail_on_regression:
    description: A regression puts the host in RV(host_failures) (a failed or incomplete level always does).
    type: bool
    default: false
notes:
  - Supports check mode (computes the report and findings, writes nothing).
  - The module does not fail on a regression; it returns RV(regression) and the role decides
    (C(sglang_benchmark_fail_on_regression)).
  - The benchmark how-to is C(docs/benchmark.md), shipped with this collection.
"""

EXAMPLES = r"""
- name: Write the report of this run
  blackwell.sglang.sglang_bench_report:
    results_dir: "{{ inventory_dir }}/benchmark-results"
    run_id: "20261129T224100Z"
    hosts: "{{ ansible_play_hosts_all }}"
    baseline: "{{ lookup('ansible.builtin.file', 'docs/baselines/qwen35-397b-nvfp4-8x-rtxpro6000.yml') | from_yaml }}"
    threshold_pct: 5
  delegate_to: localhost
  run_once: true
  register: report

- name: Fail when a host regressed
  ansible.builtin.fail:
    msg: "{{ report.findings | map(attribute='message') | list }}"
  when: report.regression | bool
"""

RETURN = r"""
report_path:
  description: Path of the Markdown report.
  returned: always
  type: str
  sample: /srv/bench/reports/20261129T224100Z/report.md
json_path:
  description: Path of the machine-readable report (the whole model, see RV(hosts)).
  returned: always
  type: str
plot_path:
  description: Path of the PNG plot, or null when it was not written.
  returned: always
  type: str
regression:
  description: True when any host dropped more than O(threshold_pct) below the baseline or its previous run.
  returned: always
  type: bool
failed_levels:
  description: True when a level failed, timed out or completed fewer requests than asked.
  returned: always
  type: bool
findings:
  description: Regressions and failures, each C(host), C(kind) (C(regression_baseline), C(regression_previous),
    C(failed), C(incomplete)), C(level) (max concurrency) and C(message).
  returned: always
  type: list
  elements: dict
host_failures:
  description:
    - Per host whose run should fail the play, the message - its failed and incomplete levels, else (with
      O(fail_on_regression)) its regressions, joined, with the report's path.
  returned: always
  type: dict
summary:
  description: One line per host, for the play output.
  returned: always
  type: list
  elements: str
  sample: ["gpu1: benchmarked; output tok/s c=1 171.2, c=64 1893.0, c=128 2141.9", "sandbox-1: skipped (no GPU)"]
hosts:
  description: Per host C(host), C(status) (benchmarked, skipped, failed, no result) and the output tok/s per level.
  returned: always
  type: list
  elements: dict
  sample: [{"host": "gpu1", "status": "benchmarked", "output_throughput": {"1": 171.9, "64": 1890.2}}]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils._bench_report import (
    BenchReportError,
    build_report,
    write_report,
)


def summary_line(host):
    """``gpu1: benchmarked; output tok/s c=1 171.2, c=64 1893.0`` (or the skip reason)."""
    line = "%s: %s" % (host["host"], host["status"])
    if host.get("reason"):
        line += " (%s)" % host["reason"]
    if host["levels"]:
        levels = ["c=%d %.1f" % (r["max_concurrency"], r["output_throughput"]) for r in host["levels"]]
        line += "; output tok/s " + ", ".join(levels)
    return line


def host_failures(findings, report_path, fail_on_regression):
    """``{host: message}`` for each host whose run fails the play: a failed or incomplete level, else (with
    ``fail_on_regression``) a regression; the message joins that host's findings of the kind and names the report."""
    out = {}
    for host in sorted(set(f["host"] for f in findings)):
        mine = [f for f in findings if f["host"] == host]
        failing = [f for f in mine if f["kind"] in ("failed", "incomplete")]
        if not failing and fail_on_regression:
            failing = [f for f in mine if f["kind"].startswith("regression")]
        if failing:
            out[host] = "%s (report: %s)" % ("; ".join(f["message"] for f in failing), report_path)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            results_dir=dict(type="path", required=True),
            run_id=dict(type="str", required=True),
            hosts=dict(type="list", elements="str", required=True),
            skipped=dict(type="dict", default={}),
            baseline=dict(type="dict", default={}),
            threshold_pct=dict(type="float", default=5.0),
            plot=dict(type="bool", default=True),
            fail_on_regression=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        report = build_report(params["results_dir"], params["run_id"], params["hosts"], baseline=params["baseline"],
                              threshold_pct=params["threshold_pct"], skipped=params["skipped"])
        written = write_report(report, os.path.join(params["results_dir"], "reports", params["run_id"]),
                               plot=params["plot"], check_mode=module.check_mode)
    except (BenchReportError, ValueError) as exc:
        module.fail_json(msg="benchmark report not written: %s" % exc)
    except OSError as exc:
        module.fail_json(msg="benchmark report not written: %s" % exc)
    if written["plot_note"] and params["plot"]:
        module.warn("plot not written: %s" % written["plot_note"])
    module.exit_json(
        changed=written["changed"],
        report_path=written["paths"]["markdown"],
        json_path=written["paths"]["json"],
        plot_path=written["paths"]["plot"],
        regression=report["regression"],
        failed_levels=report["failed"],
        findings=report["findings"],
        host_failures=host_failures(report["findings"], written["paths"]["markdown"], params["fail_on_regression"]),
        summary=[summary_line(h) for h in report["hosts"]],
        hosts=[{"host": h["host"], "status": h["status"], "reason": h.get("reason"),
                "output_throughput": dict((str(r["max_concurrency"]), r["output_throughput"]) for r in h["levels"])}
               for h in report["hosts"]],
    )


if __name__ == "__main__":
    main()
