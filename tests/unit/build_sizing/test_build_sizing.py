"""The build sizing rule against the worked examples of field report B05."""

import pytest

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils._build_sizing import build_parallelism

KIB = 1024


def test_b05_host_a_rtx5090_61gb():
    # nproc=16, MemAvailable 61000000 kB -> 5 jobs (B05)
    assert build_parallelism(16, 61000000 * KIB)["jobs"] == 5


def test_b05_host_b_gb10_unified():
    # nproc=20, MemAvailable 118566368 kB -> 12 jobs (B05)
    assert build_parallelism(20, 118566368 * KIB)["jobs"] == 12


def test_small_host_still_gets_one_job():
    res = build_parallelism(2, 8 * 1024 ** 3)
    assert res["jobs"] == 1 and res["compile_threads"] == 1


def test_cores_cap_jobs_and_threads_use_spare_memory():
    res = build_parallelism(4, 512 * 1024 ** 3, gencodes=3)
    assert res["jobs"] == 4
    assert res["compile_threads"] == 3
    assert res["peak_gib"] == 4 * 3 * 8


def test_operator_cap():
    assert build_parallelism(64, 512 * 1024 ** 3, max_jobs=6)["jobs"] == 6


@pytest.mark.parametrize("args", [(0, 1), (4, -1)])
def test_bad_input(args):
    with pytest.raises(ValueError):
        build_parallelism(*args)


def test_host_facts_sizes_the_build_from_what_it_read(tmp_path):
    """The kernel build's sizing as sgl_kernel_sm120 asks for it: blackwell.sglang.host_facts with build_sizing."""
    res = ansible_run.module("blackwell.sglang.host_facts", {"build_sizing": {"gencodes": 3, "max_jobs": 0}}, tmp_path)
    assert not res.get("failed") and res["changed"] is False, res
    assert res["build_sizing"] == build_parallelism(res["cpus"], res["memory"]["mem_available_bytes"], gencodes=3)
    capped = ansible_run.module("blackwell.sglang.host_facts",
                                {"build_sizing": {"gib_per_job": 0.5, "headroom_gib": 0, "max_jobs": 1}}, tmp_path)
    assert capped["build_sizing"]["jobs"] == 1
    assert "build_sizing" not in ansible_run.module("blackwell.sglang.host_facts", {}, tmp_path)
