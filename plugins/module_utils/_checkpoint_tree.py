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
        behind = " (behind the link -> %s)" % link if link else ""
        raise TreeError(rel, "is %s, not a regular file%s" % (kind(st.st_mode), behind))
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


# ---------------------------------------------------------------------------------------------------- archives

# a zip symlink member holds its target as data; a longer one is no path
MAX_LINK_TARGET = 4096


def _member_parts(name):
    """'/'-separated parts of an archive member name without '.' parts; None for the archive's root entry.

    :raises ValueError: absolute, or a '..' part (the reason as text)."""
    if name.startswith("/"):
        raise ValueError("is an absolute member name")
    parts = [part for part in name.rstrip("/").split("/") if part not in ("", ".")]
    if ".." in parts:
        raise ValueError("has a '..' component")
    return parts or None


class _Members(object):
    """The archive rule, applied member by member in archive order (what an unpacker would create)."""

    def __init__(self):
        self.problems, self.files, self.dirs, self.links, self.bytes = [], set(), set(), set(), 0

    def refuse(self, name, reason):
        self.problems.append(TreeError(name, reason))

    def add(self, name, what, size=0, target=None):
        """``what``: "dir", "file", "symlink" (``target`` its text), "hardlink" (``target`` the member it names), or
        the kind of a special member (refused)."""
        try:
            parts = _member_parts(name)
        except ValueError as exc:
            self.refuse(name, str(exc))
            return
        if parts is None:
            return
        rel = "/".join(parts)
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in self.links:
                self.refuse(name, "would be unpacked through the link member %s" % "/".join(parts[:depth]))
                return
        if rel in self.files or rel in self.links or (rel in self.dirs and what != "dir"):
            self.refuse(name, "appears twice (the later member would replace the earlier one)")
            return
        if what == "dir":
            self.dirs.add(rel)
        elif what == "file":
            self.files.add(rel)
            self.bytes += size
        elif what == "symlink":
            self._symlink(name, rel, target)
        elif what == "hardlink":
            try:
                linked = _member_parts(target or "")
            except ValueError:
                linked = None
            if not linked or "/".join(linked) not in self.files:
                self.refuse(name, "is a hard link to %s, which is not an earlier regular file of the archive" % target)
                return
            self.files.add(rel)
        else:
            self.refuse(name, "is %s member; a checkpoint holds regular files, directories and links to files" % what)

    def _symlink(self, name, rel, target):
        if not target or target.startswith("/"):
            why = "an absolute link (a checkpoint's links must be relative)" if target else "an empty link"
            self.refuse(name, "is a link to %r: %s" % (target, why))
            return
        resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
        if resolved == ".." or resolved.startswith("../"):
            self.refuse(name, "is a link to %s, which leaves the archive" % target)
            return
        self.links.add(rel)


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class _open_tar(object):  # pylint: disable=invalid-name
    """``tarfile.open`` that also reads a zstd-compressed tar (``.tar.zst``, which tarfile reads only from Python
    3.14) through the ``zstd`` program as a stream."""

    def __init__(self, tarfile, path):
        self.proc, self.path = None, path
        with open(path, "rb") as handle:
            magic = handle.read(4)
        if magic == ZSTD_MAGIC:
            import shutil  # pylint: disable=import-outside-toplevel
            import subprocess  # pylint: disable=import-outside-toplevel
            zstd = shutil.which("zstd")
            if not zstd:
                raise TreeError(path, "is zstd-compressed and cannot be checked without the zstd program on this "
                                      "machine (install zstd, or use a plain, gzip or xz tar)")
            self.proc = subprocess.Popen([zstd, "-dcq", "--", path], stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL)
            self.archive = tarfile.open(fileobj=self.proc.stdout, mode="r|")
        else:
            self.archive = tarfile.open(path, "r:*")

    def __enter__(self):
        return self.archive

    def __exit__(self, exc_type, exc, tb):
        self.archive.close()
        if self.proc is not None:
            if exc_type is None:
                while self.proc.stdout.read(1 << 20):
                    pass
            self.proc.stdout.close()
            if exc_type is not None:
                self.proc.kill()
            if self.proc.wait() != 0 and exc_type is None:
                raise TreeError(self.path, "is not a whole zstd stream (zstd -d exited with %d)" % self.proc.returncode)
        return False


