# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Reading a checkpoint directory without leaving it: the link rule (docs/model.md "Links and special files").

Pure Python (stdlib). Every reader of a checkpoint (sglang_model_verify, sglang_model_fetch, sglang_checkpoint_facts,
the archive check) goes through :func:`scan` and :func:`open_file`.

The rule:

* The **model root** is the real path of the checkpoint directory. For a Hugging Face cache snapshot
  (``<cache>/models--<org>--<name>/snapshots/<commit>``, with a ``blobs`` directory beside ``snapshots``) it is the
  cache repository directory ``<cache>/models--<org>--<name>``, so the snapshot's links ``../../blobs/<sha>`` resolve.
* A name in the checkpoint is a regular file, a directory, or a **relative** symbolic link whose full resolution is a
  regular file inside the model root. Refused, naming the entry and the target: an absolute link (a checkpoint must
  stay whole when moved, copied or promoted, so even one pointing back inside is refused), a link that resolves
  outside the root, a dangling link, a link loop, a link to a directory, a FIFO, socket or device (directly or
  behind a link), and a regular file with more hard links than it has names inside the root (another name outside
  can change it, and it may be any file of the host).
* Sizes and digests come from one open file descriptor (``fstat`` of what is read), never from ``lstat`` of a link
  against the bytes of its target. The descriptor is opened with ``O_NOFOLLOW`` on the resolved path and, where
  ``/proc/self/fd`` exists, its real location is checked again, so a link swapped after the check is not followed.
