"""The batch harness (harness.Batches) answers a case only from that case's own host lines, and leaves a case it
cannot decide to a run of its own."""

import harness

OUT = """PLAY [bad input batch] *********************************************************

TASK [blackwell.sglang.preflight : Check the stack contract's types] ***********
fatal: [a]: FAILED! => {"changed": false, "msg": "sglang_stack_service_port must be in 1-65535, got \\"70000\\""}
ok: [b]

TASK [blackwell.sglang.preflight : Read GPUs, driver, topology and PCIe P2P state] ***
fatal: [b]: FAILED! => {"changed": false, "msg": "no GPU"}
fatal: [a]: FAILED! => {"changed": false, "msg": "a second failure is not the host's first"}
"""


def test_each_host_gets_its_first_failure_with_its_task_header():
    got = harness._parse_batch(OUT + "\nPLAY RECAP\na : ok=1 changed=0 unreachable=0 failed=1 skipped=0\n"
                               "b : ok=2 changed=0 unreachable=0 failed=1 skipped=0\nc : ok=3 changed=0 "
                               "unreachable=0 failed=0 skipped=0\n", {"a", "b", "c"}, None)
    a = harness.HostRun(got["a"]["rc"], got["a"]["out"], got["a"]["blocked"])
    assert a.failed_task() == "blackwell.sglang.preflight : Check the stack contract's types"
    assert a.refused_before_change('got "70000"') and "second failure" not in a.out and "no GPU" not in a.out
    assert got["b"]["rc"] == 2 and "no GPU" in got["b"]["out"] and "70000" not in got["b"]["out"]
    assert got["c"] == {"rc": 0, "out": "", "blocked": None}


def test_a_run_ended_by_a_blocked_task_leaves_every_host_undecided():
    """Without a recap a failure may have been rescued and the host gone on: no host's answer is taken."""
    got = harness._parse_batch(OUT, {"a", "b", "c"}, "ansible.builtin.file\tCreate the directory")
    for host in "abc":
        run = harness.HostRun(got[host]["rc"], got[host]["out"], got[host]["blocked"])
        assert run.blocked and not run.refused_before_change(), host


def test_an_ignored_or_rescued_failure_is_no_refusal():
    out = ("TASK [r : Probe] ***\nfatal: [a]: FAILED! => {\"msg\": \"probe failed\"}\n...ignoring\n"
           "TASK [r : Rescued] ***\nfatal: [b]: FAILED! => {\"msg\": \"rescued\"}\n"
           "PLAY RECAP\na : ok=3 changed=0 unreachable=0 failed=0 skipped=0\n"
           "b : ok=3 changed=0 unreachable=0 failed=0 skipped=0 rescued=1\n")
    got = harness._parse_batch(out, {"a", "b"}, None)
    assert got["a"] == {"rc": 0, "out": "", "blocked": None} and got["b"] == {"rc": 0, "out": "", "blocked": None}


def test_a_batch_that_crashes_leaves_every_case_to_run_alone(tmp_path, monkeypatch):
    def crash(workdir, cases):
        raise harness.subprocess.TimeoutExpired(["ansible-playbook"], 600)
    monkeypatch.setattr(harness, "run_batch", crash)
    monkeypatch.setattr(harness, "run_role", lambda tmp, role, variables, tasks_from=None: "own")
    batches = harness.Batches(str(tmp_path / "batches"))
    cases = {"x": ("preflight", None, {}), "y": ("preflight", None, {})}
    assert [batches.run("t", cases, c, lambda got: True, tmp_path) for c in "xy"] == ["own", "own"]
    assert (tmp_path / "batches" / "t.alone").read_text() == "x\ny\n"


def test_a_case_the_batch_cannot_answer_runs_alone(tmp_path, monkeypatch):
    batches = harness.Batches(str(tmp_path / "batches"))
    monkeypatch.setattr(harness, "run_batch", lambda workdir, cases: {"x": {"rc": 0, "out": "", "blocked": None},
                                                                      "__batch__": {"rc": 0, "out": ""}})
    alone = []
    monkeypatch.setattr(harness, "run_role", lambda tmp, role, variables, tasks_from=None: alone.append(role) or "own")
    cases = {"x": ("preflight", None, {"preflight_min_disk_gb": -5})}
    assert batches.run("t", cases, "x", lambda got: got.refused_before_change(), tmp_path) == "own"
    assert alone == ["preflight"]
    assert (tmp_path / "batches" / "t.alone").read_text() == "x\n"
