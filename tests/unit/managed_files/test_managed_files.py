"""blackwell.sglang.managed_files: a role's directories, files and removals in one module call.

module_utils._managed_files is tested on real temporary trees (plan, then apply); the module itself runs for real
through ansible-playbook on localhost, twice (the second run reports no change, as a no-op converge must), in check
mode and in diff mode, and with a bad entry that must fail before anything changed.
"""

import grp
import os
import pwd
import stat

import pytest

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils import _managed_files as mf

ME = pwd.getpwuid(os.getuid()).pw_name
MY_GROUP = grp.getgrgid(os.getgid()).gr_name


def _mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def _entries(tmp_path):
    d = tmp_path / "etc" / "sglang"
    dirs = [{"path": str(d), "mode": "0755", "owner": ME, "group": MY_GROUP},
            {"path": str(d / "credentials"), "mode": "0700", "owner": ME, "group": MY_GROUP}]
    files = [{"dest": str(d / "sglang.env"), "content": "A=1\n", "mode": "0644", "owner": ME, "group": MY_GROUP},
             {"dest": str(d / "credentials" / "key"), "content": "secret\n", "mode": "0600", "owner": ME,
              "group": MY_GROUP}]
    return d, dirs, files


def test_creates_then_reports_nothing_to_do(tmp_path):
    d, dirs, files = _entries(tmp_path)
    old = tmp_path / "secrets.env"
    old.write_text("KEY=x\n")
    actions = mf.plan(dirs, files, [str(old)])
    assert [a["action"] for a in actions] == ["create", "create", "create", "create", "remove"]
    assert mf.apply(actions) == [str(d), str(d / "credentials"), str(d / "sglang.env"), str(d / "credentials" / "key"),
                                 str(old)]
    assert (d / "sglang.env").read_text() == "A=1\n"
    assert _mode(d / "credentials") == 0o700 and _mode(d / "credentials" / "key") == 0o600
    assert _mode(d / "sglang.env") == 0o644
    assert not old.exists()
    again = mf.plan(dirs, files, [str(old)])
    assert [a["action"] for a in again] == ["none"] * 5
    assert mf.apply(again) == []


def test_each_kind_of_drift_is_put_right(tmp_path):
    d, dirs, files = _entries(tmp_path)
    mf.apply(mf.plan(dirs, files))
    (d / "sglang.env").write_text("A=2\n")          # a hand edit
    os.chmod(d / "credentials" / "key", 0o644)      # a widened secret
    os.chmod(d, 0o700)                               # a directory mode
    actions = {a["path"]: a for a in mf.plan(dirs, files)}
    assert actions[str(d / "sglang.env")]["action"] == "update"
    assert actions[str(d / "sglang.env")]["reasons"] == ["content"]
    assert actions[str(d / "credentials" / "key")]["action"] == "attributes"
    assert actions[str(d / "credentials" / "key")]["reasons"] == ["mode 0644 -> 0600"]
    assert actions[str(d)]["action"] == "attributes"
    mf.apply(list(actions.values()))
    assert (d / "sglang.env").read_text() == "A=1\n"
    assert _mode(d / "credentials" / "key") == 0o600 and _mode(d) == 0o755


def test_a_rewritten_file_is_replaced_whole_and_never_wider_than_asked(tmp_path, monkeypatch):
    dirs, files = _entries(tmp_path)[1:]
    mf.apply(mf.plan(dirs, files))
    key = files[1]["dest"]
    inode = os.stat(key).st_ino
    files[1]["content"] = "rotated\n"
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        seen.append(_mode(src))       # the temporary file, complete, just before it is renamed over the key
        real_replace(src, dst)
    monkeypatch.setattr(mf.os, "replace", replace)
    mf.apply(mf.plan(dirs, files))
    assert seen == [0o600]
    assert open(key).read() == "rotated\n"
    assert os.stat(key).st_ino != inode            # a new file renamed into place, not an in-place write
    assert [p for p in os.listdir(os.path.dirname(key)) if p.startswith(".")] == []


