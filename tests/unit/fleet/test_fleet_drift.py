"""Fleet and host drift over manifests shaped like the ones sglang_release writes."""

import base64
import copy
import hashlib
import json

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils import _fleet as fleet_utils
from ansible_collections.blackwell.sglang.plugins.module_utils._fleet import drift_report, fleet_drift, host_drift

BASE = {
    "schema": 1,
    "release": {"id": "0123456789ab", "dir": "/opt/sglang/releases/0123456789ab"},
    "sglang": {"repo": "file:///srv/mirror/sglang.git", "commit": "a" * 40, "version": "0.5.9"},
    "python": "3.11.2",
    "torch": {"version": "2.13.0+cpu", "cuda": None},
    "packages": {"torch": "2.13.0+cpu", "sglang": "0.5.9", "sgl-kernel": "0.3.21", "flashinfer-python": "0.6.3"},
    "wheels": {"/opt/sglang/wheels/sgl-kernel/k1/sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl": "f" * 64},
    "unit": {"path": "/etc/systemd/system/sglang.service", "sha256": "e" * 64},
    "probe": {"recommended": {"fp4_gemm_backend": None, "moe_runner_backend": None}},
}


def fleet(n=3):
    return {"gpu-%d" % i: copy.deepcopy(BASE) for i in range(1, n + 1)}


def test_identical_fleet_has_no_drift():
    report = drift_report(fleet())
    assert report["drift"] is False
    assert report["summary"] == ["no drift across 3 host(s)"]


def test_one_host_on_another_torch_is_named_against_the_majority():
    manifests = fleet()
    manifests["gpu-2"]["torch"]["version"] = "2.12.0.dev20260307+cu130"
    manifests["gpu-2"]["packages"]["torch"] = "2.12.0.dev20260307+cu130"
    drift = fleet_drift(manifests)
    assert {(d["host"], d["field"]) for d in drift} == {("gpu-2", "torch"), ("gpu-2", "package torch")}
    assert all(d["expected"] == "2.13.0+cpu" and d["hosts_with_expected"] == 2 for d in drift)


def test_wheels_compared_by_name_not_release_path():
    manifests = fleet(2)
    wheel = "sgl_kernel-0.3.21-cp310-abi3-linux_x86_64.whl"
    manifests["gpu-2"]["wheels"] = {"/opt/sglang/wheels/sgl-kernel/k2/" + wheel: "f" * 64}
    assert fleet_drift(manifests) == []
    manifests["gpu-2"]["wheels"] = {"/x/" + wheel: "0" * 64}
    drift = fleet_drift(manifests)
    # a 1:1 tie: the smaller hash is the reference, so exactly the other host is reported
    assert [(d["host"], d["field"], d["expected"]) for d in drift] == [("gpu-1", "wheel " + wheel, "0" * 64)]


def test_missing_manifest_is_drift():
    manifests = fleet(2)
    manifests["gpu-3"] = None
    drift = fleet_drift(manifests)
    assert drift == [{"host": "gpu-3", "field": "manifest", "value": None, "expected": "present", "hosts_with_expected": 2}]


def test_host_drift_sees_a_hand_installed_package_and_an_edited_unit():
    live = {"distributions": dict(BASE["packages"], torch="2.14.1"), "unit_sha256": "d" * 64}
    drift = host_drift("gpu-1", BASE, live)
    fields = {d["field"]: d for d in drift}
    assert fields["package torch"]["value"] == "2.14.1"
    assert fields["package torch"]["expected"] == "2.13.0+cpu"
    assert fields["unit sha256"]["value"] == "d" * 64
    assert len(drift) == 2


def test_each_break_of_the_live_release_seal_is_host_drift():
    breaks = ["six 1.16.0 was installed (stage sglang)", "/usr/local/cuda-13.0/bin/nvcc changed (stage toolchain)"]
    live = {"distributions": dict(BASE["packages"]), "unit_sha256": "e" * 64, "seal_breaks": breaks}
    drift = host_drift("gpu-1", BASE, live)
    assert [(d["field"], d["value"], d["expected"]) for d in drift] == [("seal", b, "as sealed") for b in breaks]
    report = drift_report(fleet(), {"gpu-1": live})
    assert report["drift"] is True
    assert "host drift on gpu-1: seal is 'six 1.16.0 was installed (stage sglang)' now, manifest says 'as sealed'" \
        in report["summary"]


def test_host_in_sync_reports_nothing():
    live = {"distributions": dict(BASE["packages"]), "unit_sha256": "e" * 64}
    assert host_drift("gpu-1", BASE, live) == []
    report = drift_report(fleet(), {"gpu-1": live})
    assert report["drift"] is False


