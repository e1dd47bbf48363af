# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Directories, files and removals of one role, checked and put right in one module call.

A no-op converge pays two module runs (``stat``, then ``file`` for the attributes) for every ``template`` and
``copy`` task and one for every ``file`` task, a round trip each; one call for a role's files pays one.
:func:`plan` reads everything first and changes nothing, so a bad
entry (an unknown owner, a directory where a file should be, a parent that is not a directory) fails before the
first change; :func:`apply` then makes only the changes the plan lists.

Shapes (all paths absolute, modes octal strings such as ``"0644"``)::

    directories: [{"path": str, "mode": str, "owner": str|None, "group": str|None}]
    files:       [{"dest": str, "content": str, "mode": str, "owner": str|None, "group": str|None}]
    absent:      [str]      # a file or a symlink; never a directory

A plan is a list of actions ``{"path", "kind": directory|file|absent, "action": create|update|attributes|remove|none,
"reasons": [...]}`` in the order given (directories, then files, then removals); an owner or group of None is not
managed (uid/gid -1). Files are written atomically: a temporary file in the same directory gets the content, the
owner and the mode, is flushed to disk and renamed over the destination, so a reader sees the old or the new file,
never half of one, and a secret never exists with a wider mode than asked.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
import tempfile


class PlanError(Exception):
    """An entry that cannot be applied; the message names the entry (raised before anything changed)."""


def _mode(value, where):
    """An octal string ("0644"), or an int as YAML reads an unquoted 0644 (the bits themselves, as the file module)."""
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value
    else:
        try:
            mode = int(str(value), 8)
        except ValueError:
            raise PlanError("%s: mode %r is not an octal mode such as '0644'" % (where, value))
    if mode < 0 or mode > 0o7777:
        raise PlanError("%s: mode %r is out of range" % (where, value))
    return mode


def _uid(owner, where):
    if owner is None:
        return -1  # not managed: a new entry gets the module's user, an existing one keeps its owner
    try:
        return pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise PlanError("%s: owner %r does not exist on this host" % (where, owner))


def _gid(group, where):
    if group is None:
        return -1
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise PlanError("%s: group %r does not exist on this host" % (where, group))


def _absolute(path, where):
    if not path or not os.path.isabs(path):
        raise PlanError("%s: %r is not an absolute path" % (where, path))
    return os.path.normpath(path)


def _attr_reasons(st, mode, uid, gid):
    reasons = []
    if stat.S_IMODE(st.st_mode) != mode:
        reasons.append("mode %04o -> %04o" % (stat.S_IMODE(st.st_mode), mode))
    if uid != -1 and st.st_uid != uid:
        reasons.append("owner uid %d -> %d" % (st.st_uid, uid))
    if gid != -1 and st.st_gid != gid:
        reasons.append("group gid %d -> %d" % (st.st_gid, gid))
    return reasons


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def _parent_ok(path, where, planned_dirs):
    """The nearest existing ancestor must be a directory (a file there would make every later step fail)."""
    parent = os.path.dirname(path)
    while parent and parent not in planned_dirs and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    if parent and parent not in planned_dirs and not os.path.isdir(parent):
        raise PlanError("%s: %s is in the way: it is not a directory" % (where, parent))