@pytest.mark.parametrize("case, message", [
    ("relative", "is not an absolute path"),
    ("mode", "is not an octal mode"),
    ("owner", "does not exist on this host"),
    ("file_is_dir", "is not a regular file"),
    ("dir_is_file", "is not a directory"),
    ("no_parent", "does not exist (list it under directories)"),
    ("absent_dir", "is a directory"),
])
def test_bad_entries_fail_before_any_change(tmp_path, case, message):
    d, dirs, files = _entries(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    plain = tmp_path / "plain"
    plain.write_text("x")
    absent = []
    if case == "relative":
        files[0]["dest"] = "etc/sglang.env"
    elif case == "mode":
        files[0]["mode"] = "rw-r--r--"
    elif case == "owner":
        dirs[1]["owner"] = "no-such-user-blackwell"
    elif case == "file_is_dir":
        files.append({"dest": str(blocker), "content": "x", "mode": "0644"})
    elif case == "dir_is_file":
        dirs.append({"path": str(plain), "mode": "0755"})
    elif case == "no_parent":
        files.append({"dest": str(tmp_path / "missing" / "f"), "content": "x", "mode": "0644"})
    elif case == "absent_dir":
        absent = [str(blocker)]
    with pytest.raises(mf.PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        mf.plan(dirs, files, absent)
    assert not d.exists() and plain.read_text() == "x" and blocker.is_dir()


def test_owner_and_group_left_alone_when_not_given(tmp_path):
    if os.getuid() != 0:
        pytest.skip("needs root to give the file another owner")
    path = tmp_path / "f"
    path.write_text("x")
    os.chown(path, 65534, 65534)  # nobody / nogroup: not the module's user
    entry = [{"dest": str(path), "content": "x", "mode": "%04o" % _mode(path)}]
    assert mf.plan([], entry)[0]["action"] == "none"
    entry[0]["content"] = "y"       # rewritten: a new file renamed into place keeps the owner it had
    mf.apply(mf.plan([], entry))
    assert path.read_text() == "y" and (os.stat(path).st_uid, os.stat(path).st_gid) == (65534, 65534)


def _playbook(tmp_path, *, check=False, diff=False, bad=False):
    base = tmp_path / "host"
    entry = {"directories": [{"path": str(base), "mode": "0755"}],
             "files": [{"dest": str(base / "unit.service"), "content": "[Service]\nExecStart=/bin/true\n",
                        "mode": "0644"},
                       {"dest": str(base / "gate.py"), "content": "print('ok')\n",
                        "mode": "0644" if not bad else "0o644x"}],
             "absent": [str(base / "old.env")], "owner": ME, "group": MY_GROUP}
    tasks = [{"name": "write", "blackwell.sglang.managed_files": entry, "register": "written"},
             {"name": "result", "ansible.builtin.debug": {"var": "written"}}]
    return ansible_run.play(tmp_path, tasks, check=check, diff=diff), base


def _recap(out):
    line = [l for l in out.splitlines() if l.startswith("localhost") and "ok=" in l][-1]
    return dict(kv.split("=") for kv in line.split(":", 1)[1].split())


def test_module_runs_for_real_check_mode_diff_and_a_second_run_is_a_no_op(tmp_path):
    proc, base = _playbook(tmp_path, check=True, diff=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert _recap(proc.stdout)["changed"] == "1" and not base.exists()    # check mode: reported, nothing written
    assert "+ExecStart=/bin/true" in proc.stdout                            # the diff shows the unit's new text
    proc, base = _playbook(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert _recap(proc.stdout)["changed"] == "1"
    assert (base / "unit.service").read_text() == "[Service]\nExecStart=/bin/true\n"
    proc = _playbook(tmp_path)[0]
    assert proc.returncode == 0 and _recap(proc.stdout)["changed"] == "0"
    assert '"changed_paths": []' in proc.stdout


def test_module_bad_mode_fails_naming_the_entry_and_changes_nothing(tmp_path):
    proc, base = _playbook(tmp_path, bad=True)
    assert proc.returncode != 0
    assert "files[1]" in proc.stdout and "is not an octal mode" in proc.stdout and "nothing was changed" in proc.stdout
    assert not base.exists()


def test_an_unquoted_yaml_mode_means_the_same_bits(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    os.chmod(path, 0o644)
    as_int = mf.plan([], [{"dest": str(path), "content": "x", "mode": 0o644}])   # YAML 1.1 reads 0644 as 420
    as_str = mf.plan([], [{"dest": str(path), "content": "x", "mode": "0644"}])
    assert as_int[0]["action"] == as_str[0]["action"] == "none"


def test_check_mode_reports_a_file_whose_directory_an_earlier_task_would_make(tmp_path):
    dest = tmp_path / "releases" / "abc" / "manifest.json"
    entry = [{"dest": str(dest), "content": "{}\n", "mode": "0644"}]
    with pytest.raises(mf.PlanError, match="does not exist"):
        mf.plan([], entry)
    actions = mf.plan([], entry, check_mode=True)
    assert actions[0]["action"] == "create" and "check mode" in actions[0]["reasons"][1]
    (tmp_path / "releases").write_text("a file where the directory should be")
    with pytest.raises(mf.PlanError):
        mf.plan([], [{"dest": str(tmp_path / "releases" / "x"), "content": "", "mode": "0644"}], check_mode=True)
