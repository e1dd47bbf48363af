"""The sandbox image's /etc/pip.conf (tests/sandbox/build-image.sh) turns pip's byte-compiling off.

pip maps a config key to the option of that name: ``no-compile = true`` sets ``--no-compile``'s destination to true,
which *compiles*, so the file's text proves nothing. These tests take the file from the build script, install a
one-module wheel with this venv's pip under it (``PIP_CONFIG_FILE``, offline), and look for ``.pyc`` files; the
control run under an empty config must write them, or the check could not fail.
"""

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile

BUILD_IMAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sandbox", "build-image.sh")


def sandbox_pip_conf():
    """The text build-image.sh writes to the image's /etc/pip.conf (its ``<<'PIP'`` here-document)."""
    with open(BUILD_IMAGE, encoding="utf-8") as handle:
        script = handle.read()
    match = re.search(r"cat > \"\$rootfs/etc/pip\.conf\" <<'PIP'\n(.*?)\nPIP\n", script, re.S)
    assert match, "build-image.sh no longer writes /etc/pip.conf from a <<'PIP' here-document"
    return match.group(1) + "\n"


def one_module_wheel(directory):
    """A pure-Python wheel ``probe_pkg-1.0`` with one module; its path."""
    files = {"probe_pkg/__init__.py": b"VALUE = 42\n",
             "probe_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: probe-pkg\nVersion: 1.0\n",
             "probe_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append("probe_pkg-1.0.dist-info/RECORD,,")
    path = os.path.join(str(directory), "probe_pkg-1.0-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("probe_pkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def compiled_files(tmp_path, conf_text, name):
    """Install the wheel with ``conf_text`` as pip's only config file; the ``.pyc`` files the install left."""
    conf = tmp_path / (name + ".conf")
    conf.write_text(conf_text)
    target = tmp_path / name
    env = dict(os.environ, PIP_CONFIG_FILE=str(conf), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    for key in ("PIP_NO_COMPILE", "PIP_COMPILE", "PYTHONDONTWRITEBYTECODE"):
        env.pop(key, None)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                           one_module_wheel(tmp_path)], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target / "probe_pkg" / "__init__.py").is_file()
    return sorted(str(p.relative_to(target)) for p in target.rglob("*.pyc"))


def test_the_sandbox_pip_conf_keeps_pip_from_compiling(tmp_path):
    # the CA bundle line names a file that exists only in the image; an offline install never reads it
    assert compiled_files(tmp_path, "[global]\n", "control"), "pip compiled nothing under an empty config"
    assert compiled_files(tmp_path, sandbox_pip_conf(), "sandbox") == []
