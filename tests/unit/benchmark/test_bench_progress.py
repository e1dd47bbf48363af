# -*- coding: utf-8 -*-
"""Progress parsing of the benchmark's tqdm bar and the ETA estimate."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils._bench_progress import (
    describe_phase,
    estimate_level_seconds,
    expected_output_tps,
    parse_progress,
)

POINTS = [{"max_concurrency": 1, "output_throughput": 172}, {"max_concurrency": 64, "output_throughput": 2100}]

# what the benchmark log looks like redirected to a file (tqdm updates separated by carriage returns)
LOG = ("Starting warmup with 1 sequences...\nWarmup completed with 1 sequences. Starting main benchmark run...\n"
       "\r  0%|          | 0/512 [00:00<?, ?it/s]\r  0%|          | 1/512 [00:03<27:41,  3.25s/it]"
       "\r 47%|####7     | 240/512 [01:23<01:34,  2.87it/s]")


def test_newest_bar_wins():
    assert parse_progress(LOG) == {"done": 240, "total": 512, "elapsed_s": 83, "remaining_s": 94, "percent": 46.9}


def test_no_rate_yet_and_no_bar():
    assert parse_progress("\r  0%|          | 0/16 [00:00<?, ?it/s]")["remaining_s"] is None
    assert parse_progress("Namespace(backend='sglang', ...)\nLoading tokenizer") is None
    assert parse_progress("") is None and parse_progress(None) is None


def test_hours_in_bar():
    assert parse_progress(" 9/16 [1:02:03<48:10, 412.1s/it]")["elapsed_s"] == 3723


def test_expected_rate_interpolates_in_log2():
    assert expected_output_tps(1, POINTS) == 172
    assert expected_output_tps(8, POINTS) == pytest.approx(172 + 0.5 * (2100 - 172))  # log2 8 = half of log2 64
    assert expected_output_tps(128, POINTS) == 2100
    assert expected_output_tps(4, []) is None


def test_level_estimate():
    # 16 prompts x 1024 tokens at 172 tok/s = 95.3 s -> 96
    assert estimate_level_seconds(16, 1024, 1, POINTS) == 96
    assert estimate_level_seconds(512, 1024, 128, POINTS) == 250
    assert estimate_level_seconds(10, 100, 2, [], default_tps=None) is None
    assert estimate_level_seconds(10, 100, 2, [], default_tps=50) == 20


def test_phase_before_the_bar():
    assert describe_phase("") == "loading Python modules"
    log = ("Waiting up to 20s for http://127.0.0.1:30123/v1/models to become ready...\nServer ready in 0.0s.\n"
           "Namespace(backend='sglang', ...)\n\n#Input tokens: 512\nStarting warmup with 1 sequences...\n")
    assert describe_phase(log) == "warmup requests"
    assert describe_phase(log.split("Namespace", maxsplit=1)[0]) == "server ready, loading the tokenizer"
    assert describe_phase("Waiting up to 20s for x\nServer at x is not ready. Exiting.") == "server not ready: giving up"
