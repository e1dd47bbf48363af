"""Every network call of a module, through the module as Ansible runs it, against endpoints that fail on purpose
(netdoubles.py: a closed port, a port that accepts and never answers, HTTP 500/401/404 servers, a ``.invalid``
host name; all on this machine). Each failure is a message that names the request's URL (credentials masked),
what failed, the variable that sets the endpoint and what to check; never a traceback; bounded by the module's
timeout; and nothing half-written is left behind."""

import json
import os
import sys
import time

import pytest

from harness import ROOT, run_module
from netdoubles import KINDS, Endpoint

COMMIT = "0123456789abcdef0123456789abcdef01234567"
TOKEN = "hf_" + "s3cr3t" * 6
KEY = "sk-" + "k" * 37


def _clean(result, *secrets):
    text = json.dumps(result)
    assert "Traceback" not in text, text
    for secret in secrets:
        assert secret not in text, text
    return result["msg"]


def _names(msg, ep, *needles):
    assert ep.hostport in msg, msg
    assert ep.expect in msg, msg
    assert "Check: " in msg, msg
    missing = [n for n in needles if n not in msg]
    assert not missing, (missing, msg)


# --- sglang_model_fetch: the Hub ------------------------------------------------------------------------------------

def _fetch_args(tmp_path, endpoint, **over):
    args = {"repo_id": "acme/tiny", "revision": COMMIT, "name": "tiny", "root": str(tmp_path / "models"),
            "allowed_roots": [str(tmp_path / "models")], "endpoint": endpoint, "token": TOKEN,
            "state_dir": str(tmp_path / "state"), "progress_file": str(tmp_path / "state" / "progress.json"),
            "request_timeout": 2, "disk_headroom_bytes": 0, "max_workers": 2}
    args.update(over)
    return args


@pytest.mark.parametrize("kind", KINDS)
def test_model_fetch_metadata_failure(tmp_path, kind):
    pytest.importorskip("huggingface_hub")
    with Endpoint(kind) as ep:
        # credentials in the URL are masked too
        endpoint = ep.base.replace("http://", "http://user:%s@" % TOKEN) if kind in ("500", "401") else ep.base
        start = time.monotonic()
        result = run_module("sglang_model_fetch", _fetch_args(tmp_path, endpoint), tmp_path, timeout=60,
                            env={"HF_HOME": str(tmp_path / "hf")})
        elapsed = time.monotonic() - start
    msg = _clean(result, TOKEN)
    assert result["failed"] is True
    _names(msg, ep, "Hub file listing of acme/tiny@" + COMMIT, "sglang_model_hf_endpoint", "Nothing was downloaded")
    if kind == "401":
        assert "sglang_model_hf_token" in msg
    if kind == "silent":
        assert "within 2 s" in msg and "sglang_model_hf_request_timeout" in msg
    assert elapsed < 30, elapsed
    assert not (tmp_path / "models").exists() and not (tmp_path / "state").exists()


def test_model_fetch_endpoint_that_is_not_a_hub(tmp_path):
    """A 200 with a web page (a proxy's login page, or not a Hub at all) is said so, not a TypeError."""
    pytest.importorskip("huggingface_hub")
    from netdoubles import Status
    with Status(200, body=b"<html>please log in</html>", content_type="text/html") as srv:
        result = run_module("sglang_model_fetch", _fetch_args(tmp_path, "http://127.0.0.1:%d" % srv.port), tmp_path,
                            env={"HF_HOME": str(tmp_path / "hf")})
    msg = _clean(result, TOKEN)
    assert "not the Hub's API" in msg and "127.0.0.1:%d" % srv.port in msg and "sglang_model_hf_endpoint" in msg
    assert not (tmp_path / "models").exists()


def test_model_fetch_request_timeout_is_validated(tmp_path):
    result = run_module("sglang_model_fetch", _fetch_args(tmp_path, "http://127.0.0.1:9", request_timeout=0), tmp_path)
    assert result["failed"] is True and "sglang_model_hf_request_timeout" in result["msg"], result


def test_model_fetch_cdn_unreachable_keeps_staging_and_promotes_nothing(tmp_path):
    """The metadata comes, the LFS redirect goes to a CDN host that does not resolve: the message names that host
    (not only the endpoint), the target is absent, the staging directory stays for the resume."""
    pytest.importorskip("huggingface_hub")
    sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "model"))
    from fakehub import FakeHub  # pylint: disable=import-outside-toplevel
    files = {"config.json": b'{"model_type": "llama"}', "model.safetensors": b"\x08" + b"\0" * 7 + b"{}      "}
    with FakeHub("acme/tiny", COMMIT, files) as hub:
        hub.faults["cdn_base"] = "http://cdn.no-such-host.invalid"
        result = run_module("sglang_model_fetch", _fetch_args(tmp_path, hub.endpoint), tmp_path, timeout=90,
                            env={"HF_HOME": str(tmp_path / "hf")})
    msg = _clean(result, TOKEN)
    assert "cdn.no-such-host.invalid" in msg and "does not resolve" in msg and "redirected the download" in msg, msg
    assert "Nothing was promoted" in msg and "a rerun resumes" in msg
    assert not (tmp_path / "models" / ("tiny@" + COMMIT)).exists()
    staging = tmp_path / "models" / ".staging" / ("tiny@" + COMMIT)
    assert staging.is_dir() and staging.name in msg
    assert not (staging / "model.safetensors").exists()                     # no partial file under its final name
    progress = json.loads((tmp_path / "state" / "progress.json").read_text())
    assert progress["state"] == "failed" and TOKEN not in json.dumps(progress)


