"""Verify the sglang_benchmark scenario: records and reports on the controller, files on the host."""

import json
import os
import pathlib

import pytest

RUNS = ("20261129T010001Z", "20261129T010002Z", "20261129T010003Z")
KEY = "molecule-secret-key"


@pytest.fixture(scope="module")
def results():
    base = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY")
    if not base:
        pytest.skip("not running under Molecule")
    return pathlib.Path(base) / "benchmark-results"


@pytest.fixture(scope="module")
def hostdir(results):
    hosts = [p for p in results.iterdir() if p.name != "reports"]
    assert len(hosts) == 1, hosts
    return hosts[0]


def report(results, run):
    return json.loads((results / "reports" / run / "report.json").read_text())


def test_every_run_has_a_complete_report(results):
    for run in RUNS:
        for name in ("report.md", "report.json", "throughput.png"):
            assert (results / "reports" / run / name).stat().st_size > 0, (run, name)


def test_run1_skipped_without_service(results, hostdir):
    host = report(results, RUNS[0])["hosts"][0]
    assert host["status"] == "skipped"
    assert "service sglang.service is inactive" in host["reason"]
    assert json.loads((hostdir / RUNS[0] / "run.json").read_text())["status"] == "skipped"


def test_run2_benchmarked_with_the_manifest(results, hostdir):
    rep = report(results, RUNS[1])
    host = rep["hosts"][0]
    assert host["status"] == "benchmarked", host
    assert [lvl["max_concurrency"] for lvl in host["levels"]] == [1, 8]
    assert all(lvl["completed"] == n for lvl, n in zip(host["levels"], (4, 16)))
    assert host["manifest"]["release_id"] == "e2e0fake0001"
    assert host["meta"]["module"] == "sglang.benchmark.serving"
    assert not [f for f in rep["findings"] if f["kind"] in ("failed", "incomplete")]
    for name in ("c1.jsonl", "c8.jsonl", "c1.log", "c8.log", "manifest.json", "run.json"):
        assert (hostdir / RUNS[1] / name).is_file(), name
    assert "4/4 [" in (hostdir / RUNS[1] / "c1.log").read_text(errors="replace")  # the bar reached the end


def test_run3_regression_against_run2(results):
    rep = report(results, RUNS[2])
    assert rep["regression"] is True
    prev = [f for f in rep["findings"] if f["kind"] == "regression_previous"]
    assert {f["level"] for f in prev} == {1, 8}
    assert rep["hosts"][0]["previous"]["run_id"] == RUNS[1]


def test_api_key_is_nowhere_on_the_controller(results):
    for path in results.rglob("*"):
        if path.is_file() and path.suffix != ".png":
            assert KEY not in path.read_text(errors="replace"), path


def test_host_files_and_no_leftover_jobs(host):
    run_dir = "/var/tmp/sglang-benchmark/" + RUNS[1]
    for name in ("c1.jsonl", "c1.log", "c1.rc", "c8.jsonl", "c8.log", "c8.rc"):
        assert host.file(run_dir + "/" + name).exists, name
    assert host.file(run_dir + "/c8.rc").content_string.strip() == "0"
    assert host.file(run_dir).mode == 0o750
    jobs = host.run("ls /root/.ansible_async 2>/dev/null | wc -l").stdout.strip()
    assert jobs == "0", "async job files left behind"
