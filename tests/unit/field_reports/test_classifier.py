"""Field reports part 2: every kind's real log lines (and variants) through the journal/kernel-log classifier.

Cases: tests/fixtures/field_reports/journal_cases.json (lines from shared/domain/field-reports-2.md, provenance in
``source``; ``variant`` cases are other inputs of the same kind). The readiness waiter is driven with the same
lines to check that the argv reaches the classifier (N05/N06).
"""

import json
import os

import pytest

from conftest import FIXTURES
from ansible_collections.blackwell.sglang.plugins.module_utils import _journal, _readiness

with open(os.path.join(FIXTURES, "field_reports", "journal_cases.json")) as _handle:
    CASES = json.load(_handle)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kind_lines(case):
    result = _journal.classify(case["lines"], argv=case.get("argv"), context=case.get("context"))
    assert result["cause"] == case["expect"], result
    assert result["line"] in [line.strip() for line in case["lines"]]
    if case["expect"] != "unknown":
        assert result["remedy"] and result["summary"]
    else:
        assert result["line"] == case["lines"][-1]


def test_every_n_kind_has_a_case():
    kinds = set(c["kind"] for c in CASES)
    for kind in ("N01", "N03", "N04", "N05", "N06", "N07", "N09", "N13", "N16", "N18", "N19", "N20"):
        assert kind in kinds


@pytest.mark.parametrize("xid", [119, 154, 8, 79])
def test_wedge_verdict_is_reboot_not_restart(xid):
    result = _journal.classify(["NVRM: Xid (PCI:0000:01:00): %d, pid=1, name=python3, anything" % xid])
    assert result["cause"] == "gpu_wedged_xid_%d" % xid
    assert result["reboot_required"] is True and result["restart"] is False
    assert result["bus_id"] == "0000:01:00"
    assert "not a software configuration problem" in result["remedy"]


def test_wedge_outranks_a_later_nvidia_smi_failure():
    lines = ["NVRM: Xid (PCI:0000:01:00): 119, pid=6211, name=nvidia-smi, Timeout after 45s of waiting for RPC "
             "response from GPU0 GSP!",
             "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
             "NVIDIA driver is installed and running."]
    assert _journal.classify(lines)["cause"] == "gpu_wedged_xid_119"


def test_triton_ptxas_is_not_the_nvcc_rule_nor_oom():
    result = _journal.classify(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                                "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'"])
    assert result["cause"] == "triton_ptxas_too_old"
    assert "TRITON_PTXAS_PATH" in result["remedy"]


def test_generic_illegal_memory_access_never_blames_memory_size():
    result = _journal.classify(["RuntimeError: CUDA error: an illegal memory access was encountered"])
    assert result["cause"] == "illegal_memory_access"
    assert "mem_fraction" not in result["remedy"]


class Journal(object):
    def __init__(self, lines):
        self.lines = list(lines)

    def __call__(self):
        out, self.lines = self.lines, []
        return out


def _wait(lines, argv):
    clock = [0.0]
    return _readiness.wait_ready(
        http_get=lambda timeout: (None, "connection refused"), read_journal=Journal(lines),
        unit_state=lambda: ("failed", "failed"), clock=lambda: clock[0], sleep=lambda s: None,
        classify_context={"argv": argv})


def test_readiness_passes_argv_to_the_classifier():
    lines = ["torch.AcceleratorError: CUDA error: an illegal memory access was encountered"]
    assert _wait(lines, ["--speculative-algorithm", "EAGLE3"])["cause"]["cause"] == "spec_decode_crash"
    assert _wait(lines, ["--model-path", "/m"])["cause"]["cause"] == "illegal_memory_access"
