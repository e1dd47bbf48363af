"""gpu_health on recorded kernel logs (tests/fixtures/gpu_health/kernel) and nvidia-smi doubles
(tests/fixtures/gpu_health/smi_*: fake_nvidia_smi.py answering --query-gpu like the driver does)."""

import datetime
import json
import os
import shutil
import subprocess
import time

import pytest

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu_health as gh
from conftest import FIXTURES

GH = os.path.join(FIXTURES, "gpu_health")


def klog(name):
    return os.path.join(GH, "kernel", name)


def smi(scenario):
    return os.path.join(GH, scenario, "nvidia-smi")


def verdict(log=None, scenario=None, expected=None, since=None, timeout=10):
    result, _log = gh.collect(smi(scenario) if scenario else None, kernel_log_source="file" if log else "none",
                              kernel_log_path=klog(log) if log else None, since=since, expected_gpu_count=expected,
                              timeout=timeout)
    return result


def kinds(result):
    return sorted(set([f["kind"] for f in result["host_findings"]] + [f["kind"] for g in result["gpus"] for f in g["findings"]]))


# ---- kernel log parsing ------------------------------------------------------------------------------------------

def test_xid79_line_in_the_drivers_format():
    with open(klog("xid79_fell_off_bus.log")) as handle:
        log = gh.parse_kernel_log(handle.read())
    assert [x["xid"] for x in log["xids"]] == [79]
    event = log["xids"][0]
    assert event["bus_id"] == "0000:41:00.0"
    assert (event["pid"], event["process"]) == ("2291107", "python3")
    assert event["message"] == "GPU has fallen off the bus."
    assert event["kind"] == "gpu_wedged_xid_79"
    assert event["time"] == "2026-11-30T21:47:12+00:00"
    assert log["fell_off_bus"] == ["0000:41:00.0"]


def test_n03_sequence_gives_three_wedge_kinds_on_one_bus():
    with open(klog("gsp_wedge_n03.log")) as handle:
        log = gh.parse_kernel_log(handle.read())
    assert [(x["xid"], x["kind"]) for x in log["xids"]] == [
        (8, "gpu_wedged_xid_8"), (119, "gpu_wedged_xid_119"), (154, "gpu_wedged_xid_154")]
    assert {x["bus_id"] for x in log["xids"]} == {"0000:01:00.0"}
    assert log["xids"][2]["recovery_action"] == "GPU Reset Required"
    assert log["xids"][1]["process"] == "nvidia-smi"
    assert log["xids"][1]["message"].startswith("Timeout after 45s of waiting for RPC response from GPU0 GSP!")


def test_dmesg_iso_and_old_format_without_pci_prefix():
    with open(klog("dmesg_iso_xid154.log")) as handle:
        log = gh.parse_kernel_log(handle.read())
    assert [(x["xid"], x["bus_id"], x["recovery_action"]) for x in log["xids"]] == [
        (154, "0000:02:00.0", "Node Reboot Required")]
    assert log["xids"][0]["time"].startswith("2026-11-30T19:05:44")


def test_since_drops_older_lines():
    with open(klog("old_xid79_then_app.log")) as handle:
        text = handle.read()
    assert [x["xid"] for x in gh.parse_kernel_log(text)["xids"]] == [79, 13]
    since = gh.parse_since("2026-11-30T10:00:00Z")
    assert [x["xid"] for x in gh.parse_kernel_log(text, since=since)["xids"]] == [13]


@pytest.mark.parametrize("text,expect", [
    ("1764540000", datetime.datetime(2025, 11, 30, 22, 0, tzinfo=datetime.timezone.utc)),
    ("@1764540000", datetime.datetime(2025, 11, 30, 22, 0, tzinfo=datetime.timezone.utc)),
    ("2026-11-30T22:00:00Z", datetime.datetime(2026, 11, 30, 22, 0, tzinfo=datetime.timezone.utc)),
    ("2026-11-30 23:00:00+01:00", datetime.datetime(2026, 11, 30, 22, 0, tzinfo=datetime.timezone.utc)),
    ("2026-11-30T22:00:00", datetime.datetime(2026, 11, 30, 22, 0, tzinfo=datetime.timezone.utc)),
    ("boot", None), ("", None),
])
def test_parse_since(text, expect):
    assert gh.parse_since(text) == expect


def test_parse_since_relative_and_bad():
    now = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.timezone.utc)
    assert gh.parse_since("-2h", now=now) == datetime.datetime(2026, 12, 1, 10, 0, tzinfo=datetime.timezone.utc)
    with pytest.raises(ValueError, match="yesterday"):
        gh.parse_since("yesterday")