def plan(directories=(), files=(), absent=(), check_mode=False):
    """Read the host and return the actions (list of dicts, see the module docstring); raise PlanError first.

    In check mode a file whose directory is missing is reported as created: an earlier task that would have made the
    directory did not run either, so the missing directory is not an error there.
    """
    actions = []
    planned_dirs = set()
    for index, entry in enumerate(directories):
        where = "directories[%d]" % index
        path = _absolute(entry.get("path"), where)
        where = "%s (%s)" % (where, path)
        mode, uid, gid = _mode(entry["mode"], where), _uid(entry.get("owner"), where), _gid(entry.get("group"), where)
        item = {"path": path, "kind": "directory", "mode": mode, "uid": uid, "gid": gid, "reasons": []}
        if not os.path.lexists(path):
            _parent_ok(path, where, planned_dirs)
            item.update(action="create", reasons=["missing"])
        elif os.path.islink(path) or not os.path.isdir(path):
            raise PlanError("%s: exists and is not a directory (refusing to replace it)" % where)
        else:
            reasons = _attr_reasons(os.stat(path), mode, uid, gid)
            item.update(action="attributes" if reasons else "none", reasons=reasons)
        planned_dirs.add(path)
        actions.append(item)
    for index, entry in enumerate(files):
        where = "files[%d]" % index
        path = _absolute(entry.get("dest"), where)
        where = "%s (%s)" % (where, path)
        content = entry.get("content")
        if content is None:
            raise PlanError("%s: content is required" % where)
        data = content.encode("utf-8")
        mode, uid, gid = _mode(entry["mode"], where), _uid(entry.get("owner"), where), _gid(entry.get("group"), where)
        item = {"path": path, "kind": "file", "mode": mode, "uid": uid, "gid": gid, "data": data, "before": None}
        if not os.path.lexists(path):
            parent = os.path.dirname(path)
            reasons = ["missing"]
            if parent not in planned_dirs and not os.path.isdir(parent):
                if not check_mode or os.path.lexists(parent):
                    raise PlanError("%s: the directory %s does not exist (list it under directories)" % (where, parent))
                reasons.append("directory %s missing (check mode)" % parent)
            item.update(action="create", reasons=reasons)
        elif os.path.islink(path) or not os.path.isfile(path):
            raise PlanError("%s: exists and is not a regular file (refusing to replace it)" % where)
        else:
            st = os.stat(path)
            # an owner or group that is not managed stays what it is, also when the content is rewritten
            item["uid"] = st.st_uid if uid == -1 else uid
            item["gid"] = st.st_gid if gid == -1 else gid
            before = _read(path)
            reasons = [] if before == data else ["content"]
            if reasons:
                item["before"] = before
                item.update(action="update", reasons=reasons + _attr_reasons(st, mode, uid, gid))
            else:
                reasons = _attr_reasons(st, mode, uid, gid)
                item.update(action="attributes" if reasons else "none", reasons=reasons)
        actions.append(item)
    for index, raw in enumerate(absent):
        where = "absent[%d]" % index
        path = _absolute(raw, where)
        item = {"path": path, "kind": "absent", "reasons": []}
        if not os.path.lexists(path):
            item["action"] = "none"
        elif os.path.isdir(path) and not os.path.islink(path):
            raise PlanError("%s (%s): is a directory (only files and links are removed)" % (where, path))
        else:
            item.update(action="remove", reasons=["present"])
        actions.append(item)
    return actions


def _write(item):
    directory = os.path.dirname(item["path"])
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(item["path"]), dir=directory)
    try:
        # mkstemp creates the file 0600: the content never exists with a wider mode than the one asked for
        os.fchown(fd, item["uid"], item["gid"])
        os.write(fd, item["data"])  # one write: the content is at most a few hundred kB (units, scripts, manifests)
        os.fsync(fd)
        os.fchmod(fd, item["mode"])
        os.close(fd)
        fd = None
        os.replace(tmp, item["path"])
    except BaseException:
        if fd is not None:
            os.close(fd)
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def apply(actions):
    """Carry out every action that is not ``none``; return the changed paths in order. OSError propagates."""
    changed = []
    for item in actions:
        action = item["action"]
        if action == "none":
            continue
        path = item["path"]
        if item["kind"] == "directory":
            if action == "create":
                os.makedirs(path, exist_ok=True)
            os.chown(path, item["uid"], item["gid"])
            os.chmod(path, item["mode"])
        elif item["kind"] == "file":
            if action in ("create", "update"):
                _write(item)
            else:
                os.chown(path, item["uid"], item["gid"])
                os.chmod(path, item["mode"])
        else:
            os.unlink(path)
        changed.append(path)
    return changed


def report(actions):
    """The module's ``results``: one dict per entry, without the content (units, scripts; no bytes in the output)."""
    return [{"path": a["path"], "kind": a["kind"], "action": a["action"], "changed": a["action"] != "none",
             "reasons": a["reasons"]} for a in actions]


def diffs(actions):
    """Ansible's ``diff`` list (before/after text) for the files whose content changes, and for created directories."""
    out = []
    for a in actions:
        if a["kind"] == "file" and a["action"] in ("create", "update"):
            before = "" if a["before"] is None else a["before"].decode("utf-8", "replace")
            out.append({"before_header": a["path"], "after_header": a["path"], "before": before,
                        "after": a["data"].decode("utf-8", "replace")})
        elif a["action"] != "none":
            out.append({"before_header": a["path"], "after_header": a["path"],
                        "before": "%s: present\n" % a["kind"] if a["action"] != "create" else "absent\n",
                        "after": "absent\n" if a["action"] == "remove" else "%s: %s\n" % (a["kind"], ", ".join(a["reasons"]))})
    return out
