"""State of the three fleet hosts after: rollout of the original stack, idempotent rerun, a faulty stack switch to the
current stack with a new model (M2), a hand-made drift, an audit, and rollback.yml on the canary with the current
stack and M2 still configured."""

import json
import os

import pytest
import testinfra

EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
FLEET = {name: testinfra.get_host("podman://bw-%s" % name) for name in ("fleet-1", "fleet-2", "fleet-3")}
M1 = "/srv/models/tiny-nvfp4"        # the sandbox inventory's model: the first release's
M2 = "/srv/models/tiny-nvfp4-b"      # the faulty release's (side_effect.yml, -e sglang_stack_model_path)
UNIT = "/etc/systemd/system/sglang.service"
# the stack switch's SGLang ref in the sandbox mirror (inventories/sandbox_current) and the kernel it pins
CURRENT_REF = "current-20260818-fixture-kernel"
CURRENT_KERNEL = ("sglang-kernel", "0.4.6.post1")


def _link(host, path):
    return host.check_output("readlink -f %s" % path)


def test_exactly_one_kernel_build_per_stack_in_the_fleet():
    # a build writes /var/log/blackwell-sglang/sgl-kernel-build-<key>.log; installing a distributed wheel does not.
    # Two stacks, two kernel trees (sgl-kernel/ and python/sglang/kernels/aot/), two keys: each built once.
    logs = [log for h in FLEET.values()
            for log in h.check_output("ls /var/log/blackwell-sglang/ | grep '^sgl-kernel-build-' || true").split()]
    assert len(logs) == 2 and len(set(logs)) == 2, logs


def test_same_kernel_wheels_everywhere():
    # a wheel reaches every host of its build key in play 2 (built there, or installed from the controller's cache
    # into the staged release), before any batch: fleet-3 has both stacks' wheels although the faulty rollout stopped
    # before its batch (its live release stays the original one, test_rollout_stopped_before_the_last_host); the same wheel
    # is the same file everywhere
    digests = {name: set(h.check_output("sha256sum /opt/sglang/wheels/sgl-kernel/*/*.whl | cut -d' ' -f1").split())
               for name, h in FLEET.items()}
    assert len(digests["fleet-1"]) == 2 and digests["fleet-2"] == digests["fleet-1"] == digests["fleet-3"], digests


def _venv_origins(release):
    """{host: the venv-archive.json of ``release`` on that host}: the archive's manifest, which the host that built and
    archived the release venv leaves with origin "built" and each host that unpacked it with origin "unpacked"."""
    found = {}
    for name, h in FLEET.items():
        marker = h.file("/opt/sglang/releases/%s/venv-archive.json" % release)
        if h.file("/opt/sglang/releases/%s" % release).is_directory:
            assert marker.is_file, (name, release)
            found[name] = json.loads(marker.content_string)
    return found


def test_each_release_venv_was_built_on_one_host_and_unpacked_on_the_others():
    releases = {r for h in FLEET.values() for r in h.check_output("ls /opt/sglang/releases").split()}
    assert len(releases) == 2, releases                    # the original stack's and the current stack's
    for release in sorted(releases):
        origins = _venv_origins(release)
        assert sorted(origins) == sorted(FLEET), (release, sorted(origins))    # staged on every host
        built = sorted(name for name, m in origins.items() if m["origin"] == "built")
        assert built == ["fleet-1"], (release, {n: m["origin"] for n, m in origins.items()})
        assert {m["built_on"] for m in origins.values()} == {"bw-fleet-1"}
        assert len({m["archive"]["sha256"] for m in origins.values()}) == 1
        venv = "/opt/sglang/releases/%s/venv" % release
        # tar kept the builder's file times: pip and venv creation ran on fleet-1 only (a host that installed its own
        # venv would have its own times)
        stamped = "%s/pyvenv.cfg %s/blackwell-sglang/sglang_source/stamp.json" % (venv, venv)
        times = {name: h.check_output("stat -c %%Y %s" % stamped) for name, h in FLEET.items()}
        assert len(set(times.values())) == 1, (release, times)
        # torch imports and SGLang is installed (`import sglang` of the current tree imports torchvision, which the
        # sandbox cannot install: inventories/sandbox_current says why; the kernel is installed by play 3, which
        # fleet-3 never ran for the current release: test_every_live_release_works imports it)
        check = "import torch; from importlib.metadata import version; print(version('sglang'))"
        for name in ("fleet-2", "fleet-3"):
            assert FLEET[name].run('%s/bin/python -c "%s"' % (venv, check)).rc == 0, (release, name)


def _new_release():
    """The faulty rollout's release: the canary took it, and rollback.yml made it the canary's `previous`."""
    return _link(FLEET["fleet-1"], "/opt/sglang/previous")


def _flag(host, flag):
    """One flag's value in the unit the service role rendered (one flag per continuation line); None when absent."""
    lines = host.file(UNIT).content_string.splitlines()
    found = [ln.split(None, 1)[1].rstrip(" \\").strip('"') for ln in lines if ln.strip().startswith(flag + " ")]
    assert len(found) <= 1, lines
    return found[0] if found else None


