# -*- coding: utf-8 -*-
"""Report generator on recorded JSONL results (tests/fixtures/benchmark/results, see make_fixtures.py)."""

import json
import os
import shutil

import pytest
import yaml

from ansible_collections.blackwell.sglang.plugins.module_utils import _bench_report as br

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "benchmark", "results")
BASELINE_FILE = os.path.join(ROOT, "docs", "baselines", "qwen35-397b-nvfp4-8x-rtxpro6000.yml")
RUN = "20261120T120000Z"
PREV = "20261101T120000Z"


@pytest.fixture
def results(tmp_path):
    dest = tmp_path / "results"
    shutil.copytree(FIXTURES, str(dest))
    return str(dest)


@pytest.fixture
def baseline():
    with open(BASELINE_FILE) as handle:
        return yaml.safe_load(handle)


def _host(report, name):
    return next(h for h in report["hosts"] if h["host"] == name)


def test_fixture_lines_have_the_benchmark_key_set():
    """Every recorded line carries the documented keys (domain notes 5.3) and parses."""
    documented = {"tag", "backend", "dataset_name", "request_rate", "max_concurrency", "random_input_len",
                  "random_output_len", "random_range_ratio", "server_info", "duration", "completed",
                  "total_input_tokens", "total_output_tokens", "request_throughput", "input_throughput",
                  "output_throughput", "total_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
                  "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms", "p99_itl_ms",
                  "concurrency", "max_concurrent_requests"}
    path = os.path.join(FIXTURES, "gpu1", RUN, "c64.jsonl")
    with open(path) as handle:
        raw = json.loads(handle.readline())
    assert documented <= set(raw)
    rec = br.read_jsonl(path)[0]
    assert rec["max_concurrency"] == 64
    assert rec["output_throughput"] == pytest.approx(1893.0)
    assert rec["_source"].endswith("c64.jsonl:1")


def test_baseline_record_is_valid_and_cites_sources(baseline):
    points = br.validate_baseline(baseline)
    assert [(p["max_concurrency"], p["match"], p["output_throughput"]) for p in points] == [
        (1, "exact", 172.0), (64, "best_at_or_above", 2100.0)]
    assert all(p["source"] for p in points)


def test_report_numbers_baseline_and_previous(results, baseline):
    report = br.build_report(results, RUN, ["gpu1", "gpu2"], baseline=baseline, threshold_pct=5.0)
    gpu1 = _host(report, "gpu1")
    assert gpu1["status"] == "benchmarked"
    assert [r["max_concurrency"] for r in gpu1["levels"]] == [1, 64, 128]
    # baseline: 171.2 vs 172 -> -0.47 %; best of >=64 is c=128 2141.9 vs 2100 -> +2.0 %
    single, high = gpu1["baseline"]
    assert single["change_pct"] == pytest.approx((171.2 - 172) / 172 * 100)
    assert (high["measured_concurrency"], high["measured"]) == (128, pytest.approx(2141.9))
    assert high["change_pct"] == pytest.approx((2141.9 - 2100) / 2100 * 100)
    assert not single["regression"] and not high["regression"]
    # previous run found and compared level by level; c=128 2188.6 -> 2141.9 is -2.13 %, under 5 %
    assert gpu1["previous"]["run_id"] == PREV
    row128 = [r for r in gpu1["previous"]["rows"] if r["max_concurrency"] == 128][0]
    assert row128["change_pct"] == pytest.approx((2141.9 - 2188.6) / 2188.6 * 100)
    assert row128["regression"] is False
    # manifest summary
    man = gpu1["manifest"]
    assert man["release_id"] == "a1b2c3d4e5f6"
    assert man["versions"]["torch"] == "2.12.0.dev20260307+cu130"
    assert {"name": "trtllm", "verdict": "unsupported"} in man["probe"]["backends"]
    assert "fp4_gemm_backend=flashinfer_cudnn" in man["probe"]["recommended"]


def test_regression_against_baseline_is_flagged(results, baseline):
    report = br.build_report(results, RUN, ["gpu1", "gpu2"], baseline=baseline, threshold_pct=5.0)
    assert report["regression"] is True
    kinds = [(f["host"], f["kind"], f["level"]) for f in report["findings"]]
    # gpu2: best >=64 is 1575.0 at c=128, 25 % under 2100; c=1 170.1 is within 5 % of 172
    assert kinds == [("gpu2", "regression_baseline", 128)]
    assert "25.0% below the baseline 2100" in report["findings"][0]["message"]
    # gpu2 has no manifest and no previous run: unknown, not a crash
    gpu2 = _host(report, "gpu2")
    assert gpu2["manifest"]["present"] is False and gpu2["manifest"]["versions"]["sglang"] == "unknown"
    assert gpu2["previous"] is None


