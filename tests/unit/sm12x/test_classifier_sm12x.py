"""Field reports part 3 (SM12x family kinds) through the journal/kernel-log classifier (_journal.classify, which
sglang_readiness and gpu_facts use) and the readiness waiter.

Cases: tests/fixtures/field_reports/journal_cases_sm12x.json (lines from shared/domain/field-reports-3.md with their
provenance in ``source``; ``variant`` cases are other inputs of the same kind, and the ``vs`` cases are neighbours
that must keep their own verdict)."""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _journal, _readiness

# paths from this file (the module name conftest depends on the collection order)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

with open(os.path.join(FIXTURES, "field_reports", "journal_cases_sm12x.json")) as _handle:
    CASES = json.load(_handle)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kind_lines(case):
    result = _journal.classify(case["lines"], context=case.get("context"))
    assert result["cause"] == case["expect"], result
    if case["expect"] != "unknown":
        assert result["remedy"] and result["summary"]
        assert result["line"] in [line.strip() for line in case["lines"]]


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
