"""What fp4_probe leaves on the GPU-less sandbox: the result files the fleet manifest reads."""

import json


def _json(host, path):
    f = host.file(path)
    assert f.exists and f.mode == 0o644
    return json.loads(f.content_string)


def test_skip_result_written_for_the_manifest(host):
    res = _json(host, "/opt/sglang/releases/unversioned/probe.json")
    assert res["skipped"] is True
    assert res["reason"].startswith("skipped: no NVIDIA GPU on ")
    assert res["device"]["present"] is False


def test_forced_probe_ran_the_shipped_runner_in_the_venv(host):
    res = _json(host, "/opt/sglang/fp4-probe-forced/probe.json")
    assert res["device"]["present"] is False and "torch.cuda.is_available() is False" in res["device"]["reason"]
    assert res["versions"]["torch"] == "2.13.0+cpu"
    assert res["python"].endswith("/bin/python")
    ref = res["reference"]
    assert ref["ok"] is True and ref["device"] == "cpu"
    assert all(c["roundtrip_exact"] for c in ref["cases"])
    assert res["probe"]["cleaned_up"] is True


def test_no_probe_leftovers(host):
    # the module removes its temporary directory (runner sources, spec, child outputs)
    out = host.run("find /root/.ansible /tmp -name '_fp4_probe_runner.py' 2>/dev/null")
    assert out.stdout.strip() == ""