UNIT = """[Service]
ExecStart=/opt/sglang/current/venv/bin/python -m sglang.launch_server \\
    --model-path /srv/models/qwen \\
    --tp-size 16 \\
    --nnodes 2 \\
    --node-rank %s \\
    --dist-init-addr %s \\
    --kv-cache-dtype bf16
"""


def _fleet_hashes(tmp_path, units):
    """unit.fleet_sha256 as sglang_release's "Assemble the manifest" task records it, one case per unit text."""
    tasks = []
    for case, text in units.items():
        task = ansible_run.role_task("sglang_release", "manifest.yml", "Assemble the manifest")
        task["vars"].update({
            "sglang_release_dir": "/opt/sglang/releases/r1", "sglang_stack_sglang_repo": "",
            "sglang_stack_sglang_commit": "a" * 40, "sglang_release_manifest_unit_path": "/u",
            "sglang_stack_kernel_build_key": "", "sglang_stack_kv_cache_dtype": "",
            "sglang_stack_model_path": "", "sglang_release_manifest_model_revision": "",
            "sglang_release_manifest_model_verified": None, "sglang_stack_probe_result": {},
            "sglang_release_manifest_model_env": {},
            "__sglang_release_mf_venv": {}, "__sglang_release_mf_files": {"results": [{"stat": {"exists": True}}]},
            "__sglang_release_mf_unit": {"content": base64.b64encode(text.encode()).decode()} if text is not None else {}})
        tasks += [task, {"name": "keep " + case, "ansible.builtin.set_fact": {
            "hash_" + case: "{{ sglang_release_manifest.unit.fleet_sha256 }}"}}]
    tasks.append({"name": "record", "ansible.builtin.copy": {
        "dest": str(tmp_path / "hashes.json"), "mode": "0644",
        "content": "{{ {%s} | to_json }}" % ", ".join("'%s': hash_%s" % (c, c) for c in units)}})
    res = ansible_run.play(tmp_path, tasks)
    assert res.ok, res
    return json.loads((tmp_path / "hashes.json").read_text())


def test_ranks_of_one_server_hash_alike_and_real_unit_changes_do_not(tmp_path):
    got = _fleet_hashes(tmp_path, {
        "rank0": UNIT % ("0", "10.0.0.11:50000"), "rank1": UNIT % ("1", "10.0.0.11:50000"),
        "other_pair": UNIT % ("1", "[fd00::21]:50000"),
        "edited": (UNIT % ("0", "a:1")).replace("bf16", "fp8_e4m3"),
        "eq0": "--node-rank=0 --x", "eq1": "--node-rank=1 --x", "no_unit": None})
    assert got["rank0"] == got["rank1"] == got["other_pair"] and len(got["rank0"]) == 64
    assert got["edited"] != got["rank0"]
    assert got["eq0"] == got["eq1"] == hashlib.sha256(b"--node-rank=<per-node> --x").hexdigest()
    assert got["no_unit"] is None


def test_audit_compares_the_fleet_hash_not_the_file_hash():
    a = dict(BASE, unit={"path": "/u", "sha256": "1" * 64, "fleet_sha256": "f" * 64})
    b = dict(BASE, unit={"path": "/u", "sha256": "2" * 64, "fleet_sha256": "f" * 64})      # rank 1 of the pair
    c = dict(BASE, unit={"path": "/u", "sha256": "3" * 64, "fleet_sha256": "f" * 64})
    assert fleet_utils.fleet_drift({"gpu-a": a, "gpu-b": b, "gpu-c": c}) == []
    edited = dict(BASE, unit={"path": "/u", "sha256": "4" * 64, "fleet_sha256": "0" * 64})
    drift = fleet_utils.fleet_drift({"gpu-a": a, "gpu-b": b, "gpu-c": edited})
    assert [(d["host"], d["field"]) for d in drift] == [("gpu-c", "unit sha256")]
    # manifests from before fleet_sha256: the file hash is compared, as it was
    old = fleet_utils.fleet_drift({"h1": BASE, "h2": dict(BASE, unit={"path": "/u", "sha256": "9" * 64})})
    assert [d["field"] for d in old] == ["unit sha256"]


MODEL = {"path": "/srv/models/qwen@" + "a" * 40, "revision": "a" * 40, "source": "hub", "repository": "acme/qwen",
         "manifest_digest": "1" * 64}


def test_a_host_with_other_model_files_is_fleet_drift():
    manifests = {h: dict(copy.deepcopy(BASE), model=dict(MODEL)) for h in ("gpu-1", "gpu-2", "gpu-3")}
    manifests["gpu-2"]["model"]["manifest_digest"] = "2" * 64
    drift = fleet_drift(manifests)
    assert [(d["host"], d["field"], d["value"], d["expected"]) for d in drift] == [
        ("gpu-2", "model manifest digest", "2" * 64, "1" * 64)]


