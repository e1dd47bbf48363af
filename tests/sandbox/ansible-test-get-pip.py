"""Offline-capable stand-in for ansible-test's pip bootstrap script (get-pip-<version>.py).

ansible-test creates each sanity virtual environment without pip and then runs a get-pip script that it downloads
from ci-files.testing.ansible.com -- a host this lab cannot reach. ansible-test documents the escape hatch: save
the script as ~/.ansible/test/cache/get_pip_<version>.py. `make sanity` puts this file there.

It does what get-pip does, with tools every CPython has: `ensurepip` installs the pip wheel bundled with the
interpreter (no network), then that pip installs the exact packages ansible-test asked for (e.g. pip==24.2) from
the configured package index. Arguments are get-pip's: pip install options and requirement specifiers, plus the
get-pip-only flags --no-setuptools / --no-wheel (setuptools that ensurepip brings is removed again when asked).
"""

from __future__ import annotations

import ensurepip
import os
import subprocess
import sys

# ansible-test runs this with a reduced environment; keep TLS working behind an inspecting proxy by handing the
# system CA bundle to pip explicitly (the bundled pip would otherwise use its own certifi store).
CA_BUNDLES = (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt")


def main() -> int:
    no_setuptools = "--no-setuptools" in sys.argv[1:]
    args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
    cert = next((c for c in CA_BUNDLES if c and os.path.isfile(c)), None)
    if cert:
        args = ["--cert", cert, *args]
    ensurepip.bootstrap(upgrade=False, default_pip=True)
    rc = subprocess.call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *args])
    if rc == 0 and no_setuptools:
        # ensurepip of Python < 3.12 also installs setuptools; get-pip --no-setuptools leaves it out
        rc = subprocess.call([sys.executable, "-m", "pip", "uninstall", "-y", "-q", "setuptools"])
    return rc


if __name__ == "__main__":
    sys.exit(main())
