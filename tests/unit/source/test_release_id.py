"""Release keys: stable, normalised, sensitive to every stack input (docs/release.md)."""

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.release_id import release_id as release_id_filter
from ansible_collections.blackwell.sglang.plugins.module_utils import _release as rel

ORIGINAL = {
    "sglang_ref": "d28f35240a",
    "kernel_patches": ["fa3_soft_import", "cccl_include"],
    "cuda_version": "13.0",
    "torch_version": "2.12.0.dev20260307+cu130",
    "cuda_archs": ["12.0a"],
    "flashinfer_version": "0.6.5",
}


def test_id_is_stable_and_short_hex():
    first = rel.release_id(ORIGINAL)
    assert first == rel.release_id(dict(ORIGINAL))
    assert len(first) == 12 and int(first, 16) >= 0
    # Pinned value: changing the canonical form changes every deployed release directory, so it must be deliberate
    # (bump SCHEMA and document it).
    assert rel.canonical_json(ORIGINAL) == (
        '{"cuda_archs":["12.0a"],"cuda_version":"13.0","extra":{},"flashinfer_version":"0.6.5",'
        '"kernel_patches":["cccl_include","fa3_soft_import"],"schema":1,"sglang_ref":"d28f35240a",'
        '"torch_version":"2.12.0.dev20260307+cu130"}')


@pytest.mark.parametrize("variant", [
    {"kernel_patches": ["cccl_include", "fa3_soft_import", "fa3_soft_import"]},   # order and duplicates
    {"cuda_version": "13"},                                                          # 13 == 13.0
    {"cuda_version": "13.0.88"},                                                     # nvcc patch level
    {"sglang_ref": "D28F35240A"},                                                    # hex case
    {"cuda_archs": ["12.0A", "12.0a"]},
    {"torch_version": "2.12.0.dev20260307+CU130"},                                   # PEP 440 normal form
])
def test_equivalent_spellings_give_the_same_id(variant):
    assert rel.release_id(dict(ORIGINAL, **variant)) == rel.release_id(ORIGINAL)


@pytest.mark.parametrize("variant", [
    {"sglang_ref": "d55f1c28e2"},
    {"kernel_patches": ["cccl_include"]},
    {"cuda_version": "13.1"},
    {"torch_version": "2.12.0.dev20260308+cu130"},
    {"cuda_archs": ["12.0a", "12.1a"]},
    {"flashinfer_version": "0.6.7"},
    {"extra": {"python": "3.12"}},
])
def test_every_input_changes_the_id(variant):
    assert rel.release_id(dict(ORIGINAL, **variant)) != rel.release_id(ORIGINAL)


def test_branch_names_keep_case():
    assert rel.canonical_inputs({"sglang_ref": "Sandbox"})["sglang_ref"] == "Sandbox"


def test_errors():
    with pytest.raises(ValueError, match="unknown"):
        rel.canonical_inputs({"sglang_ref": "main", "torch": "2.9"})
    with pytest.raises(ValueError, match="sglang_ref"):
        rel.canonical_inputs({"cuda_version": "13.0"})
    with pytest.raises(ValueError, match="length"):
        rel.release_id(ORIGINAL, length=4)
    with pytest.raises(ValueError, match="mapping"):
        rel.canonical_inputs({"sglang_ref": "main", "extra": ["x"]})


def test_filter():
    assert release_id_filter(ORIGINAL) == rel.release_id(ORIGINAL)
    assert release_id_filter(ORIGINAL, length=16).startswith(rel.release_id(ORIGINAL))
    assert release_id_filter(ORIGINAL, canonical=True) == rel.canonical_json(ORIGINAL)
    with pytest.raises(AnsibleFilterError):
        release_id_filter("d28f35240a")
    with pytest.raises(AnsibleFilterError):
        release_id_filter({"bogus": 1})


def test_structured_patch_entries_are_order_independent():
    a = dict(ORIGINAL, kernel_patches=[{"name": "cccl_include", "dir": "/usr/local/cuda/include/cccl"}])
    b = dict(ORIGINAL, kernel_patches=[{"dir": "/usr/local/cuda/include/cccl", "name": "cccl_include"}])
    assert rel.release_id(a) == rel.release_id(b) != rel.release_id(ORIGINAL)
