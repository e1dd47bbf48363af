"""pytest fixtures shared by every Molecule scenario's testinfra tests (molecule/<scenario>/tests/test_*.py).

Molecule's testinfra verifier connects through the Ansible inventory. testinfra runs hosts whose
``ansible_connection`` it does not know natively (containers.podman.podman) through a full Ansible module call
per command, which costs about a second each. For podman instances the ``host`` fixture below talks to the
container with ``podman exec`` instead (testinfra's podman backend): the same ``host`` API, 10-20x faster.

Fixtures:
  host          testinfra host; podman exec for sandbox containers, otherwise what testinfra built.
  ansible_host  the Ansible-backed testinfra host, for ``ansible_host.ansible(module, args, check=False)`` and
                ``ansible_host.ansible.get_variables()`` (inventory + group_vars of the scenario).
  host_vars     the instance's inventory variables (dict), read once per module.
  repo_root     the checkout (MOLECULE_PROJECT_DIRECTORY or the parent of molecule/).
"""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest
import testinfra

PODMAN_CONNECTIONS = {"podman", "containers.podman.podman"}


@pytest.fixture(scope="module")
def ansible_host(_testinfra_host):
    return _testinfra_host


@pytest.fixture(scope="module")
def host_vars(ansible_host):
    backend = ansible_host.backend
    if backend.NAME != "ansible":
        return {}
    return backend.ansible_runner.get_variables(backend.host)


@pytest.fixture(scope="module")
def host(ansible_host, host_vars):
    if host_vars.get("ansible_connection") in PODMAN_CONNECTIONS:
        podman = host_vars.get("ansible_podman_executable") or shutil.which("podman") or "podman"
        if os.path.basename(podman) == "podman":
            name = host_vars.get("ansible_host") or host_vars["inventory_hostname"]
            return testinfra.get_host(f"podman://{name}")
    return ansible_host


@pytest.fixture(scope="session")
def repo_root():
    root = os.environ.get("MOLECULE_PROJECT_DIRECTORY")
    return pathlib.Path(root) if root else pathlib.Path(__file__).resolve().parent.parent
