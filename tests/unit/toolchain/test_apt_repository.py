"""NVIDIA's CUDA apt repository for a host: one lookup (module_utils._cuda_toolchain.apt_repository) behind the
preflight's distribution check and cuda_toolchain's apt method (filter blackwell.sglang.cuda_apt_repo).

Debian reports its point release (``ansible_distribution_version`` 12.11) while the repository is ``debian12``: the
preflight found it through the major version, the role looked the full version up and failed on every Debian 12
host. The role-level test runs both roles as a user does (ansible-playbook, the real roles) on hosts whose
distribution facts are set by a stand-in facts module, and requires the same verdict from both.
"""

from __future__ import annotations

import json
import pathlib
import sys
import textwrap

import pytest
import yaml

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import apt_repository

ROOT = pathlib.Path(__file__).resolve().parents[3]
STACK = yaml.safe_load((ROOT / "roles" / "sglang_stack" / "defaults" / "main.yml").read_text())
SLUGS = STACK["sglang_stack_cuda_apt_distro_slugs"]
ARCHES = STACK["sglang_stack_cuda_apt_arch_map"]
PUBLISHED = yaml.safe_load((ROOT / "roles" / "preflight" / "defaults" / "main.yml").read_text())["preflight_apt_supported_slugs"]


@pytest.mark.parametrize("distribution, version, arch, path", [
    ("Debian", "12", "x86_64", "debian12/x86_64"),
    ("Debian", "12.11", "x86_64", "debian12/x86_64"),
    ("Debian", "12.0", "x86_64", "debian12/x86_64"),
    ("Ubuntu", "24.04", "x86_64", "ubuntu2404/x86_64"),
    ("Ubuntu", "22.04", "x86_64", "ubuntu2204/x86_64"),
    ("Ubuntu", "24.04", "aarch64", "ubuntu2404/sbsa"),
    ("Ubuntu", "22.04", "aarch64", "ubuntu2204/sbsa"),
    ("Debian", "12.11", "aarch64", "debian12/sbsa"),
])
def test_known_distributions(distribution, version, arch, path):
    repo = apt_repository(distribution, version, arch, SLUGS, ARCHES)
    assert (repo["path"], repo["problem"]) == (path, "")


@pytest.mark.parametrize("distribution, version, arch, needles", [
    ("Debian", "13.1", "x86_64", ["Debian 13.1 (x86_64)", "'debian13'", "debian12, ubuntu2204, ubuntu2404"]),
    ("Ubuntu", "24.10", "x86_64", ["'ubuntu2410'"]),
    ("Ubuntu", "24", "x86_64", ["'ubuntu24'"]),               # a major alone is no Ubuntu release
    ("Pop!_OS", "22.04", "x86_64", ["Pop!_OS 22.04", "'popos2204'"]),
    ("Fedora", "41", "x86_64", ["'fedora41'"]),
    ("", "", "x86_64", ["unknown distribution"]),
    ("Ubuntu", "24.04", "ppc64le", ["architecture 'ppc64le'", "aarch64, x86_64"]),
])
def test_unknown_distributions_and_architectures_name_what_is_known(distribution, version, arch, needles):
    problem = apt_repository(distribution, version, arch, SLUGS, ARCHES)["problem"]
    assert problem and all(n in problem for n in needles), problem


def test_a_forced_slug_wins_and_the_published_table_is_checked_when_given():
    assert apt_repository("Pop!_OS", "22.04", "x86_64", SLUGS, ARCHES, slug="ubuntu2204")["path"] == "ubuntu2204/x86_64"
    # the preflight passes the slugs NVIDIA publishes per architecture: no Debian for sbsa there
    problem = apt_repository("Debian", "12.11", "aarch64", SLUGS, ARCHES, supported=PUBLISHED)["problem"]
    assert "no 'debian12/sbsa'" in problem and "ubuntu2404/sbsa" in problem
    assert apt_repository("Debian", "12.11", "x86_64", SLUGS, ARCHES, supported=PUBLISHED)["problem"] == ""


# --- both roles, as a playbook runs them --------------------------------------------------------------------------

FAKE_FACTS = '''\
#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule
module = AnsibleModule(argument_spec={"facts": {"type": "dict", "required": True}}, supports_check_mode=True)
module.exit_json(changed=False, ansible_facts=module.params["facts"])
'''