def test_journal_argv_reads_only_the_current_boot():
    since = gh.parse_since("@1764540000")
    argv = gh.kernel_log_argv("journal", since, journalctl="/usr/bin/journalctl")
    assert argv[:4] == ["/usr/bin/journalctl", "-k", "-b", "0"]
    assert argv[-2:] == ["--since", "@1764540000"]


# ---- verdicts: kernel log + nvidia-smi ---------------------------------------------------------------------------

def test_healthy_host():
    result = verdict("healthy_boot.log", "smi_healthy_pro6000_x2", expected=2)
    assert result["status"] == "healthy", result["summary"]
    assert result["gpu_count"] == 2
    assert [g["status"] for g in result["gpus"]] == ["healthy", "healthy"]
    assert result["remedy"] == "" and not result["reboot_required"] and not result["drain"]
    state = result["gpus"][0]["state"]
    assert state["persistence_mode"] == "Enabled" and state["power_limit_w"] == 600.0
    assert state["clocks_event_reasons"] == 0
    assert state["retired_pages_pending"] is None          # [N/A] on a row-remapping GPU


def test_xid79_with_the_gpu_gone_from_nvidia_smi():
    result = verdict("xid79_fell_off_bus.log", "smi_one_gone_pro6000_x2", expected=2)
    assert result["status"] == "unhealthy"
    assert result["reboot_required"] and result["drain"]
    assert "gpu_wedged_xid_79" in kinds(result) and "gpus_missing" in kinds(result)
    missing = [f for f in result["host_findings"] if f["kind"] == "gpus_missing"][0]
    assert missing["bus_ids"] == ["0000:41:00.0"] and missing["missing"] == 1
    assert "reboot or power-cycle" in result["remedy"]
    assert "Xid 79 on 0000:41:00.0" in result["summary"]
    assert result["xid_counts"] == {"79": 1}
    # the GPU that is still there is fine
    assert [(g["bus_id"], g["status"]) for g in result["gpus"]] == [("0000:c1:00.0", "healthy")]


def test_xid_on_a_visible_gpu_is_that_gpus_finding():
    result = verdict("ecc_xid48_63.log", "smi_healthy_pro6000_x2", expected=2)
    by_bus = {g["bus_id"]: g for g in result["gpus"]}
    assert by_bus["0000:41:00.0"]["status"] == "healthy"
    assert by_bus["0000:c1:00.0"]["status"] == "unhealthy"
    assert [f["kind"] for f in by_bus["0000:c1:00.0"]["findings"]] == ["gpu_ecc_xid_48", "gpu_ecc_xid_63"]
    assert result["remedy"].startswith("drain the host and replace the GPU")
    assert not result["reboot_required"]


def test_nvidia_smi_failing_after_gsp_xids_is_a_wedge_not_a_missing_driver():
    # F-N03 expectation: the "couldn't communicate with the NVIDIA driver" message after Xid 119/154
    result = verdict("gsp_wedge_n03.log", "smi_driver_lost", expected=1)
    assert result["status"] == "unhealthy" and result["reboot_required"]
    assert "gpu_wedged" in kinds(result)
    assert "nvidia_smi_driver_not_loaded" not in kinds(result)
    assert {"gpu_wedged_xid_8", "gpu_wedged_xid_119", "gpu_wedged_xid_154"} <= set(kinds(result))


def test_nvidia_smi_failing_without_xids_is_the_driver():
    result = verdict("healthy_boot.log", "smi_driver_lost", expected=1)
    assert kinds(result) == ["nvidia_smi_driver_not_loaded"]
    assert result["status"] == "unhealthy" and not result["reboot_required"]


def test_hanging_nvidia_smi_is_a_finding_within_the_timeout():
    start = time.time()
    result = verdict("healthy_boot.log", "smi_hang", expected=1, timeout=2)
    assert time.time() - start < 15
    assert kinds(result) == ["nvidia_smi_hang"]
    assert result["status"] == "unhealthy" and result["reboot_required"]
    assert result["nvidia_smi"]["result"]["timed_out"] is True


def test_telemetry_na_is_the_wedge_symptom():
    result = verdict("healthy_boot.log", "smi_telemetry_na_pro6000_x2", expected=2)
    gpu0 = result["gpus"][0]
    assert gpu0["status"] == "unhealthy"
    assert [f["kind"] for f in gpu0["findings"]] == ["telemetry_unavailable"]
    assert gpu0["state"]["temperature_c"] is None
    assert result["gpus"][1]["status"] == "healthy"