def test_threshold_controls_the_flag(results, baseline):
    # with 30 % allowed, gpu2's -25 % is no longer a regression
    report = br.build_report(results, RUN, ["gpu2"], baseline=baseline, threshold_pct=30.0)
    assert report["regression"] is False
    # with 1 % allowed, gpu1's -2.1 % against its previous run at c=128 is
    report = br.build_report(results, RUN, ["gpu1"], baseline=baseline, threshold_pct=1.0)
    assert ("gpu1", "regression_previous", 128) in [(f["host"], f["kind"], f["level"]) for f in report["findings"]]


def test_regression_against_previous_run(results):
    # make the current gpu1 c=64 run 20 % slower than its previous run
    path = os.path.join(results, "gpu1", RUN, "c64.jsonl")
    with open(path) as handle:
        rec = json.loads(handle.readline())
    rec["output_throughput"] = 1905.2 * 0.8
    with open(path, "w") as handle:
        handle.write(json.dumps(rec) + "\n")
    report = br.build_report(results, RUN, ["gpu1"], baseline=None, threshold_pct=5.0)
    found = [f for f in report["findings"] if f["kind"] == "regression_previous"]
    assert [(f["host"], f["level"]) for f in found] == [("gpu1", 64)]
    assert "20.0% below the previous run " + PREV in found[0]["message"]


def test_previous_run_with_other_lengths_is_not_compared(results):
    path = os.path.join(results, "gpu1", PREV, "c1.jsonl")
    with open(path) as handle:
        rec = json.loads(handle.readline())
    rec["random_output_len"] = 256
    rec["output_throughput"] = 9999.0
    with open(path, "w") as handle:
        handle.write(json.dumps(rec) + "\n")
    report = br.build_report(results, RUN, ["gpu1"], threshold_pct=5.0)
    row = [r for r in _host(report, "gpu1")["previous"]["rows"] if r["max_concurrency"] == 1][0]
    assert row["comparable"] is False and row["regression"] is False
    assert "1024/1024 vs 1024/256" in row["note"]


def test_missing_field_names_file_line_key_and_keeps_old_report(results, baseline):
    report_dir = os.path.join(results, "reports", RUN)
    good = br.build_report(results, RUN, ["gpu1"], baseline=baseline)
    br.write_report(good, report_dir, plot=False)
    before = dict((n, open(os.path.join(report_dir, n), "rb").read()) for n in os.listdir(report_dir))

    path = os.path.join(results, "gpu1", RUN, "c128.jsonl")
    with open(path) as handle:
        good_line = handle.readline()
    broken = json.loads(good_line)
    del broken["p99_tpot_ms"]
    with open(path, "w") as handle:  # line 1 intact, line 2 (an appended re-run) lacks a key
        handle.write(good_line)
        handle.write(json.dumps(broken) + "\n")
    with pytest.raises(br.BenchReportError) as err:
        br.build_report(results, RUN, ["gpu1"], baseline=baseline)
    assert err.value.path == path and err.value.line == 2 and err.value.key == "p99_tpot_ms"
    assert str(err.value).startswith("%s:2: key 'p99_tpot_ms': missing required key" % path)
    after = dict((n, open(os.path.join(report_dir, n), "rb").read()) for n in os.listdir(report_dir))
    assert after == before  # nothing overwritten, no temp files left behind


def test_non_numeric_and_invalid_json_are_located(tmp_path):
    bad = tmp_path / "c1.jsonl"
    bad.write_text('{"a": 1}\n\nnot json\n')
    with pytest.raises(br.BenchReportError) as err:
        br.parse_jsonl(bad.read_text().split("\n", 2)[2], str(bad))
    assert err.value.line == 1 and "not valid JSON" in str(err.value)
    rec = json.loads(open(os.path.join(FIXTURES, "gpu1", RUN, "c1.jsonl")).readline())
    rec["output_throughput"] = None  # the benchmark writes null when a metric could not be computed
    with pytest.raises(br.BenchReportError) as err:
        br.parse_jsonl("\n" + json.dumps(rec), "x.jsonl")
    assert (err.value.line, err.value.key) == (2, "output_throughput")


