"""N14: torch_nightly's wheelhouse mirror run for real by ansible-playbook on localhost.

The "nightly index" is a local PEP 503 directory (file://) holding small but valid wheels built by the test: a
stand-in at the network boundary. First run: the pinned wheels are downloaded once and fetched into the controller
mirror, then copied to the host's wheelhouse. Second run, with the index gone: the mirror alone serves the pin. A pin
the index no longer lists (only newer nightlies) fails with the nightly_pin_purged message naming the remedy. An
extra whose project name has a "-" is found in the mirror by the wheel file-name rule ("pytorch_triton-...").
"""

import base64
import hashlib
import os
import sys
import zipfile

import ansible_run

PIN = "2.12.0.dev20260307+cu130"
TRITON = "3.6.0+git5261b273"


def wheel(directory, name, version):
    """A minimal valid wheel (METADATA, WHEEL, RECORD) named by the wheel file-name rule."""
    dist = "%s-%s" % (name.replace("-", "_"), version)
    path = os.path.join(directory, "%s-py3-none-any.whl" % dist)
    files = {
        "%s.dist-info/METADATA" % dist: "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
        "%s.dist-info/WHEEL" % dist: "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for arc, text in files.items():
            archive.writestr(arc, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arc, digest, len(text)))
        record.append("%s.dist-info/RECORD,," % dist)
        archive.writestr("%s.dist-info/RECORD" % dist, "\n".join(record) + "\n")
    return path


def index(root, wheels):
    """A PEP 503 simple index: <root>/simple/<project>/index.html linking the wheels."""
    for name, versions in wheels.items():
        project = root / "simple" / name
        project.mkdir(parents=True)
        links = []
        for version in versions:
            path = wheel(str(project), name, version)
            links.append('<a href="%s">%s</a>' % (os.path.basename(path), os.path.basename(path)))
        (project / "index.html").write_text("<html><body>%s</body></html>\n" % "\n".join(links))
    return "file://%s/simple" % root


def play(tmp_path, index_url, mirror, dest, pin=PIN, extras=()):
    play_vars = {"sglang_stack_torch_version": pin, "torch_nightly_python": sys.executable,
                 "torch_nightly_index_url": index_url, "torch_nightly_wheelhouse_mirror": str(mirror),
                 "torch_nightly_wheelhouse_mirror_dest": str(dest), "torch_nightly_pip_retries": 0,
                 "torch_nightly_pip_timeout": 5, "torch_nightly_pip_poll_interval": 1,
                 # not the preset's companions (the default with the preset's torch): they are not in this
                 # test's index
                 "torch_nightly_extra_packages": list(extras)}
    tasks = [{"name": "validate", "ansible.builtin.include_role": {
        "name": "blackwell.sglang.torch_nightly", "tasks_from": "validate"}},
        {"name": "mirror", "ansible.builtin.include_role": {
            "name": "blackwell.sglang.torch_nightly", "tasks_from": "mirror"}}]
    return ansible_run.play(tmp_path, tasks, name="mirror", vars=play_vars, env={
        "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1", "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-tmp")})


def test_mirror_first_run_then_no_index(tmp_path):
    url = index(tmp_path / "idx", {"torch": [PIN, "2.12.0.dev20260601+cu130"], "pytorch-triton": [TRITON]})
    mirror, dest = tmp_path / "controller-mirror", tmp_path / "host-wheelhouse"
    extras = ["pytorch-triton==" + TRITON]
    first = play(tmp_path, url, mirror, dest, extras=extras)
    assert first.returncode == 0, first.stdout[-3000:]
    names = ["pytorch_triton-%s-py3-none-any.whl" % TRITON, "torch-%s-py3-none-any.whl" % PIN]
    assert sorted(os.listdir(str(mirror))) == names
    assert all(os.path.isfile(str(dest / name)) for name in names)
    os.remove(str(dest / names[1]))
    second = play(tmp_path, "file://%s/nowhere" % tmp_path, mirror, dest, extras=extras)
    assert second.returncode == 0, second.stdout[-3000:]
    # the index is gone: had the download run (both wheels found in the mirror by name), the play would have failed
    assert os.path.isfile(str(dest / names[1]))
    assert sorted(os.listdir(str(mirror))) == names


def test_pin_gone_from_the_index_names_the_remedy(tmp_path):
    url = index(tmp_path / "idx", {"torch": ["2.12.0.dev20260601+cu130", "2.12.0.dev20260602+cu130"]})
    result = play(tmp_path, url, tmp_path / "controller-mirror", tmp_path / "host-wheelhouse")
    assert result.returncode != 0
    assert "[nightly_pin_purged] torch==%s" % PIN in result.stdout, result.stdout[-3000:]
    assert "torch_nightly_wheelhouse" in result.stdout
