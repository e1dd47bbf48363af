"""Smoke tests of the shared sandbox platform (molecule/_shared/config.yml)."""

from __future__ import annotations

import os
import uuid


def test_systemd_is_pid1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running")
    failed = host.run("systemctl --failed --no-legend --plain").stdout.strip()
    assert state.stdout.strip() == "running", f"systemd {state.stdout.strip()}; failed units: {failed}"


def test_python_is_311(host):
    out = host.check_output("/usr/bin/python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert out == "3.11"


def test_debian_12(host):
    assert host.system_info.distribution == "debian"
    assert host.system_info.release.split(".")[0] == "12"


def test_wheelhouse_mount_matches_host(host, repo_root):
    mount = host.mount_point("/opt/wheels")
    assert mount.exists
    assert "ro" in mount.options
    host_dir = os.path.realpath(repo_root / ".cache" / "wheelhouse")
    on_host = sorted(os.listdir(host_dir))
    in_container = sorted(host.check_output("ls -1A /opt/wheels").splitlines())
    assert in_container == on_host


def test_pip_cache_mount_is_shared_and_writable(host, repo_root):
    name = f".molecule-smoke-{uuid.uuid4().hex}"
    host.check_output(f"touch /root/.cache/pip/{name}")
    on_host = repo_root / ".cache" / "pip" / name
    try:
        assert on_host.exists(), "file written in the container is not in the host's .cache/pip"
    finally:
        host.run(f"rm -f /root/.cache/pip/{name}")
    assert not on_host.exists()


def test_mirror_mount_is_read_only(host):
    mount = host.mount_point("/srv/mirror")
    assert mount.exists
    assert "ro" in mount.options
    assert host.run("touch /srv/mirror/.write-probe").rc != 0


def test_smoke_venv_has_packaging_from_pypi(host):
    out = host.check_output("/opt/sandbox-smoke/venv/bin/python -c 'import packaging; print(packaging.__version__)'")
    assert out == "24.2"


def test_pypi_reachable_with_sandbox_ca_bundle(host):
    code = host.check_output("curl -sS --max-time 30 -o /dev/null -w '%{http_code}' https://pypi.org/simple/packaging/")
    assert code == "200"


def test_pip_uses_only_the_ca_bundle(host):
    conf = host.file("/etc/pip.conf")
    assert conf.contains("cert = /etc/ssl/certs/ca-certificates.crt")
    assert not conf.contains("constraint")
