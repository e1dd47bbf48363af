"""The progress-aware readiness wait with a fake clock, fake HTTP and a scripted journal (B22, B23, B26, B28)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _readiness


class World(object):
    """A scripted server start: events keyed by the fake time at which they appear."""

    def __init__(self, journal=None, health=None, states=None):
        self.now = 0.0
        self.journal = sorted(journal or [], key=lambda e: e[0])   # [(t, line)]
        self.health = health or (lambda t: None)                   # t -> status or None
        self.states = states or (lambda t: ("active", "running"))
        self.sent = 0
        self.http_calls = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        assert seconds > 0
        self.now += seconds

    def read_journal(self):
        new = [line for t, line in self.journal[self.sent:] if t <= self.now]
        self.sent += len(new)
        return new

    def unit_state(self):
        return self.states(self.now)

    def http_get(self, timeout):
        self.http_calls.append(timeout)
        status = self.health(self.now)
        return status, None if status else "ConnectionRefusedError"

    def wait(self, **kw):
        params = dict(request_timeout=10.0, successes=3, interval=5.0, stall_timeout=120.0, max_wait=7200.0)
        params.update(kw)
        return _readiness.wait_ready(self.http_get, self.read_journal, self.unit_state, self.clock, self.sleep,
                                     **params)


def shard_line(done, total):
    return "Loading safetensors checkpoint shards:  %d%% Completed | %d/%d [00:10<00:10,  5.16s/it]" % (
        100 * done // total, done, total)


def test_slow_load_longer_than_stall_window_still_succeeds():
    # 163 shards at 60 s each: 9780 s total load, far beyond the 120 s stall window but always advancing.
    journal = [(60.0 * i, shard_line(i, 163)) for i in range(1, 164)]
    ready_at = 60.0 * 163 + 30
    journal += [(60.0 * 163 + 5, "Load weight end. avail mem=20 GB"),
                (ready_at, "The server is fired up and ready to roll!")]
    world = World(journal, health=lambda t: 200 if t >= ready_at else (503 if t > 60 * 163 else None))
    result = world.wait(max_wait=20000.0)
    assert result["ready"] is True and result["reason"] == "ready"
    assert result["progress"] == {"done": 163, "total": 163}
    assert result["elapsed"] == pytest.approx(ready_at + 10, abs=5.0)   # 3 consecutive 200s, 5 s apart
    assert set(world.http_calls) == {10.0}


def test_stall_fails_with_last_lines_and_progress():
    journal = [(10.0 * i, shard_line(i, 163)) for i in range(1, 106)]   # stops at 105/163 at t=1050
    world = World(journal)
    result = world.wait()
    assert result["ready"] is False and result["reason"] == "stalled"
    assert result["progress"] == {"done": 105, "total": 163}
    assert result["last_progress_at"] == pytest.approx(1050.0, abs=5.0)
    assert result["elapsed"] == pytest.approx(1050.0 + 120.0, abs=5.0)
    assert result["cause"]["cause"] == "unknown"
    assert result["last_lines"][-1] == shard_line(105, 163)


def test_consecutive_successes_reset_on_503():
    answers = {0: 200, 1: 200, 2: 503, 3: 200, 4: 200, 5: 200}
    world = World([(0.0, "Load weight end.")], health=lambda t: answers.get(int(t // 5), 200))
    result = world.wait()
    assert result["ready"] is True
    assert result["polls"] == 6


def test_unit_failure_stops_at_once_with_classified_cause():
    journal = [(1.0, "Load weight end. quant=fp8, fmt=e4m3, avail mem=12.25 GB, mem usage=125.65 GB."),
               (2.0, "ValueError: Loaded weights leave no GPU memory for the KV cache under "
                     "--mem-fraction-static=0.88.")]
    world = World(journal, states=lambda t: ("activating", "auto-restart") if t >= 5 else ("active", "running"))
    result = world.wait()
    assert result["reason"] == "unit_failed"
    assert result["elapsed"] == pytest.approx(5.0)
    assert result["cause"]["cause"] == "init_kv_budget_too_small"
    assert result["cause"]["unit_state"] == "activating/auto-restart"


def test_p2p_hang_after_nccl_init_with_tp():
    journal = [(1.0, "HOST:PID:TID [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 - Init COMPLETE")]
    result = World(journal).wait(tp_size=2)
    assert result["reason"] == "stalled" and result["cause"]["cause"] == "nccl_p2p_hang"
    # the same stall on one GPU is not a P2P problem
    assert World(journal).wait(tp_size=1)["cause"]["cause"] == "unknown"


def test_phase_lines_count_as_progress():
    # After the shards: KV cache, then CUDA-graph capture for 100 s per bs bucket (each a new line).
    journal = [(0.0, shard_line(1, 1)), (100.0, "KV Cache is allocated. #tokens: 100000"),
               (200.0, "Capture cuda graph begin. This can take up to several minutes.")]
    journal += [(200.0 + 100 * i, "Capture cuda graph bs [%d]" % i) for i in range(1, 6)]
    ready_at = 800.0
    world = World(journal, health=lambda t: 200 if t >= ready_at else None)
    result = world.wait()
    assert result["ready"] is True


def test_max_wait_caps_even_with_progress():
    journal = [(10.0 * i, shard_line(i, 10000)) for i in range(1, 10000)]
    result = World(journal).wait(max_wait=600.0)
    assert result["reason"] == "max_wait"


@pytest.mark.parametrize("kw,match", [
    ({"request_timeout": 0.5}, ">= 5"),
    ({"successes": 0}, "successes"),
    ({"stall_timeout": 3.0}, "longer than interval"),
    ({"max_wait": 60.0}, "max_wait"),
])
def test_bad_parameters(kw, match):
    with pytest.raises(_readiness.ReadinessConfigError) as err:
        World().wait(**kw)
    assert match in str(err.value)


def test_queued_start_is_not_a_failure_within_grace():
    # systemctl start --no-block: the unit reads inactive for a few seconds before the job runs
    def states(t):
        return ("inactive", "dead") if t < 10 else ("active", "running")

    world = World([(12.0, "Load weight end.")], health=lambda t: 200 if t >= 20 else None, states=states)
    assert world.wait()["ready"] is True


def test_inactive_after_grace_is_a_failure():
    world = World([(1.0, "ValueError: something fatal")], states=lambda t: ("inactive", "dead"))
    result = world.wait(start_grace=30.0)
    assert result["reason"] == "unit_failed" and result["elapsed"] == pytest.approx(30.0)