"""

from __future__ import annotations

import errno
import os
import re
import stat

HF_REPO_RE = re.compile(r"^(models|datasets|spaces)--.+")


class TreeError(ValueError):
    """One entry of a checkpoint breaks the link rule: ``rel`` (path inside the checkpoint) and ``reason``."""

    def __init__(self, rel, reason):
        super(TreeError, self).__init__("%s: %s" % (rel, reason))
        self.rel = rel
        self.reason = reason


class Entry(object):
    """A readable file of the checkpoint: ``rel``, ``real`` (resolved path), ``stat`` (of the file read), ``link``
    (the link's text, or None)."""

    __slots__ = ("rel", "real", "stat", "link")

    def __init__(self, rel, real, st, link):
        self.rel, self.real, self.stat, self.link = rel, real, st, link


def model_root(path):
    """``(real_dir, root)``: the checkpoint's real path and the root its links may resolve into (the rule above)."""
    real = os.path.realpath(path)
    snapshots = os.path.dirname(real)
    repo = os.path.dirname(snapshots)
    if (os.path.basename(snapshots) == "snapshots" and HF_REPO_RE.match(os.path.basename(repo))
            and os.path.isdir(os.path.join(repo, "blobs"))):
        return real, repo
    return real, real


def inside(path, root):
    """``path`` is ``root`` or lies below it (both real, absolute)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def kind(mode):
    """'a FIFO', 'a socket', 'a character device', ... for a stat mode."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


def check_rel(rel):
    """Raise TreeError unless ``rel`` is a relative '/'-separated path without '', '.' or '..' components."""
    parts = rel.split("/") if isinstance(rel, str) else [""]
    if not rel or rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise TreeError(rel, "is not a relative path inside the model (absolute, empty or with '..')")
    return parts


def classify(real_dir, root, rel, lst=None):
    """The entry at ``rel``: an :class:`Entry` for a readable file, ``"dir"`` for a real directory, None when nothing
    is there; raises :class:`TreeError` for everything the rule refuses."""
    parts = check_rel(rel)
    path = os.path.join(real_dir, *parts)
    parent = os.path.dirname(path)
    if parent != real_dir and os.path.realpath(parent) != parent:
        raise TreeError(rel, "lies below a link to a directory (%s resolves to %s); a checkpoint's links must name "
                             "files" % (os.path.relpath(parent, real_dir), os.path.realpath(parent)))
    if lst is None:
        try:
            lst = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
    link = None
    real, st = path, lst
    if stat.S_ISLNK(lst.st_mode):
        link = os.readlink(path)
        real = os.path.realpath(path)
        if not inside(real, root):
            raise TreeError(rel, "is a link to %s, which resolves to %s, outside the model root %s" % (link, real, root))
        if os.path.isabs(link):
            raise TreeError(rel, "is an absolute link (-> %s); even pointing inside, a checkpoint's links must be "
                                 "relative, so that it stays whole when it is moved, copied or promoted" % link)
        try:
            st = os.stat(real)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise TreeError(rel, "is a link loop (-> %s)" % link) from None
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise TreeError(rel, "is a dangling link (-> %s: nothing there)" % link) from None
            raise TreeError(rel, "is a link (-> %s) that cannot be resolved: %s" % (link, exc.strerror)) from None
        if stat.S_ISDIR(st.st_mode):
            raise TreeError(rel, "is a link to a directory (-> %s); a checkpoint's links must name files" % link)
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if not stat.S_ISREG(st.st_mode):
        raise TreeError(rel, "is %s, not a regular file%s" % (kind(st.st_mode), " (behind the link -> %s)" % link
                                                                 if link else ""))
    return Entry(rel, real, st, link)


def scan(path, skip_top=(), skip=()):
    """Every file below the checkpoint ``path``.

    :param skip_top: names left out at the top level only (huggingface_hub's ``.cache``).
    :param skip: relative paths left out (our manifest).
    :returns: ``(entries, problems)``: ``{rel: Entry}`` of the readable files (sorted walk, '/' separators) and a
        list of :class:`TreeError` (links and special files the rule refuses, hard links with names outside).
    """
    real_dir, root = model_root(path)
    entries, problems = {}, []
    stack = [""]
    while stack:
        prefix = stack.pop()
        try:
            with os.scandir(os.path.join(real_dir, prefix) if prefix else real_dir) as listing:
                names = sorted((item.name, item) for item in listing)
        except OSError as exc:
            problems.append(TreeError(prefix or ".", "cannot be listed: %s" % (exc.strerror or exc)))
            continue
        subdirs = []
        for name, item in names:
            if not prefix and name in skip_top:
                continue
            rel = prefix + "/" + name if prefix else name
            if rel in skip:
                continue
            try:
                found = classify(real_dir, root, rel, item.stat(follow_symlinks=False))
            except TreeError as exc:
                problems.append(exc)
                continue
            except OSError as exc:
                problems.append(TreeError(rel, "cannot be read: %s" % (exc.strerror or exc)))
                continue
            if found == "dir":
                subdirs.append(rel)
            elif found is not None:
                entries[rel] = found
        stack.extend(reversed(subdirs))
    problems.extend(_hard_link_problems(entries))
    return dict(sorted(entries.items())), problems


def _hard_link_problems(entries):
    names = {}
    for entry in entries.values():
        if entry.stat.st_nlink > 1:
            names.setdefault((entry.stat.st_dev, entry.stat.st_ino), set()).add(entry.real)
    problems = []
    for rel, entry in entries.items():
        key = (entry.stat.st_dev, entry.stat.st_ino)
        if key in names and entry.stat.st_nlink > len(names[key]):
            problems.append(TreeError(rel, "has %d hard links but only %d of them inside the model: another name "
                                           "outside can change it, and it may be any file of the host; copy it "
                                           "(cp, not ln) into the model" % (entry.stat.st_nlink, len(names[key]))))
    return problems


def _fd_location(fd):
    try:
        return os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        return None


def open_entry(entry, root):
    """Open an :class:`Entry` for reading: ``(binary file object, fstat result)`` of the same descriptor.

    :raises TreeError: when the file changed into a link, a special file, or something outside ``root`` since the scan.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(entry.real, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TreeError(entry.rel, "became a link while it was read (%s)" % entry.real) from None
        raise TreeError(entry.rel, "cannot be opened: %s" % (exc.strerror or exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TreeError(entry.rel, "is %s, not a regular file" % kind(st.st_mode))
        where = _fd_location(fd)
        if where is not None and where.startswith("/") and not inside(where, root):
            raise TreeError(entry.rel, "was opened at %s, outside the model root %s (changed while read?)" % (
                where, root))
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def open_file(path, rel):
    """Open ``rel`` of the checkpoint ``path`` under the rule: ``(file object, fstat)``, or None when absent.

    For callers that read a few named files (config.json, the index) rather than the whole tree.
    :raises TreeError: as :func:`classify` and :func:`open_entry`.
    """
    real_dir, root = model_root(path)
    found = classify(real_dir, root, rel)
    if found is None:
        return None
    if found == "dir":
        raise TreeError(rel, "is a directory, not a file")
    return open_entry(found, root)
