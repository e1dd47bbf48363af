"""The rule specs of the one input check per role (module_utils/_inputs.py, the filter input_problems): a typo in a
role's rule table is an error of the role (the filter fails, naming the rule), never a silently skipped check; and
the rules with arguments mean what their names say."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter import inputs as filters
from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs

from ansible.errors import AnsibleFilterError


@pytest.mark.parametrize("spec, match", [
    ("nope", "unknown input rule 'nope'"),
    ("int(mn=1)", "unexpected keyword"),
    ("int(min=x)", "literals"),
    ("pattern('[a-')", "pattern"),
    ("1 + 2", "not a rule name"),
], ids=["unknown", "keyword", "not-literal", "regex", "expression"])
def test_a_bad_rule_spec_fails_the_filter(spec, match):
    with pytest.raises(AnsibleFilterError, match=match):
        filters.input_problems({spec: {"x_value": 1}})


def test_the_table_form_and_the_one_rule_form_agree():
    assert filters.input_problems({"int(min=1)": {"a_x": 0}}) == filters.input_problems({"a_x": 0}, "int(min=1)")
    assert filters.input_problems({"int(min=1)": {}}) == []
    with pytest.raises(AnsibleFilterError, match="expected a dict"):
        filters.input_problems({"int(min=1)": ["a_x"]})


@pytest.mark.parametrize("spec, good, bad", [
    ("int(min=1)", [1, "8", 8.0], [0, -1, "eight", 1.5, True, None, [0]]),
    ("int(min=8, max=64)", [8, 64], [7, 65]),
    ("number(gt=0, lt=1)", [0.5, "0.85"], [0, 1, 1.5, "x", float("nan")]),
    ("number(min=0)", [0, 60.5], [-5, -0.1]),
    ("major_minor", ["13.0", 12.8], ["latest", "13", "13.0.1", ""]),
    ("major_minor(min='12.8')", ["12.8", "13.0", "12.10"], ["12.4", "11.8"]),
    ("env_name", ["SMG_GATEWAY_API_KEY", "_K"], ["1BAD", "A-B", "", "A B", None]),
    ("commit_id", ["d28f35240a", "d28f35240a28de1e09967975e258b3dd7e74924f"], ["main", "v0.5.9", "abc", ""]),
    ("cuda_arch", [["sm_120a"], ["sm_90a", "sm_100f"]], [["sm_120"], [], ["compute_120"]]),
    ("octal_mode", ["0755", "644"], [755, "0789", "rwx"]),
    ("duration", ["15s", "2m", "1h30m", "30d"], ["1min", "0s", "", "15"]),
    ("timespan", ["1min", "15s", "2h 30min", 30], ["soon", "0", ""]),
    ("url", ["https://a.example/x", "http://127.0.0.1:8080/simple"], ["a.example", "ftp://x", "https://a b", ""]),
    ("url(empty=True)", [""], ["x"]),
    ("model_path", ["", "/srv/models/x", "nvidia/Qwen3.5-397B-A17B-NVFP4"], ["../x", "models", "/srv/../etc"]),
    ("gemm_shapes", [[{"n": 256, "k": 512}]], [[{"n": 256, "k": 500}], [{"n": 0, "k": 32}], [{"n": 1}], "x"]),
    ("moe_shapes", [[{"hidden": 1, "intermediate": 1, "experts": 8, "top_k": 2}]],
     [[{"hidden": 1, "intermediate": 1, "experts": 2, "top_k": 3}]]),
])
def test_rules(spec, good, bad):
    for value in good:
        assert _inputs.problems({"x_value": value}, spec) == [], (spec, value)
    for value in bad:
        out = _inputs.problems({"x_value": value}, spec)
        assert out and all(m.startswith("x_value") for m in out), (spec, value, out)


def test_commit_id_names_its_switch_and_url_masks_a_token():
    out = _inputs.problems({"x_ref": "main"}, "commit_id(allow='x_allow_floating')")
    assert "set x_allow_floating: true" in out[0]
    out = _inputs.problems({"x_url": "https://bob:s3cret@h/x y"}, "url")
    assert "s3cret" not in out[0] and "********" in out[0]


def test_outside_collection(tmp_path):
    """Refused inside an installed collection (MANIFEST.json at its root); a checkout keeps its .cache/."""
    (tmp_path / "coll").mkdir()
    inside, outside = str(tmp_path / "coll" / ".cache" / "x"), str(tmp_path / "elsewhere")
    assert _inputs.rule_outside_collection("x_dir", inside, root=str(tmp_path / "coll")) == []     # a checkout
    (tmp_path / "coll" / "MANIFEST.json").write_text("{}")
    assert "inside the installed collection" in _inputs.rule_outside_collection("x_dir", inside, root=str(tmp_path / "coll"))[0]
    assert _inputs.rule_outside_collection("x_dir", outside, root=str(tmp_path / "coll")) == []
    assert _inputs.rule_outside_collection("x_dir", "", root=str(tmp_path / "coll")) == []
    (tmp_path / "link").symlink_to(tmp_path / "coll")
    assert _inputs.rule_outside_collection("x_dir", str(tmp_path / "link" / "a"), root=str(tmp_path / "coll"))
