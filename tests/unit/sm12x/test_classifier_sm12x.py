"""Field reports part 3 (SM12x family kinds) through the journal/kernel-log classifier (_journal.classify, which
sglang_readiness and gpu_facts use) and the readiness waiter.

Cases: tests/fixtures/field_reports/journal_cases_sm12x.json and journal_cases_fr3.json (the kinds S03, S06, S07,
S08, S10, S15, S22): lines from shared/domain/field-reports-3.md with their provenance in ``source``; ``variant``
cases are other inputs of the same kind, and the ``vs`` cases are neighbours that must keep their own verdict.
``remedy_has`` / ``summary_has`` name what the remedy or summary must say (the fix, the file, the keys)."""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _journal, _readiness

# paths from this file (the module name conftest depends on the collection order)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

CASES = []
for _name in ("journal_cases_sm12x.json", "journal_cases_fr3.json"):
    with open(os.path.join(FIXTURES, "field_reports", _name)) as _handle:
        CASES += json.load(_handle)

FR3_CAUSES = {"nccl_conf_override", "host_compiler_too_new", "cutlass_dsl_version_skew", "triton_kernels_skew",
              "cuda_major_mix", "triton_tma_scatter_sm12x", "nccl_build_wedge"}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kind_lines(case):
    result = _journal.classify(case["lines"], context=case.get("context"))
    assert result["cause"] == case["expect"], result
    if case["expect"] != "unknown":
        assert result["remedy"] and result["summary"]
        assert result["line"] in [line.strip() for line in case["lines"]]
    for word in case.get("remedy_has", []):
        assert word in result["remedy"], (word, result["remedy"])
    for word in case.get("summary_has", []):
        assert word in result["summary"], (word, result["summary"])


def test_arch_gap_names_the_missing_arch_of_the_gpu():
    line = ["RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device"]
    gb10 = _journal.classify(line, context={"compute_capability": "12.1"})
    assert gb10["missing_arch"] == "sm_121a" and "sm_121a" in gb10["summary"] and "sm_121a" in gb10["remedy"]
    rtx = _journal.classify(line, context={"compute_capability": "12.0"})
    assert rtx["missing_arch"] == "sm_120a"


def test_scheduler_kill_without_oom_killer_offers_no_memory_remedy():
    case = next(c for c in CASES if c["id"] == "S19-scheduler-9-no-oom-killer")
    result = _journal.classify(case["lines"])
    assert "mem_fraction" not in result["remedy"] and "--attention-backend triton" in result["remedy"]


def test_gb10_oom_is_not_restarted_in_a_loop():
    case = next(c for c in CASES if c["id"] == "N18-gb10-oom-killer-alone")
    result = _journal.classify(case["lines"], context=case["context"])
    assert result["restart"] is False and "MemAvailable" in result["remedy"]


def test_every_new_kind_has_a_case_and_a_neighbour():
    kinds = {c["expect"] for c in CASES}
    assert FR3_CAUSES <= kinds
    for kind in ("S03", "S06", "S07", "S08", "S10", "S15", "S22"):
        assert any(c["id"].startswith(kind + "-vs-") for c in CASES), kind


def test_s10_is_ahead_of_the_cuda12_library_rule_and_names_both_majors():
    case = next(c for c in CASES if c["id"] == "S10-sglang22833-nvrtc-cublas")
    result = _journal.classify(case["lines"])
    assert result["cuda_majors"] == [12, 13]
    assert result["matches"].index("cuda_major_mix") < result["matches"].index("sgl_kernel_cuda_major_mismatch")


def test_s15_is_not_the_ptxas_arch_rule():
    case = next(c for c in CASES if c["id"] == "S15-triton11859-scatter4-sm120a")
    assert "triton_ptxas_too_old" not in _journal.classify(case["lines"])["matches"]


def test_s06_remedy_never_suggests_the_override_flag():
    case = next(c for c in CASES if c["id"] == "S06-hostconfig-guard")
    remedy = _journal.classify(case["lines"])["remedy"]
    assert "do not pass -allow-unsupported-compiler" in remedy


def test_s03_reports_the_files_found():
    case = next(c for c in CASES if c["id"] == "S03-aicad1-hang-after-init-complete")
    result = _journal.classify(case["lines"], context=case["context"])
    assert result["nccl_conf_files"] == [
        "/etc/nccl.conf (NCCL_IB_USE_INLINE, NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS)"]


class Journal(object):
    def __init__(self, lines):
        self.lines = list(lines)

    def __call__(self):
        out, self.lines = self.lines, []
        return out


def test_readiness_passes_the_compute_capability_to_the_sm12x_rules():
    lines = ["kernel: python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0"]

    def wait(cc):
        return _readiness.wait_ready(
            http_get=lambda timeout: (None, "connection refused"), read_journal=Journal(lines),
            unit_state=lambda: ("failed", "failed"), clock=lambda: 0.0, sleep=lambda s: None,
            classify_context={"argv": [], "compute_capability": cc})["cause"]["cause"]

    assert wait("12.1") == "gb10_oom_killed"
    assert wait("12.0") == "unknown"


def _stalled(lines, context):
    clock = {"t": 0.0}

    def sleep(seconds):
        clock["t"] += seconds

    return _readiness.wait_ready(
        http_get=lambda timeout: (None, "refused: connection refused"), read_journal=Journal(lines),
        unit_state=lambda: ("activating", "start"), clock=lambda: clock["t"], sleep=sleep, stall_timeout=60.0,
        max_wait=600.0, tp_size=2, classify_context=dict(context, argv=[]))


def test_readiness_names_the_nccl_config_file_before_the_p2p_hang():
    case = next(c for c in CASES if c["id"] == "S03-aicad1-hang-after-init-complete")
    with_file = _stalled(case["lines"], case["context"])
    assert with_file["reason"] == "stalled" and with_file["cause"]["cause"] == "nccl_conf_override"
    # without such a file the waiter keeps its B28 verdict for a TP > 1 stall after Init COMPLETE
    assert _stalled(case["lines"], {})["cause"]["cause"] == "nccl_p2p_hang"


def test_readiness_passes_the_gb10_context_to_the_wedge_rule():
    case = next(c for c in CASES if c["id"] == "S22-vllm42354-watchdog-gb10")
    assert _stalled(case["lines"], {"compute_capability": "12.1"})["cause"]["cause"] == "nccl_build_wedge"