HOSTS = {
    # host: (facts, the verdict both roles must reach, model path)
    "debian-12-11": ({"distribution": "Debian", "distribution_version": "12.11", "distribution_major_version": "12",
                      "architecture": "x86_64"}, "debian12/x86_64", ""),
    "debian-12": ({"distribution": "Debian", "distribution_version": "12", "distribution_major_version": "12",
                   "architecture": "x86_64"}, "debian12/x86_64", "Qwen/Qwen3-0.6B"),
    "ubuntu-2404-arm": ({"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
                         "architecture": "aarch64"}, "ubuntu2404/sbsa", "/nonexistent/model"),
    "ubuntu-2410": ({"distribution": "Ubuntu", "distribution_version": "24.10", "distribution_major_version": "24",
                     "architecture": "x86_64"}, None, ""),
    "fedora-41": ({"distribution": "Fedora", "distribution_version": "41", "distribution_major_version": "41",
                   "architecture": "x86_64"}, None, ""),
}


@pytest.fixture(scope="module")
def both_roles(tmp_path_factory):
    """Run the preflight (not fatal, no GPU needed) and cuda_toolchain's input validation on every host of HOSTS."""
    tmp = tmp_path_factory.mktemp("apt_repo")
    (tmp / "library").mkdir()
    (tmp / "library" / "fake_facts.py").write_text(FAKE_FACTS)
    inventory = {"all": {"hosts": {name: {"fake_facts": facts, "sglang_stack_model_path": model}
                                   for name, (facts, _path, model) in HOSTS.items()},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp / "play.yml").write_text(textwrap.dedent('''\
        - name: The repository lookup of the preflight and of cuda_toolchain
          hosts: all
          gather_facts: false
          tasks:
            - name: Distribution facts of this host
              fake_facts:
                facts: "{{ fake_facts }}"
            - name: Preflight
              ansible.builtin.include_role:
                name: blackwell.sglang.preflight
              vars:
                preflight_fatal: false
                preflight_require_gpu: false
            - name: The toolchain's input validation
              block:
                - name: Validate
                  ansible.builtin.include_role:
                    name: blackwell.sglang.cuda_toolchain
                    tasks_from: validate
                    public: true
                - name: Keep the URL (the one install_apt.yml adds)
                  ansible.builtin.set_fact:
                    toolchain_verdict: "{{ __cuda_toolchain_apt_repo_url }}"
              rescue:
                - name: Keep the refusal
                  ansible.builtin.set_fact:
                    toolchain_verdict: "refused: {{ ansible_failed_result.msg }}"
            - name: Save both verdicts
              ansible.builtin.copy:
                dest: "{{ out_dir }}/{{ inventory_hostname }}.json"
                content: "{{ {'preflight': preflight_checks, 'toolchain': toolchain_verdict} | to_json }}"
                mode: "0644"
        '''))
    res = ansible_run.playbook(tmp / "play.yml", tmp, inventory=tmp / "hosts.yml", extra_vars={"out_dir": str(tmp)},
                               cwd=tmp, timeout=300)
    assert res.rc == 0, res.stdout[-6000:] + res.stderr[-3000:]
    return {name: json.loads((tmp / ("%s.json" % name)).read_text()) for name in HOSTS}


@pytest.mark.slow
@pytest.mark.parametrize("host", sorted(HOSTS))
def test_preflight_and_cuda_toolchain_agree(both_roles, host):
    _facts, path, _model = HOSTS[host]
    checks = {c["name"]: c for c in both_roles[host]["preflight"]}
    toolchain = both_roles[host]["toolchain"]
    if path:
        assert checks["distribution"]["status"] == "pass" and path in checks["distribution"]["message"], checks
        assert toolchain == "https://developer.download.nvidia.com/compute/cuda/repos/%s/" % path
    else:
        assert checks["distribution"]["status"] == "fail", checks["distribution"]
        assert toolchain.startswith("refused: ") and "maps to no NVIDIA CUDA apt repository" in toolchain, toolchain


@pytest.mark.slow
@pytest.mark.parametrize("host, status, needle", [
    ("debian-12-11", "skip", "no model path set (sglang_stack_model_path)"),
    ("debian-12", "pass", "Qwen/Qwen3-0.6B is a Hugging Face id"),
    ("ubuntu-2404-arm", "fail", "/nonexistent/model does not exist"),
])
def test_the_preflight_stats_only_a_local_model_path(both_roles, host, status, needle):
    """Empty (the default) and a Hub id are valid model paths: the preflight reports them instead of crashing."""
    check = {c["name"]: c for c in both_roles[host]["preflight"]}["model_path"]
    assert check["status"] == status and needle in check["message"], check
    if status == "fail":
        assert "fix sglang_stack_model_path" in check["remedy"], check
