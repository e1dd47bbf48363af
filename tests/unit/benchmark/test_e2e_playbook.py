# -*- coding: utf-8 -*-
"""playbooks/benchmark.yml end to end against a fake SGLang server with the real benchmark client (slow).

Runs tests/fixtures/benchmark/e2e/run_e2e.sh, which asserts the outcomes itself (reports written with the plot,
regression against the previous run fails the play, a failed level is reported and stops the host, the skipped
host is listed, the API key appears nowhere). Needs BENCH_VENV: a venv where ``sglang.benchmark.serving`` imports
(``pip install sglang --no-deps`` plus its client-side imports, torch included); it takes minutes.
"""

import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("BENCH_VENV"), reason="BENCH_VENV (venv with the SGLang benchmark client) not set")
def test_benchmark_playbook_end_to_end(tmp_path):
    script = os.path.join(ROOT, "tests", "fixtures", "benchmark", "e2e", "run_e2e.sh")
    proc = subprocess.run(["bash", script, str(tmp_path / "e2e")], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "e2e OK" in proc.stdout
    for run in ("20261129T000001Z", "20261129T000002Z", "20261129T000003Z"):
        assert (tmp_path / "e2e" / "results" / "reports" / run / "report.md").is_file()
