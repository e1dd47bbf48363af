"""Waiting loops are flat and bounded: a task file that includes itself once per round (a wait for the sgl-kernel
build or the benchmark) crashes the controller with RecursionError after a few hundred rounds."""

import os
import time

import pytest
import yaml

from harness import ROOT, run_play

from ansible_collections.blackwell.sglang.plugins.module_utils import _async_wait


def test_one_thousand_rounds_at_a_short_interval():
    """1,000 progress rounds (one per poll) with a real clock and real 1 ms sleeps, then the job finishes."""
    polls = [0]
    reports = []

    def poll():
        polls[0] += 1
        return {"finished": polls[0] >= 1001, "rc": 0}

    out = _async_wait.wait(poll, time.monotonic, time.sleep, timeout=600, poll_interval=0.001,
                           progress_interval=0.0005, tail=lambda: ["[%d/1001] nvcc x.cu" % polls[0]],
                           emit=lambda elapsed, finished, line: reports.append(line))
    assert out["finished"] and not out["timed_out"] and out["polls"] == 1001
    assert out["rounds"] >= 1000 and len(reports) == out["rounds"]
    assert reports[-1] == "[1001/1001] nvcc x.cu"


def test_a_job_that_never_ends_times_out():
    now = [0.0]
    out = _async_wait.wait(lambda: {"finished": False}, lambda: now[0], lambda s: now.__setitem__(0, now[0] + s),
                           timeout=30, poll_interval=1, progress_interval=10)
    assert out["timed_out"] and not out["finished"] and out["polls"] <= 32


def test_a_frozen_clock_cannot_stretch_the_wait():
    out = _async_wait.wait(lambda: {"finished": False}, lambda: 0.0, lambda s: None, timeout=5, poll_interval=1,
                           progress_interval=1)
    assert out["timed_out"] and out["polls"] == 7


@pytest.mark.parametrize("kwargs, needle", [({"timeout": 0}, "timeout"), ({"poll_interval": -1}, "poll_interval"),
                                            ({"progress_interval": "10"}, "progress_interval")])
def test_wait_parameters_are_checked(kwargs, needle):
    args = dict(timeout=10, poll_interval=1, progress_interval=5)
    args.update(kwargs)
    with pytest.raises(_async_wait.WaitConfigError, match=needle):
        _async_wait.wait(lambda: {}, lambda: 0.0, lambda s: None, **args)


def _actions(tasks):
    for task in tasks or []:
        for key in task:
            if key in ("block", "rescue", "always"):
                yield from _actions(task[key])
            elif "." in key:
                yield key


@pytest.mark.parametrize("path", ["roles/sgl_kernel_sm120/tasks/build.yml", "roles/sglang_benchmark/tasks/level.yml"])
def test_wait_files_include_nothing(path):
    tasks = yaml.safe_load(open(os.path.join(ROOT, path)))
    actions = list(_actions(tasks))
    assert "blackwell.sglang.job_wait" in actions
    assert not any("include" in a or "import" in a for a in actions), actions


def test_job_wait_follows_a_real_async_job(tmp_path):
    """job_wait through ansible-playbook on localhost: a detached shell job that writes ninja-style progress for
    about 3 s; the wait prints progress lines and returns the job's result (rc 0)."""
    log = tmp_path / "build.log"
    tasks = [
        {"name": "start", "ansible.builtin.shell": "for i in 1 2 3 4 5 6; do echo \"[$i/6] step\" >> %s; sleep 0.5; done" % log,
         "async": 120, "poll": 0, "register": "job"},
        {"name": "wait", "register": "waited", "blackwell.sglang.job_wait": {
            "jid": "{{ job.ansible_job_id }}", "log": str(log), "timeout": 60, "poll_interval": 0.3,
            "progress_interval": 0.5, "label": "test build", "final_tail_lines": 2}},
        {"name": "check", "ansible.builtin.assert": {"that": [
            "waited.finished", "not waited.timed_out", "waited.status.rc == 0", "waited.rounds >= 2",
            "waited.log_tail.splitlines() == ['[5/6] step', '[6/6] step']"]}},
    ]
    run = run_play(tmp_path, tasks, check=False, env={"BAD_INPUT_BLOCK": "0"})
    assert run.rc == 0, run
    assert "test build running after" in run.out and "test build finished after" in run.out, run
    assert "[6/6] step" in run.out, run