def test_ecc_remap_throttle_and_persistence():
    result = verdict("healthy_boot.log", "smi_ecc_pro6000_x2", expected=2)
    gpu0, gpu1 = result["gpus"]
    assert gpu0["status"] == "unhealthy"
    assert [f["kind"] for f in gpu0["findings"]] == [
        "ecc_uncorrected", "ecc_corrected", "row_remap_pending", "rows_remapped_uncorrectable"]
    assert gpu1["status"] == "degraded"
    assert [f["kind"] for f in gpu1["findings"]] == [
        "persistence_off", "clocks_hw_slowdown", "clocks_hw_thermal_slowdown"]     # 0x48 = 0x40 | 0x8
    assert result["status"] == "unhealthy" and result["remedy"].startswith("drain the host and replace")


def test_geforce_without_ecc_and_an_older_nvidia_smi():
    result = verdict("healthy_boot.log", "smi_geforce_5090_x2_old_fields", expected=2)
    assert result["status"] == "healthy", result["summary"]
    assert result["nvidia_smi"]["unsupported_fields"] == ["remapped_rows.failure", "clocks_event_reasons.active"]
    assert result["gpus"][0]["state"]["ecc_mode"] is None


def test_no_gpu_host_is_healthy_unless_gpus_are_expected():
    assert verdict("healthy_boot.log", None)["status"] == "healthy"
    assert verdict("healthy_boot.log", "smi_no_devices")["status"] == "healthy"
    result = verdict("healthy_boot.log", "smi_no_devices", expected=8)
    assert kinds(result) == ["nvidia_smi_no_devices"] and result["status"] == "unhealthy"
    assert kinds(verdict(None, None, expected=8)) == ["nvidia_smi_missing"]


def test_rminit_bios_remedy():
    result = verdict("rminit_bar_n20.log", "smi_no_devices", expected=1)
    finding = [f for f in result["host_findings"] if f["kind"] == "rminit_adapter_failed"][0]
    assert "Above 4G Decoding and Resizable BAR" in finding["remedy"]


def test_unreadable_kernel_log_is_reported():
    result, _log = gh.collect(None, kernel_log_source="file", kernel_log_path="/nonexistent/kern.log")
    assert kinds(result) == ["kernel_log_unreadable"]
    assert result["status"] == "healthy"


def test_run_bounded_reports_a_missing_command():
    res = gh.run_bounded(["/nonexistent/nvidia-smi"], 5)
    assert res.rc is None and "cannot run" in res.error


def test_recorded_layout_is_understood(tmp_path):
    # the layout tests/gpu/record_gpu_health.sh saves (fields.txt + query.csv), as the fake reads it
    scen = tmp_path / "rec"
    scen.mkdir()
    fields = [f[0] for f in gh.STATE_FIELDS]
    (scen / "fields.txt").write_text(",".join(fields) + "\n")
    values = json.load(open(os.path.join(GH, "smi_healthy_pro6000_x2", "gpus.json")))
    (scen / "query.csv").write_text("".join(", ".join(str(g[f]) for f in fields) + "\n" for g in values))
    os.symlink(os.path.join(GH, "fake_nvidia_smi.py"), str(scen / "nvidia-smi"))
    result, _log = gh.collect(str(scen / "nvidia-smi"), kernel_log_source="none", expected_gpu_count=2)
    assert result["status"] == "healthy" and result["gpu_count"] == 2


RECORDED_H200 = os.path.join(GH, "h200_recorded")


@pytest.mark.skipif(not os.path.isdir(RECORDED_H200), reason="no H200 recording yet (tests/gpu/record_gpu_health.sh)")
def test_h200_recorded_healthy_verdict(tmp_path):
    # the real H200's answer (fields.txt + query.csv) replayed through the fake, judged again
    with open(os.path.join(RECORDED_H200, "verdict.json")) as handle:
        recorded = json.load(handle)
    for name in ("fields.txt", "query.csv", "kernel.log"):
        shutil.copy(os.path.join(RECORDED_H200, name), str(tmp_path))
    os.symlink(os.path.join(GH, "fake_nvidia_smi.py"), str(tmp_path / "nvidia-smi"))
    result, _log = gh.collect(str(tmp_path / "nvidia-smi"), kernel_log_source="file",
                              kernel_log_path=str(tmp_path / "kernel.log"),
                              expected_gpu_count=recorded["expected_gpu_count"])
    assert result["status"] == recorded["status"] == "healthy", result["summary"]
    assert [g["name"] for g in result["gpus"]] == [g["name"] for g in recorded["gpus"]]
    assert [g["state"] for g in result["gpus"]] == [g["state"] for g in recorded["gpus"]]