def check_archive(path):
    """Check a model archive, or a model directory, before it is unpacked or copied.

    A directory is judged by the link rule (:func:`scan`). A tar file (plain, gzip, bzip2, xz; zstd through the
    ``zstd`` program) or zip file by the
    archive rule: members are regular files, directories, relative symlinks that stay inside the archive (judged
    again by the link rule once unpacked, before anything is promoted) and hard links to earlier regular members;
    refused, naming the member: an absolute name or one with '..', a member that appears twice, a member below a
    symlink member (it would be written through the link), a device, FIFO or other special member.

    :returns: ``{"kind": "directory" | "tar" | "zip", "files": int, "bytes": int (regular files, what the unpacked
        or copied model takes), "problems": [TreeError]}``.
    :raises TreeError: when ``path`` is neither a directory nor a readable tar or zip file.
    """
    import tarfile  # pylint: disable=import-outside-toplevel
    import zipfile  # pylint: disable=import-outside-toplevel
    import zlib  # pylint: disable=import-outside-toplevel
    try:
        import lzma  # pylint: disable=import-outside-toplevel
        broken = (lzma.LZMAError, zlib.error)
    except ImportError:  # a Python built without lzma reads no .xz either (tarfile says so)
        broken = (zlib.error,)
    if os.path.isdir(path):
        entries, problems = scan(path)
        return {"kind": "directory", "files": len(entries), "bytes": sum(e.stat.st_size for e in entries.values()),
                "problems": problems}
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TreeError(path, "cannot be read: %s" % (exc.strerror or exc)) from None
    if not stat.S_ISREG(st.st_mode):
        raise TreeError(path, "is %s, neither a directory nor an archive file" % kind(st.st_mode))
    members = _Members()
    try:
        if zipfile.is_zipfile(path):
            archive_kind = "zip"
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    mode = info.external_attr >> 16
                    if stat.S_ISLNK(mode):
                        if info.file_size > MAX_LINK_TARGET:
                            members.refuse(info.filename, "is a link member of %d bytes (no path)" % info.file_size)
                            continue
                        target = archive.read(info).decode("utf-8", "replace")
                        members.add(info.filename, "symlink", target=target)
                    elif info.is_dir():
                        members.add(info.filename, "dir")
                    elif stat.S_IFMT(mode) in (0, stat.S_IFREG):   # 0: no type recorded (DOS-made zips)
                        members.add(info.filename, "file", size=info.file_size)
                    else:
                        members.add(info.filename, kind(mode))
        else:
            archive_kind = "tar"
            with _open_tar(tarfile, path) as archive:
                for info in archive:
                    if info.isdir():
                        members.add(info.name, "dir")
                    elif info.isreg():
                        members.add(info.name, "file", size=info.size)
                    elif info.issym():
                        members.add(info.name, "symlink", target=info.linkname)
                    elif info.islnk():
                        members.add(info.name, "hardlink", target=info.linkname)
                    else:
                        special = {tarfile.CHRTYPE: "a character device", tarfile.BLKTYPE: "a block device",
                                   tarfile.FIFOTYPE: "a FIFO"}.get(info.type, "a special (type %r)" % info.type)
                        members.add(info.name, special)
    except TreeError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError, ValueError, RuntimeError) + broken as exc:
        raise TreeError(path, "is neither a tar archive (plain, gzip, bzip2, xz, zstd) nor a zip file that can be read: "
                              "%s" % " ".join(str(exc).split())) from None
    return {"kind": archive_kind, "files": len(members.files), "bytes": members.bytes, "problems": members.problems}
