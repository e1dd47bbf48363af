"""sglang_release's key inputs fall back to exactly the defaults of the roles that own those variables.

playbooks/rollout.yml includes sglang_release before cuda_toolchain, torch_nightly, flashinfer, sglang_source and
sgl_kernel_sm120 are loaded (include_role is dynamic), while site.yml imports them all up front (their defaults
are visible). If a fallback differed from the owning role's default, an inventory that pins nothing would get one
release id from site.yml and another from rollout.yml for the same stack."""

import ast
import os
import re

import pytest
import yaml

from conftest import ROOT

FALLBACK = re.compile(r"^\{\{\s*(?P<var>[a-z0-9_]+)\s*\|\s*default\((?P<literal>.*)\)\s*\}\}$")
KEY_INPUTS = {
    "sglang_release_sglang_ref": "sglang_source",
    "sglang_release_kernel_patches": "sgl_kernel_sm120",
    "sglang_release_cuda_version": "cuda_toolchain",
    "sglang_release_torch_version": "torch_nightly",
    "sglang_release_cuda_archs": "sgl_kernel_sm120",
    "sglang_release_flashinfer_version": "flashinfer",
}


def _defaults(role):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)


def _specs(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")) as handle:
        return yaml.safe_load(handle)["argument_specs"]


@pytest.mark.parametrize("name, owner", sorted(KEY_INPUTS.items()))
def test_fallback_is_the_owning_roles_default(name, owner):
    match = FALLBACK.match(_defaults("sglang_release")[name])
    assert match, "%s must be '{{ <var> | default(<literal>) }}'" % name
    var = match.group("var")
    assert var in _defaults(owner), "%s reads %s, which %s does not define" % (name, var, owner)
    assert ast.literal_eval(match.group("literal")) == _defaults(owner)[var], (
        "%s falls back to %s but %s's default of %s is %r" % (
            name, match.group("literal"), owner, var, _defaults(owner)[var]))


def test_argument_specs_document_the_same_expressions():
    defaults = _defaults("sglang_release")
    for entry in _specs("sglang_release").values():
        for name, spec in entry.get("options", {}).items():
            if name in KEY_INPUTS and "default" in spec:
                assert spec["default"] == defaults[name], name


def test_every_stack_input_of_the_key_is_checked_here():
    """The key the role hashes (tasks/main.yml) reads these variables and only these (besides key_extra)."""
    with open(os.path.join(ROOT, "roles", "sglang_release", "tasks", "main.yml")) as handle:
        tasks = yaml.safe_load(handle)
    key = next(t for t in tasks if "sglang_release_key" in str(t.get("ansible.builtin.set_fact", {})))
    used = set(re.findall(r"\{\{\s*(sglang_release_[a-z_]+)\s*\}\}", str(key)))
    assert used - {"sglang_release_key_extra"} == set(KEY_INPUTS)
