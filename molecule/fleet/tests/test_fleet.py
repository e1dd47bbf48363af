"""State of the three fleet hosts after: rollout, idempotent rerun, a faulty release, a hand-made drift, an audit."""

import json
import os

import pytest
import testinfra

EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
FLEET = {name: testinfra.get_host("podman://bw-%s" % name) for name in ("fleet-1", "fleet-2", "fleet-3")}


def _link(host, path):
    return host.check_output("readlink -f %s" % path)


def test_exactly_one_kernel_build_in_the_fleet():
    # a build writes /var/log/blackwell-sglang/sgl-kernel-build-<key>.log; installing a distributed wheel does not
    builds = {name: int(h.check_output("ls /var/log/blackwell-sglang/sgl-kernel-build-*.log 2>/dev/null | wc -l"))
              for name, h in FLEET.items()}
    assert sum(builds.values()) == 1, builds


def test_same_kernel_wheel_everywhere():
    digests = {name: h.check_output("sha256sum /opt/sglang/wheels/sgl-kernel/*/*.whl | cut -d' ' -f1 | sort -u")
               for name, h in FLEET.items()}
    assert len(set(digests.values())) == 1 and all(len(d.split()) == 1 for d in digests.values()), digests


def test_canary_took_the_new_release():
    h = FLEET["fleet-1"]
    assert len(h.check_output("ls /opt/sglang/releases").split()) == 2
    assert _link(h, "/opt/sglang/previous") != _link(h, "/opt/sglang/current")


def test_failed_host_was_rolled_back():
    # fleet-2 switched, failed its health check and returned to the release the other two started from; the
    # automatic rollback marked the failed release and removed `previous` (it would have named the failed release)
    h2, h3 = FLEET["fleet-2"], FLEET["fleet-3"]
    assert _link(h2, "/opt/sglang/current") == _link(h3, "/opt/sglang/current")
    assert not h2.file("/opt/sglang/previous").exists
    assert not h2.file("/opt/sglang/previous").is_symlink
    failed = _link(FLEET["fleet-1"], "/opt/sglang/current")        # the new release (same id on every host)
    marker = h2.file(failed + "/ROLLED_BACK")
    assert marker.is_file and marker.mode == 0o644
    record = json.loads(marker.content_string)
    assert "Run the operator's health checks against the live release" in record["reason"], record
    assert record["returned_to"] == os.path.basename(_link(h3, "/opt/sglang/current"))
    assert not h2.file(_link(h2, "/opt/sglang/current") + "/ROLLED_BACK").exists


def test_rollout_stopped_before_the_last_host():
    h = FLEET["fleet-3"]
    assert not h.file("/opt/sglang/previous").exists       # never switched after the first rollout
    assert _link(h, "/opt/sglang/current") != _link(FLEET["fleet-1"], "/opt/sglang/current")


@pytest.mark.parametrize("name", sorted(FLEET))
def test_every_live_release_works(name):
    h = FLEET[name]
    assert h.file("/opt/sglang/current/manifest.json").exists
    assert h.run("/opt/sglang/current/venv/bin/python -c 'import torch, sglang, sgl_kernel'").rc == 0


def test_audit_reports_the_release_drift_and_the_hand_installed_package():
    with open(os.path.join(EPHEMERAL, "drift.json")) as fh:
        report = json.load(fh)
    assert report["drift"] is True
    fleet = {(d["host"], d["field"]) for d in report["fleet"]}
    hosts = {(d["host"], d["field"]) for d in report["hosts"]}
    assert ("bw-fleet-1", "release id") in fleet          # the canary runs another release than the majority
    assert ("bw-fleet-3", "package six") in hosts         # pip install behind Ansible's back
