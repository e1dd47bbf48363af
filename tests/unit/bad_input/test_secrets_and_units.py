"""The API key never reaches argv, the environment or a world-readable file; values reach units, environment files
and the health-gate code only quoted; argparse abbreviations cannot bypass the guards."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from harness import ROOT, run_play

from ansible_collections.blackwell.sglang.plugins.filter import inputs as input_filters
from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags as sf

LAUNCHER = os.path.join(ROOT, "roles", "sglang_service", "files", "sglang_launch.py")
ROLE = os.path.join(ROOT, "roles", "sglang_service")
KEY = "sk-bad-input-" + "q" * 30

STAND_IN = r'''
import json, logging, os, sys
logging.basicConfig(level=logging.INFO)       # as SGLang's configure_logger: a handler on sys.stderr, set up late
with open("/proc/self/cmdline", "rb") as fh:
    cmdline = fh.read().split(b"\0")
with open("/proc/self/environ", "rb") as fh:
    environ = fh.read()
with open(os.environ["STAND_IN_OUT"], "w") as out:    # a file: stdout is masked by the launcher
    json.dump({"argv": sys.argv[1:], "cmdline": [c.decode() for c in cmdline if c],
               "key_in_environ": %r.encode() in environ}, out)
print("stdout line with the key: " + sys.argv[-1])
logging.info("server_args=ServerArgs(model_path='/m', api_key=%%r)", sys.argv[sys.argv.index("--api-key") + 1])
'''


def _launch(tmp_path, credential=KEY, args=("--model-path", "/m")):
    creds = tmp_path / "creds"
    creds.mkdir(exist_ok=True)
    if credential is not None:
        (creds / "sglang-api-key").write_text(credential + "\n")
    stand_in = tmp_path / "stand_in.py"
    stand_in.write_text(STAND_IN % KEY)
    env = dict(os.environ, CREDENTIALS_DIRECTORY=str(creds), STAND_IN_OUT=str(tmp_path / "seen.json"))
    env.pop("SGLANG_API_KEY", None)
    return subprocess.run([sys.executable, LAUNCHER, "--credential", "sglang-api-key=--api-key", "--script",
                           str(stand_in), "--"] + list(args), capture_output=True, text=True, env=env, timeout=60,
                          check=False)


def test_launcher_gives_the_key_in_process_only(tmp_path):
    proc = _launch(tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["argv"][-2:] == ["--api-key", KEY]               # what SGLang's parser reads
    assert not any(KEY in c for c in seen["cmdline"])            # what ps / /proc/<pid>/cmdline show
    assert seen["key_in_environ"] is False                       # /proc/<pid>/environ
    assert KEY not in proc.stderr and "api_key='********'" in proc.stderr   # the journal line of server_args
    assert KEY not in proc.stdout and "with the key: ********" in proc.stdout


@pytest.mark.parametrize("credential, needle", [(None, "cannot read credential"), ("", "empty"),
                                                ("a\nb", "several lines")])
def test_launcher_refuses_a_bad_credential(tmp_path, credential, needle):
    proc = _launch(tmp_path, credential=credential)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def test_launcher_needs_the_separator(tmp_path):
    proc = subprocess.run([sys.executable, LAUNCHER, "--model-path", "/m"], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == 2 and "unknown option" in proc.stderr


def _render(tmp_path, extra):
    """The role's unit, environment file and health gate, rendered by ansible's template module."""
    facts = {
        "sglang_service_model_path": "/srv/models/qwen", "sglang_service_api_key": KEY,
        "__sglang_service_argv": ["--model-path", "/srv/models/qwen", "--host", "0.0.0.0"],
        "__sglang_service_backends": {"source": "probe"}, "__sglang_service_kv": {"dtype": "bf16", "reason": "test"},
        "__sglang_service_parser": {"revision": "0.5.9"}, "__sglang_service_device_closed": False,
        "__sglang_service_nvidia_groups": [], "__sglang_service_persistenced": False, "__sglang_service_nvidia_modprobe": False,
        "__sglang_service_plan": {"env": {"NCCL_P2P_DISABLE": "1"}}, "__sglang_service_model_path": "/srv/models/qwen",
        "__sglang_service_state_dir_name": "sglang", "__sglang_service_cache_dir_name": "sglang",
        "__sglang_service_rdma_groups": [], "__sglang_service_rdma_paths": [],
    }
    facts.update(extra)
    tasks = [{"name": "render %s" % name, "ansible.builtin.template": {
        "src": os.path.join(ROLE, "templates", name), "dest": str(tmp_path / name.replace(".j2", "")), "mode": "0644"}}
        for name in ("sglang.service.j2", "sglang.env.j2", "sglang-health-gate.py.j2")]
    # the role's defaults on top of the stack contract's (roles/sglang_stack), which they read
    contract = os.path.join(ROLE, "..", "sglang_stack", "defaults", "main.yml")
    (tmp_path / "defaults.yml").write_text(open(contract).read() + open(os.path.join(ROLE, "defaults", "main.yml")).read()
                                           .replace("---\n", "", 1))
    run = run_play(tmp_path, [{"name": "defaults", "ansible.builtin.include_vars": str(tmp_path / "defaults.yml")}] + tasks,
                   facts, check=False, env={"BAD_INPUT_BLOCK": "0"})
    assert run.rc == 0, run
    return {name: (tmp_path / name).read_text() for name in ("sglang.service", "sglang.env", "sglang-health-gate.py")}


def test_unit_loads_the_key_as_a_credential_and_never_names_it(tmp_path):
    files = _render(tmp_path, {})
    unit = files["sglang.service"]
    assert KEY not in unit and KEY not in files["sglang.env"]
    assert "LoadCredential=sglang-api-key:/etc/blackwell-sglang/credentials/sglang-api-key" in unit
    assert "--credential sglang-api-key=--api-key --" in unit and "--api-key ${" not in unit
    assert "EnvironmentFile=/etc/blackwell-sglang/sglang-secrets.env" not in unit


def test_env_values_are_quoted_and_paths_with_spaces_kept(tmp_path):
    files = _render(tmp_path, {"sglang_service_extra_env": {"HF_HUB_OFFLINE": "1", "WEIRD": 'a "b" $HOME `x` \\'},
                               "sglang_service_read_write_paths": ["/srv/with space"]})
    assert 'WEIRD="a \\"b\\" \\$HOME \\`x\\` \\\\"' in files["sglang.env"]
    assert 'NCCL_P2P_DISABLE="1"' in files["sglang.env"]
    assert 'ReadWritePaths="/srv/with space"' in files["sglang.service"]


@pytest.mark.parametrize("host, url", [("10.1.2.3", "http://10.1.2.3:30000/health"),
                                       ("fd00::5", "http://[fd00::5]:30000/health"),
                                       ("0.0.0.0", "http://127.0.0.1:30000/health")])
def test_health_gate_gets_the_url_as_a_json_literal(tmp_path, host, url):
    gate = _render(tmp_path, {"sglang_stack_service_host": host})["sglang-health-gate.py"]
    compile(gate, "gate", "exec")
    assert "URL = %s\n" % json.dumps(url) in gate


def test_systemd_env_value_refuses_a_newline():
    with pytest.raises(Exception, match="newline"):
        input_filters.systemd_env_value("a\nb")


# --- abbreviations resolved through the installed parser (the recorded 0.5.9 ServerArgs) ----------------------------

def _spec():
    with open(os.path.join(ROOT, "tests", "fixtures", "service", "parsers", "sglang-0.5.9.json")) as handle:
        recorded = json.load(handle)
    return sf.parser_spec_from_actions(recorded["actions"], allow_abbrev=recorded.get("allow_abbrev", True))


@pytest.mark.parametrize("argv, needle", [
    (["--model-path", "/m", "--api-k", "hunter2"], "resolves to --api-key"),
    (["--model-path", "/m", "--admin-api", "hunter2"], "resolves to --admin-api-key"),
    (["--model-path", "/m", "--tp-size", "1", "--tp", "8"], "same option"),
    (["--model-path", "/m", "--model", "/other"], "same option"),
], ids=["api-k", "admin-api", "tp-beside-tp-size", "model-alias"])
def test_parser_resolves_abbreviations_before_the_guards(argv, needle):
    with pytest.raises(sf.FlagError, match=needle):
        sf.validate_args(argv, _spec(), "sglang 0.5.9")


def test_parser_accepts_the_credential_reference():
    assert sf.validate_args(["--model-path", "/m", "--api-key", "${SGLANG_API_KEY_CREDENTIAL}"], _spec(), "sglang 0.5.9")


def test_merge_keeps_computed_flags_and_names_overrides():
    merged = sf.merge_extra_args(["--disable-custom-all-reduce", "--cuda-graph-max-bs", "8"],
                                 ["--cuda-graph-max-bs", "16", "--enable-torch-compile"])
    assert merged["args"] == ["--disable-custom-all-reduce", "--cuda-graph-max-bs", "16", "--enable-torch-compile"]
    assert merged["overridden"] == ["--cuda-graph-max-bs"]
    assert sf.merge_extra_args(["--disable-custom-all-reduce"], ["--enable-metrics"])["args"] == [
        "--disable-custom-all-reduce", "--enable-metrics"]


@pytest.mark.parametrize("line, secret", [
    ("server_args=ServerArgs(api_key='%s', port=1)" % KEY, KEY),
    ('{"admin_api_key": "%s"}' % KEY, KEY),
    ("curl -H 'Authorization: Bearer %s'" % KEY, KEY),
    ("token hf_%s" % ("A" * 30), "hf_" + "A" * 30),
    ("git clone https://bob:%s@git.example/x" % KEY, KEY),
])
def test_mask_removes_keys_from_log_lines(line, secret):
    assert secret not in _inputs.mask(line) and "********" in _inputs.mask(line)


def test_repository_urls_are_masked():
    assert _inputs.mask_url("https://bob:tok123@git.example/x.git") == "https://bob:********@git.example/x.git"
    assert _inputs.mask_url("https://ghp_abcdefghijklmnopqrstuvwx@github.example/x") == "https://********@github.example/x"


def test_molecule_side_effect_is_yaml():
    """The sandbox check of a running launcher (molecule/sglang_service) is at least well-formed."""
    path = os.path.join(ROOT, "molecule", "sglang_service", "side_effect.yml")
    assert yaml.safe_load(open(path))