def _model_path(host):
    found = _flag(host, "--model-path")
    assert found, host.file(UNIT).content_string
    return found


def _manifest(host, release="/opt/sglang/current"):
    return json.loads(host.file(release + "/manifest.json").content_string)


def test_the_canary_ran_the_current_stack():
    h = FLEET["fleet-1"]
    new = _manifest(h, _new_release())
    mirror = h.check_output("git --git-dir /srv/mirror/sglang.git rev-parse %s^{commit}" % CURRENT_REF)
    assert new["sglang"]["commit"] == mirror, new["sglang"]
    assert new["packages"].get(CURRENT_KERNEL[0]) == CURRENT_KERNEL[1] and "sgl-kernel" not in new["packages"]
    old = _manifest(h)
    assert old["sglang"]["commit"] != mirror and "sgl-kernel" in old["packages"], old["sglang"]
    # the service settings each release was rendered with: the current stack's overlay pins its backends (the
    # preset's flashinfer_cutlass); the original stack pins none (the role decides: no probe result here, so its
    # fallback flashinfer_cudnn). What makes the restore below visible.
    assert new["service"]["settings"]["fp4_gemm_backend"] == "flashinfer_cutlass", new["service"]
    assert old["service"]["settings"] == {"kv_cache_dtype": "", "fp4_gemm_backend": "", "moe_runner_backend": "",
                                          "render_fp4_flags": True}, old["service"]


@pytest.mark.parametrize("name", sorted(FLEET))
def test_each_unit_is_the_one_its_live_release_recorded(name):
    # fleet-1: rollback.yml and fleet-2: the rollout's rescue, each with the current stack (and its pins) configured,
    # rendered the old release from its recorded settings and probe result: the unit it had, byte for byte
    h = FLEET[name]
    assert h.file(UNIT).sha256sum == _manifest(h)["unit"]["sha256"], (name, h.file(UNIT).content_string)
    assert _flag(h, "--fp4-gemm-backend") == "flashinfer_cudnn", h.file(UNIT).content_string


def test_canary_took_the_new_release_and_was_rolled_back_by_hand():
    h = FLEET["fleet-1"]
    assert len(h.check_output("ls /opt/sglang/releases").split()) == 2
    assert _link(h, "/opt/sglang/previous") != _link(h, "/opt/sglang/current")
    # rollback.yml returned it to the release the others started from, with that release's recorded model
    assert _link(h, "/opt/sglang/current") == _link(FLEET["fleet-3"], "/opt/sglang/current")
    new = json.loads(h.file(_new_release() + "/manifest.json").content_string)["model"]
    old = json.loads(h.file("/opt/sglang/current/manifest.json").content_string)["model"]
    assert (new["path"], old["path"]) == (M2, M1), (new, old)


@pytest.mark.parametrize("name", ["fleet-1", "fleet-2"])
def test_a_rollback_across_the_model_change_serves_the_old_model(name):
    # fleet-2: the rollout's automatic rollback; fleet-1: rollback.yml; both with M2 configured at the time
    h = FLEET[name]
    assert _model_path(h) == M1
    assert _model_path(h) == json.loads(h.file("/opt/sglang/current/manifest.json").content_string)["model"]["path"]


def test_failed_host_was_rolled_back():
    # fleet-2 switched, failed its health check and returned to the release the other two started from; the
    # automatic rollback marked the failed release and removed `previous` (it would have named the failed release)
    h2, h3 = FLEET["fleet-2"], FLEET["fleet-3"]
    assert _link(h2, "/opt/sglang/current") == _link(h3, "/opt/sglang/current")
    assert not h2.file("/opt/sglang/previous").exists
    assert not h2.file("/opt/sglang/previous").is_symlink
    failed = _new_release()                                         # the new release (same id on every host)
    marker = h2.file(failed + "/ROLLED_BACK")
    assert marker.is_file and marker.mode == 0o644
    record = json.loads(marker.content_string)
    assert "Run the operator's health checks against the live release" in record["reason"], record
    assert record["returned_to"] == os.path.basename(_link(h3, "/opt/sglang/current"))
    assert not h2.file(_link(h2, "/opt/sglang/current") + "/ROLLED_BACK").exists


def test_rollout_stopped_before_the_last_host():
    h = FLEET["fleet-3"]
    assert not h.file("/opt/sglang/previous").exists       # never switched after the first rollout
    assert _link(h, "/opt/sglang/current") != _new_release()
    assert _model_path(h) == M1


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
    # fleet-2's automatic rollback rendered the unit its release recorded, byte for byte, with the current stack
    # configured
    assert ("bw-fleet-2", "unit sha256") not in hosts, report["hosts"]
    # (the audit ran before fleet-1's rollback) every unit serves the model its live release recorded: fleet-2 was
    # rolled back onto release 1 with release 1's model, not with M2
    for name in ("bw-fleet-1", "bw-fleet-2", "bw-fleet-3"):
        assert (name, "model path") not in hosts, report["hosts"]