def test_manifests_without_a_model_section_compare_equal():
    assert fleet_drift({"gpu-1": BASE, "gpu-2": dict(BASE, model={"path": "", "revision": "", "source": None,
                                                                  "repository": None, "manifest_digest": None})}) == []


def test_pin_drift_compares_only_a_commit_pin():
    manifest = dict(BASE, model=dict(MODEL))
    assert fleet_utils.pin_drift("gpu-1", manifest, {"model_revision": "a" * 40}) == []
    assert fleet_utils.pin_drift("gpu-1", manifest, {"model_revision": "b" * 40}) == [
        {"host": "gpu-1", "field": "model revision", "value": "a" * 40, "expected": "b" * 40}]
    assert fleet_utils.pin_drift("gpu-1", manifest, {"model_revision": "main"}) == []     # a branch: resolved on the host
    assert fleet_utils.pin_drift("gpu-1", manifest, {"model_revision": ""}) == []         # no model pinned
    assert fleet_utils.pin_drift("gpu-1", {}, {"model_revision": "b" * 40}) == []         # no manifest: fleet drift says so
    report = drift_report({"gpu-1": manifest}, pins={"gpu-1": {"model_revision": "B" * 40}})
    assert report["drift"] is True and report["pins"][0]["expected"] == "b" * 40
    assert report["summary"] == ["pin drift on gpu-1: model revision = %r, the inventory pins %r" % ("a" * 40, "b" * 40)]


# ------------------------------------------------------------------- the model a release recorded (rollback, audit)

def _unit(model_path):
    from ansible_collections.blackwell.sglang.plugins.filter.sglang_service import systemd_exec_args
    lines = systemd_exec_args(["--model-path", model_path, "--port", "30000"], per_flag=True)
    return "[Service]\nExecStart=/opt/sglang/current/venv/bin/python -m sglang.launch_server -- \\\n    " + \
        " \\\n    ".join(lines) + "\n"


def test_unit_model_path_reads_back_what_the_service_role_quoted():
    for path in ("/srv/models/m@" + "a" * 40, "acme/model", "/srv/my models/x\"y\\z", "/m/100%$HOME"):
        assert fleet_utils.unit_model_path(_unit(path)) == path, path
    assert fleet_utils.unit_model_path("[Service]\nExecStart=/bin/true\n") is None
    assert fleet_utils.unit_model_path(None) is None


def _b64(data):
    import base64
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def test_read_manifest_gives_the_recorded_model_and_never_raises():
    good = fleet_utils.read_manifest(_b64('{"model": {"path": "/m", "revision": "r", "manifest_digest": "d",'
                                          ' "service_env": {"HF_HUB_OFFLINE": "1"}}}'), "/r/A/manifest.json")
    assert good["problem"] is None and good["model"] == {
        "recorded": True, "path": "/m", "revision": "r", "manifest_digest": "d", "source": None, "repository": None,
        "service_env": {"HF_HUB_OFFLINE": "1"}, "problem": None}
    # an environment that is not a str -> str map is not recorded (the rollback keeps the configured one)
    assert fleet_utils.read_manifest(_b64('{"model": {"path": "/m", "service_env": {"A": 1}}}'))["model"]["service_env"] is None
    cases = {
        None: "/r/A/manifest.json cannot be read: file not found",
        _b64('{"schema": 1}'): "/r/A/manifest.json records no model",
        _b64('{"model": {"path": 7}}'): "/r/A/manifest.json records no model",
        _b64('{"model": '): "/r/A/manifest.json is not valid JSON",
        _b64("[]"): "/r/A/manifest.json is not a JSON object but a list",
        _b64(b'{"a": "\xfe"}'): "/r/A/manifest.json is not UTF-8: byte 0xfe at offset 7",
        "not base64!": "/r/A/manifest.json: not base64",
    }
    for content, why in cases.items():
        out = fleet_utils.read_manifest(content, "/r/A/manifest.json", error="file not found")
        assert out["model"]["recorded"] is False and out["model"]["problem"].startswith(why), (content, out)


def test_host_drift_names_a_unit_serving_another_model_than_recorded():
    manifest = copy.deepcopy(BASE)
    manifest["model"] = {"path": "/srv/models/m1"}
    live = {"distributions": dict(BASE["packages"]), "unit_sha256": BASE["unit"]["sha256"]}
    assert host_drift("gpu-1", manifest, dict(live, unit_text=_unit("/srv/models/m1"))) == []
    assert host_drift("gpu-1", manifest, dict(live, unit_text=_unit("acme/m2"))) == [
        {"host": "gpu-1", "field": "model path", "value": "acme/m2", "expected": "/srv/models/m1"}]
    assert host_drift("gpu-1", manifest, live) == []                       # no unit read: nothing to compare
    assert host_drift("gpu-1", BASE, dict(live, unit_text=_unit("acme/m2"))) == []   # no model recorded