def test_incomplete_and_failed_levels(results):
    meta_path = os.path.join(results, "gpu1", RUN, "run.json")
    meta = json.load(open(meta_path))
    meta["levels"][1]["num_prompts"] = 300  # asked 300, the c64 file says 256 completed
    meta["levels"].append({"max_concurrency": 256, "num_prompts": 1024})
    meta["failures"] = [{"max_concurrency": 256, "message": "timed out after 1800 s (rc 124)"}]
    json.dump(meta, open(meta_path, "w"))
    report = br.build_report(results, RUN, ["gpu1"])
    assert report["failed"] is True and report["regression"] is False
    assert _host(report, "gpu1")["status"] == "failed"
    kinds = sorted((f["kind"], f["level"]) for f in report["findings"])
    assert kinds == [("failed", 256), ("incomplete", 64)]


def test_skipped_and_unknown_hosts(results):
    report = br.build_report(results, RUN, ["gpu1", "sandbox1", "gone"], skipped={"sandbox1": "no NVIDIA GPU"})
    assert _host(report, "sandbox1")["status"] == "skipped"
    assert _host(report, "sandbox1")["reason"] == "no NVIDIA GPU"
    assert _host(report, "gone")["status"] == "no result"
    md = br.render_markdown(report)
    assert "## sandbox1 (skipped)" in md and "Reason: no NVIDIA GPU" in md


def test_previous_run_that_is_malformed_is_passed_over(results):
    path = os.path.join(results, "gpu1", PREV, "c1.jsonl")
    with open(path, "w") as handle:
        handle.write("{}\n")
    report = br.build_report(results, RUN, ["gpu1"])
    gpu1 = _host(report, "gpu1")
    assert gpu1["previous"] is None
    assert any("previous run %s passed over" % PREV in n and "'max_concurrency'" in n for n in gpu1["notes"])


@pytest.mark.parametrize("manifest,expect", [
    (None, {"release_id": "unknown", "recommended": "unknown", "backends": []}),
    ("garbage", {"release_id": "unknown", "recommended": "unknown", "backends": []}),
    ({"release_id": "r1", "versions": "x", "probe": {"backends": [{"backend": "b12x", "ok": False}],
                                                     "recommended": "flashinfer_cutlass"}},
     {"release_id": "r1", "recommended": "flashinfer_cutlass", "backends": [{"name": "b12x", "verdict": "fail"}]}),
    ({"probe": {"backends": {"cutlass": True, "cudnn": "fail: no execution plans", "x": 3}}},
     {"release_id": "unknown", "recommended": "unknown",
      "backends": [{"name": "cudnn", "verdict": "fail: no execution plans"}, {"name": "cutlass", "verdict": "pass"},
                   {"name": "x", "verdict": "unknown"}]}),
])
def test_manifest_is_read_defensively(manifest, expect):
    out = br.summarize_manifest(manifest)
    assert out["release_id"] == expect["release_id"]
    assert out["probe"]["recommended"] == expect["recommended"]
    assert out["probe"]["backends"] == expect["backends"]


def test_release_role_manifest_schema_1():
    """The shape roles/sglang_release/tasks/manifest.yml writes (schema 1)."""
    manifest = {
        "schema": 1, "host": "gpu1",
        "release": {"id": "5d41402abc4b", "dir": "/opt/sglang/releases/5d41402abc4b", "key": {}},
        "sglang": {"repo": "https://github.com/sgl-project/sglang", "commit": "d28f35240a1b", "version": "0.5.9"},
        "python": "3.12.3", "torch": {"version": "2.12.0.dev20260307+cu130", "cuda": "13.0"},
        "packages": {"flashinfer_python": "0.6.4", "sglang-kernel": "0.4.0", "torch": "2.12.0.dev20260307+cu130"},
        "wheels": {}, "unit": {"path": "/etc/systemd/system/sglang.service", "sha256": None},
        "probe": {"recommended": {"fp4_gemm_backend": "flashinfer_cudnn", "moe_runner_backend": None},
                  "device": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                  "verdicts": {"cudnn": "pass", "cutlass": "fail_zeros", "trtllm": None}},
    }
    out = br.summarize_manifest(manifest)
    assert out["release_id"] == "5d41402abc4b"
    assert out["versions"] == {"sglang": "0.5.9", "sgl_kernel": "0.4.0", "torch": "2.12.0.dev20260307+cu130",
                               "cuda": "13.0", "flashinfer": "0.6.4"}
    assert out["commits"] == {"sglang": "d28f35240a1b"}
    assert out["probe"]["backends"] == [{"name": "cudnn", "verdict": "pass"},
                                        {"name": "cutlass", "verdict": "fail_zeros"},
                                        {"name": "trtllm", "verdict": "unknown"}]
    assert out["probe"]["recommended"] == "fp4_gemm_backend=flashinfer_cudnn"
    assert out["probe"]["device"].startswith("NVIDIA RTX PRO 6000")


