#!/usr/bin/env python3
"""Render the Grafana dashboard's panels as one PNG from the data the monitoring scenario's Prometheus recorded.

  .venv/bin/python tests/sandbox/render_dashboard.py [.cache/monitoring/dashboard-data.json] [docs/img/monitoring-dashboard.png]

Input: molecule/monitoring/tests/test_monitoring.py::test_export_dashboard_data writes every panel's PromQL range
query result (the last 4 minutes, 5 s step) of roles/sglang_prometheus/files/blackwell-sglang-dashboard.json, as
answered by the scenario's Prometheus scraping the stand-in worker, the node exporter's textfile collector and the
fake nvidia-smi. This draws the same panels with matplotlib (Grafana is not in the sandbox); the numbers are the
stand-in's, not a GPU's.
"""
import datetime
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  pylint: disable=wrong-import-position


def legend(fmt, metric):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: str(metric.get(m.group(1), "")), fmt or "") or str(metric)


def main(argv):
    src = argv[1] if len(argv) > 1 else ".cache/monitoring/dashboard-data.json"
    dest = argv[2] if len(argv) > 2 else "docs/img/monitoring-dashboard.png"
    with open(src) as handle:
        data = json.load(handle)
    panels = data["panels"]
    cols = 3
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.1 * rows))
    end = data["end"]
    for ax, panel in zip(axes.flat, panels):
        ax.set_title(panel["title"], fontsize=9)
        if all("_info" in t["expr"] for t in panel["targets"]):
            # an info metric (the dashboard's table panel): its labels, as the table shows them
            ax.axis("off")
            rows = [series["metric"] for t in panel["targets"] for series in t["result"]]
            blocks = ["\n".join("%s: %s" % (k, v) for k, v in sorted(m.items()) if k != "__name__") for m in rows]
            text = "\n\n".join(blocks)
            ax.text(0.0, 1.0, text or "(no series)", fontsize=6.5, va="top", family="monospace", transform=ax.transAxes)
            continue
        for target in panel["targets"]:
            for series in target["result"]:
                xs = [(float(t) - end) / 60.0 for t, _v in series["values"]]
                ys = [float(v) for _t, v in series["values"]]
                ax.plot(xs, ys, linewidth=1.2, label=legend(target["legend"], series["metric"])[:40])
        if ax.lines:
            ax.legend(fontsize=6, loc="upper left")
        ax.tick_params(labelsize=7)
        ax.set_xlabel("minutes before the export", fontsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    when = datetime.datetime.fromtimestamp(end, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    fig.suptitle("blackwell.sglang dashboard, rendered from the monitoring scenario's Prometheus (%s): stand-in worker "
                 "and fake nvidia-smi, no GPU" % when, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(dest, dpi=80)
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