# --- the gateway's worker API and a worker's load endpoints ---------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_gateway_worker_failure(tmp_path, kind):
    with Endpoint(kind) as ep:
        start = time.monotonic()
        result = run_module("sglang_gateway_worker", {
            "gateway_url": ep.base, "api_key": KEY, "worker_url": "http://10.0.0.17:30000", "state": "absent",
            "request_timeout": 2, "timeout": 5}, tmp_path, timeout=60)
        elapsed = time.monotonic() - start
    msg = _clean(result, KEY)
    assert result["failed"] is True
    _names(msg, ep, "GET http://%s/workers" % ep.hostport, "gateway_url", "sglang_gateway_host")
    if kind == "401":
        assert "sglang_gateway_api_key" in msg
    if kind == "silent":
        assert "within 2 s" in msg and "sglang_gateway_request_timeout" in msg
    assert elapsed < 30, elapsed


@pytest.mark.parametrize("kind", KINDS)
def test_worker_inflight_failure(tmp_path, kind):
    with Endpoint(kind) as ep:
        start = time.monotonic()
        result = run_module("sglang_worker_inflight", {"url": ep.base, "api_key": KEY, "timeout": 5,
                                                       "request_timeout": 2}, tmp_path, timeout=60)
        elapsed = time.monotonic() - start
    msg = _clean(result, KEY)
    assert result["failed"] is True
    path = "/metrics" if kind in ("500", "401", "404") else "/get_load"    # an HTTP answer falls back to /metrics
    _names(msg, ep, "GET http://%s%s" % (ep.hostport, path), "sglang_gateway_worker_address")
    if kind == "401":
        assert "sglang_gateway_worker_api_key" in msg
    assert elapsed < 30, elapsed


def test_gateway_bad_timeouts_are_refused(tmp_path):
    result = run_module("sglang_gateway_worker", {"gateway_url": "http://127.0.0.1:9", "worker_url": "http://a:1",
                                                  "request_timeout": 0}, tmp_path)
    assert result["failed"] is True and "request_timeout" in result["msg"], result
    result = run_module("sglang_worker_inflight", {"url": "http://127.0.0.1:9", "poll": 0}, tmp_path)
    assert result["failed"] is True and "poll" in result["msg"], result


# --- the tool-call smoke --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_tool_call_smoke_failure(tmp_path, kind):
    with Endpoint(kind) as ep:
        start = time.monotonic()
        result = run_module("sglang_tool_call_smoke", {"url": ep.base + "/v1/chat/completions", "model": "m",
                                                       "api_key": KEY, "timeout": 2}, tmp_path, timeout=60)
        elapsed = time.monotonic() - start
    msg = _clean(result, KEY)
    assert result["failed"] is True and result["verdict"] == "bad_response"
    _names(msg, ep, "POST http://%s/v1/chat/completions" % ep.hostport, "sglang_stack_service_port")
    if kind == "401":
        assert "sglang_service_api_key" in msg
    if kind == "silent":
        assert "within 2 s" in msg and "sglang_service_smoke_timeout" in msg
    assert elapsed < 30, elapsed


# --- readiness ------------------------------------------------------------------------------------------------------

def _systemd_doubles(tmp_path):
    """systemctl says the unit is active/running; journalctl prints one start-up line (no progress after it)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "systemctl").write_text("#!/bin/sh\nfor a; do case $a in --property=ActiveState) echo ActiveState=active;;"
                                      " --property=SubState) echo SubState=running;; esac; done\n")
    (bindir / "journalctl").write_text("#!/bin/sh\necho 'Load weight begin'\necho '-- cursor: s=1'\n")
    for exe in bindir.iterdir():
        exe.chmod(0o755)
    return {"PATH": "%s:%s" % (bindir, os.environ["PATH"])}


@pytest.mark.parametrize("kind", KINDS)
def test_readiness_failure_names_the_url(tmp_path, kind):
    """A running unit whose /health cannot be reached: the wait ends (stalled after stall_timeout, or at once as
    unreachable for a name that does not resolve) and says what the last request met."""
    # a name that does not resolve must end the wait before the stall timeout, however slow the polls are on a
    # loaded test machine: its stall timeout is long enough that only the "unreachable" rule can end it in time
    stall = 15 if kind == "dns" else 1
    with Endpoint(kind) as ep:
        start = time.monotonic()
        result = run_module("sglang_readiness", {
            "unit": "sglang.service", "url": ep.base + "/health", "interval": 0.2, "request_timeout": 5,
            "stall_timeout": stall, "max_wait": 20, "start_grace": 0, "kernel_log": False}, tmp_path, timeout=60,
            env=_systemd_doubles(tmp_path))
        elapsed = time.monotonic() - start
    msg = _clean(result)
    expect = "last 500" if kind == "500" else ep.expect        # a 5xx is what a loaded server may answer: counted
    assert result["failed"] is True and ep.hostport in msg and expect in msg, msg
    if kind in ("refused", "silent", "dns", "401", "404"):
        _names(msg, ep, "sglang_stack_service_host", "sglang_stack_service_port")
    assert result["reason"] == ("unreachable" if kind == "dns" else "stalled"), result["reason"]
    assert elapsed < (stall if kind == "dns" else 30), elapsed