def test_unreadable_manifest_is_a_note_not_a_crash(results):
    with open(os.path.join(results, "gpu1", RUN, "manifest.json"), "w") as handle:
        handle.write("{truncated")
    report = br.build_report(results, RUN, ["gpu1"])
    gpu1 = _host(report, "gpu1")
    assert gpu1["manifest"]["present"] is False
    assert any(n.startswith("manifest.json unreadable") for n in gpu1["notes"])


def test_write_report_files_plot_and_idempotence(results, baseline):
    pytest.importorskip("matplotlib")
    report = br.build_report(results, RUN, ["gpu1", "gpu2"], baseline=baseline)
    report_dir = os.path.join(results, "reports", RUN)
    first = br.write_report(report, report_dir)
    assert first["changed"] is True
    png = open(first["paths"]["plot"], "rb").read()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000
    md = open(first["paths"]["markdown"]).read()
    assert "![output tok/s against concurrency](throughput.png)" in md
    assert "| 128 | 512 |" in md and "regression baseline** `gpu2`" in md
    assert "Baseline lengths: not recorded by the original deployment" in md
    assert json.load(open(first["paths"]["json"]))["regression"] is True
    # same input -> same bytes -> not changed
    again = br.write_report(br.build_report(results, RUN, ["gpu1", "gpu2"], baseline=baseline), report_dir)
    assert again["changed"] is False
    assert sorted(os.listdir(report_dir)) == ["report.json", "report.md", "throughput.png"]
    if os.environ.get("BENCH_REPORT_KEEP"):  # keep a copy to look at the plot
        shutil.copytree(report_dir, os.environ["BENCH_REPORT_KEEP"], dirs_exist_ok=True)


def test_check_mode_writes_nothing(results, baseline):
    report = br.build_report(results, RUN, ["gpu1"], baseline=baseline)
    report_dir = os.path.join(results, "reports", RUN)
    out = br.write_report(report, report_dir, plot=False, check_mode=True)
    assert out["changed"] is True and not os.path.exists(report_dir)


def test_bad_inputs_rejected(results):
    with pytest.raises(ValueError):
        br.build_report(results, "yesterday", ["gpu1"])
    with pytest.raises(br.BenchReportError):
        br.build_report(results, RUN, ["gpu1"], threshold_pct=0)
    with pytest.raises(br.BenchReportError) as err:
        br.validate_baseline({"points": [{"max_concurrency": 1, "output_throughput": -3}]})
    assert err.value.key == "output_throughput"


def test_line_written_by_the_real_benchmark_client():
    """tests/fixtures/benchmark/real/: written by `python -m sglang.benchmark.serving` (sglang 0.5.23 from PyPI)
    against tests/fixtures/benchmark/e2e/fake_sglang_server.py, --max-concurrency 4, 16 prompts, 64/32 tokens."""
    path = os.path.join(ROOT, "tests", "fixtures", "benchmark", "real", "sglang-0.5.23-fake-server-c4.jsonl")
    rec = br.read_jsonl(path)[0]
    assert rec["max_concurrency"] == 4 and rec["completed"] == 16
    assert (rec["random_input_len"], rec["random_output_len"], rec["random_range_ratio"]) == (64, 32, 1.0)
    # the benchmark's own arithmetic: 16 x 32 output tokens over the measured duration
    assert rec["output_throughput"] == pytest.approx(16 * 32 / rec["duration"], rel=1e-6)
    assert set(br.REQUIRED_KEYS) <= set(json.loads(open(path).readline()))


def test_role_argument_specs_match_defaults():
    """Every default of roles/sglang_benchmark is documented with the same value in meta/argument_specs.yml."""
    role = os.path.join(ROOT, "roles", "sglang_benchmark")
    defaults = yaml.safe_load(open(os.path.join(role, "defaults", "main.yml")))
    spec = yaml.safe_load(open(os.path.join(role, "meta", "argument_specs.yml")))["argument_specs"]["main"]["options"]
    assert set(defaults) == set(spec)
    for name, value in defaults.items():
        if "default" in spec[name]:
            assert spec[name]["default"] == value, name
        assert name.startswith("sglang_benchmark_")


def test_unreadable_run_record_is_a_failure_naming_it(results):
    """A run.json that is not JSON (a trailing literal backslash-n once made it so) is a failure, not "no result"."""
    run_dir = os.path.join(results, "broken", RUN)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "run.json"), "w") as handle:
        handle.write('{"status": "skipped"}\\n')
    host = _host(br.build_report(results, RUN, ["broken"]), "broken")
    assert host["status"] == "failed"
    assert host["reason"].startswith("run.json unreadable: ")