def test_module_runs_under_ansible_and_plans_the_gpu_policy(tmp_path):
    models = [{"model": "RTX PRO 6000", "power_limit_w": 450}]
    out = ansible_run.module("blackwell.sglang.gpu_health", {
        "kernel_log_source": "file", "kernel_log_path": klog("xid79_fell_off_bus.log"),
        "nvidia_smi": smi("smi_one_gone_pro6000_x2"), "expected_gpu_count": 2, "policy_models": models},
        tmp_path, env={"ANSIBLE_CONFIG": str(tmp_path / "none.cfg")})
    assert not out.get("failed"), out
    assert out["status"] == "unhealthy" and out["changed"] is False
    assert out["xids"][0]["kind"] == "gpu_wedged_xid_79"
    # what sglang_monitoring's GPU policy applies: the plan of these GPUs under these models
    assert out["policy_plan"] == gh.policy_plan(out["gpus"], models) and out["policy_plan"]
    assert {p["model"] for p in out["policy_plan"]} == {"RTX PRO 6000"}


# ---- GPU policy plan (gpu_health policy_models) and the sweep table's rows (gpu_health table_row) -----

def test_policy_plan_changes_only_what_differs():
    result = verdict(None, "smi_ecc_pro6000_x2", expected=2)
    models = [{"model": "GeForce", "power_limit_w": 400},
              {"model": "RTX PRO 6000", "power_limit_w": 600.2, "application_clocks": {"memory_mhz": 13365, "graphics_mhz": 2400}}]
    plan = gh.policy_plan(result["gpus"], models)
    assert [(p["index"], p["model"], p["persistence"], p["set_power"], p["clocks"], p["clocks_now"], p["set_clocks"])
            for p in plan] == [(0, "RTX PRO 6000", True, False, "13365,2400", "13365,2617", True),
                               (1, "RTX PRO 6000", False, False, "13365,2400", "13365,2617", True)]
    assert gh.policy_plan(result["gpus"], [{"model": "RTX PRO 6000", "power_limit_w": 450}])[0]["set_power"] is True
    assert gh.policy_plan(result["gpus"], [])[0]["model"] is None


def test_fake_nvidia_smi_keeps_the_policy(tmp_path):
    shutil.copy(os.path.join(GH, "smi_healthy_pro6000_x2", "gpus.json"), str(tmp_path))
    os.symlink(os.path.join(GH, "fake_nvidia_smi.py"), str(tmp_path / "nvidia-smi"))
    subprocess.run([str(tmp_path / "nvidia-smi"), "-i", "1", "-pl", "450"], check=True, capture_output=True, timeout=30)
    result, _log = gh.collect(str(tmp_path / "nvidia-smi"), kernel_log_source="none")
    assert [g["state"]["power_limit_w"] for g in result["gpus"]] == [600.0, 450.0]


def test_table_row_of_a_verdict():
    """gpu_health's table_row: the host's row of playbooks/health.yml's fleet table."""
    sick = verdict("xid79_fell_off_bus.log", "smi_one_gone_pro6000_x2", expected=2)
    assert gh.table_row(sick)[:3] == ["unhealthy", "1/2", "79"]
    assert gh.table_row(sick)[3].endswith(" -> " + sick["remedy"])
    assert gh.table_row(verdict("healthy_boot.log", "smi_healthy_pro6000_x2", expected=2))[:3] == ["healthy", "2/2", "-"]


def test_policy_plan_lists_the_nvidia_smi_changes():
    result = verdict(None, "smi_ecc_pro6000_x2", expected=2)
    plan = gh.policy_plan(result["gpus"], [{"model": "RTX PRO 6000", "power_limit_w": 450,
                                            "application_clocks": {"memory_mhz": 13365, "graphics_mhz": 2400}}])
    assert [c["args"] for c in plan[0]["changes"]] == [["-i", "0", "-pl", "450"], ["-i", "0", "-ac", "13365,2400"]]
    assert plan[0]["changes"][1]["label"] == "GPU 0 %s: 13365,2617 -> 13365,2400" % plan[0]["name"]
    assert gh.policy_plan(result["gpus"], [])[0]["changes"] == []
