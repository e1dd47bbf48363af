# -*- coding: utf-8 -*-
"""The GPU textfile written on a real GPU (NVIDIA H200, driver 580.159.04, 2026-12-01) against the alerts and dashboard.

``tests/fixtures/gpu_health/h200_recorded/blackwell_sglang_gpu.prom`` is the output of
``roles/sglang_monitoring/files/blackwell_sglang_textfile.py gpu`` run on the GPU machine, with gpu_health's own code
installed beside it as the role installs it (blackwell_gpu/). These tests check it is valid exposition format
(``promtool check metrics``) and that every GPU series the alert rules and the Grafana dashboard query is in it, so
a panel or an alert is not built on a name that the real collector does not write.
"""

import os
import re
import shutil
import subprocess

import pytest

from conftest import FIXTURES, ROOT

PROM = os.path.join(FIXTURES, "gpu_health", "h200_recorded", "blackwell_sglang_gpu.prom")
DASHBOARD = os.path.join(ROOT, "roles", "sglang_prometheus", "files", "blackwell-sglang-dashboard.json")
RULES = os.path.join(ROOT, "roles", "sglang_prometheus", "templates", "blackwell-sglang.rules.yml.j2")
PROMTOOL = shutil.which("promtool")
# a metric name of the GPU collector (the rules' group name `blackwell_sglang_gpu` is not a metric)
GPU_METRIC = re.compile(r"\bblackwell_sglang_gpus?_[a-z_]+\b")


def _written():
    with open(PROM, encoding="utf-8") as handle:
        return {line.split("{")[0].split(" ")[0] for line in handle if line.strip() and not line.startswith("#")}


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus; tests/sandbox/setup-host.sh installs it)")
def test_recorded_textfile_is_valid_exposition_format():
    with open(PROM, "rb") as handle:
        proc = subprocess.run([PROMTOOL, "check", "metrics"], stdin=handle, capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_real_gpu_reads_healthy_in_the_textfile():
    with open(PROM, encoding="utf-8") as handle:
        text = handle.read()
    assert re.search(r"^blackwell_sglang_gpu_host_health 0$", text, re.M)
    assert re.search(r"^blackwell_sglang_gpu_nvidia_smi_up 1$", text, re.M)
    assert re.search(r'^blackwell_sglang_gpu_health\{gpu="0",[^}]*name="NVIDIA H200"[^}]*\} 0$', text, re.M)


@pytest.mark.parametrize("source", [DASHBOARD, RULES], ids=["dashboard", "alert-rules"])
def test_every_gpu_series_queried_is_written_by_the_real_collector(source):
    with open(source, encoding="utf-8") as handle:
        used = set(GPU_METRIC.findall(handle.read()))
    # the Xid series is written with one sample per Xid seen: the healthy H200 wrote its HELP/TYPE only
    with open(PROM, encoding="utf-8") as handle:
        declared = set(re.findall(r"^# TYPE (\S+) ", handle.read(), re.M))
    assert used, "no GPU series found in %s: the pattern is stale" % source
    missing = sorted(used - (_written() | declared))
    assert not missing, "%s queries GPU series the real collector does not write: %s" % (os.path.basename(source), missing)
