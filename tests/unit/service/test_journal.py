"""The journal classifier on field-report lines (tests/fixtures/service/journal/cases.json)."""

import json
import os

import pytest

from conftest import FIXTURES
from ansible_collections.blackwell.sglang.plugins.module_utils import _journal

with open(os.path.join(FIXTURES, "service", "journal", "cases.json")) as _handle:
    CASES = json.load(_handle)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_field_report_lines(case):
    result = _journal.classify(case["lines"])
    assert result["cause"] == case["expect"], result
    if case["expect"] != "unknown":
        assert result["line"] in [line.strip() for line in case["lines"]]
        assert result["remedy"]


def test_fatal_error_outranks_fp8_warning():
    lines = ["Using FP8 KV cache but no scaling factors provided. Defaulting to scaling factors of 1.0.",
             "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."]
    result = _journal.classify(lines)
    assert result["cause"] == "init_kv_budget_too_small"
    assert result["matches"] == ["init_kv_budget_too_small", "fp8_kv_without_scales"]


def test_fa3_beats_generic_no_kernel_image():
    result = _journal.classify("CUDA error (hopper/flash_fwd_launch_template.h:167):\n"
                               "no kernel image is available for execution on the device\n")
    assert result["cause"] == "fa3_unsupported_arch"
    assert "no_kernel_image" in result["matches"]


def test_shard_progress_reads_tqdm_with_carriage_returns():
    text = ("Loading safetensors checkpoint shards:  64% Completed | 105/163 [09:30<04:59,  5.16s/it]\r"
            "Loading safetensors checkpoint shards:  65% Completed | 106/163 [09:36<05:20,  5.63s/it]")
    assert _journal.shard_progress([text]) == (106, 163)
    assert _journal.shard_progress(["nothing here"]) is None


def test_nccl_init_complete():
    assert _journal.nccl_init_complete(["host:1:1 [0] NCCL INFO comm 0x5 rank 0 nranks 2 - Init COMPLETE"])
    assert not _journal.nccl_init_complete(["NCCL INFO Bootstrap"])
