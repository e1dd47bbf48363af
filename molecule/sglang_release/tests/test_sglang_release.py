"""What sglang_release promises: versioned releases, `current`/`previous` links, key and manifest files."""

import json
import re

ROOT = "/opt/sglang"


def _release(host, link):
    f = host.file(ROOT + "/" + link)
    assert f.is_symlink
    target = f.linked_to
    assert re.fullmatch(ROOT + r"/releases/[0-9a-f]{12}", target), target
    return target


def test_rollback_left_a_live_and_b_previous(host):
    current, previous = _release(host, "current"), _release(host, "previous")
    assert current != previous
    assert host.file(current).is_directory and host.file(previous).is_directory


def test_release_key_file_matches_its_directory(host):
    for link in ("current", "previous"):
        target = _release(host, link)
        key = json.loads(host.file(target + "/release-key.json").content_string)
        assert key["id"] == target.rsplit("/", 1)[1]
        assert key["key"]["sglang_ref"] == "d28f35240a"
        assert key["key"]["torch_version"] == "2.12.0.dev20260307+cu130"
        assert key["key"]["kernel_patches"] == ["cccl_include", "cmake_policy_guards", "fa3_soft_fallback"]
    b = json.loads(host.file(_release(host, "previous") + "/release-key.json").content_string)
    assert b["key"]["extra"] == {"candidate": True}


def test_manifest_of_the_live_release(host):
    current = _release(host, "current")
    manifest = json.loads(host.file(current + "/manifest.json").content_string)
    assert manifest["release"]["id"] == current.rsplit("/", 1)[1]
    assert manifest["probe"]["recommended"] == {"fp4_gemm_backend": "flashinfer_cudnn",
                                                "moe_runner_backend": "flashinfer_cutlass"}
    assert manifest["probe"]["verdicts"] == {"gemm/flashinfer_cudnn": "pass", "gemm/flashinfer_trtllm": "unsupported"}
    # No timings and no timestamps: the manifest only changes when the host does.
    assert "wall_s" not in json.dumps(manifest)
    assert manifest["unit"] == {"path": "/etc/systemd/system/sglang.service", "sha256": None, "fleet_sha256": None}


def test_bad_input_changed_nothing(host):
    assert not host.file("/opt/sglang-must-not-exist").exists
