# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""A small reader for CMake list files, enough to patch sgl-kernel's CMakeLists.txt by content.

Two tools:

- :func:`scan` splits a CMake file into commands (name, parsed arguments, character span, the stack of enclosing
  ``if()`` conditions). Comments and quoted strings are respected, so anchors survive re-indentation, changed case
  (CMake command names are case-insensitive), extra blank lines and comments next to them.
- :func:`estimate_build_cost` walks the commands like a very small CMake interpreter (``set``, ``list(APPEND)``,
  ``option``, ``file(GLOB)``, ``if/elseif/else/endif``, ``Python_add_library``/``add_library``,
  ``target_sources``, ``target_compile_options``) and reports, per extension, translation units x gencodes.
  The estimate is a model, not a build: assumptions are returned with it (CUDA version, x86_64,
  ``ENABLE_BELOW_SM90=OFF`` as the sgl_kernel_sm120 role passes it; sglang-sm120.md sections 1.6 and 3).

Pure Python, standard library only.
"""

from __future__ import annotations

import fnmatch
import os
import re

GENCODE_RE = re.compile(r"arch=compute_([0-9]+[a-z]?),code=\[?((?:sm|compute)_[0-9]+[a-z]?(?:,(?:sm|compute)_[0-9]+[a-z]?)*)\]?")
_VAR_RE = re.compile(r"\$\{([A-Za-z0-9_.+-]+)\}")
_SOURCE_EXT = (".cu", ".cc", ".cpp", ".cxx", ".c")


class Command(object):
    """One CMake command invocation."""

    __slots__ = ("name", "args", "raw_args", "start", "end", "conditions", "line")

    def __init__(self, name, args, raw_args, start, end, conditions, line):
        self.name = name            # lower-cased command name
        self.args = args            # list of (text, quoted) tuples
        self.raw_args = raw_args    # the text between the parentheses
        self.start = start          # offset of the command name
        self.end = end              # offset just after the closing parenthesis
        self.conditions = conditions  # tuple of raw if()/elseif() argument strings enclosing this command
        self.line = line            # 1-based line number

    @property
    def words(self):
        return [a for a, _q in self.args]

    def __repr__(self):  # pragma: no cover - debugging aid
        return "Command(%s, %r, line=%d)" % (self.name, self.words[:4], self.line)


def _skip_comment(text, i):
    """``text[i] == '#'``: return the offset after the comment (line or bracket comment)."""
    m = re.match(r"#\[(=*)\[", text[i:])
    if m:
        close = "]" + m.group(1) + "]"
        j = text.find(close, i + m.end())
        return len(text) if j < 0 else j + len(close)
    j = text.find("\n", i)
    return len(text) if j < 0 else j


def _parse_args(text, i):
    """Parse arguments starting after ``(`` at offset ``i``. Returns (args, end_offset_after_close_paren)."""
    args = []
    depth = 1
    n = len(text)
    cur = []
    while i < n:
        c = text[i]
        if c == "#":
            if cur:
                args.append(("".join(cur), False))
                cur = []
            i = _skip_comment(text, i)
            continue
        if c == '"':
            j = i + 1
            buf = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n:
                    buf.append(text[j:j + 2])
                    j += 2
                    continue
                buf.append(text[j])
                j += 1
            if cur:
                # a quote glued to an unquoted word (rare): keep it as one word
                cur.append('"' + "".join(buf) + '"')
            else:
                args.append(("".join(buf), True))
            i = j + 1
            continue
        if c == "[" and re.match(r"\[=*\[", text[i:]) and not cur:
            m = re.match(r"\[(=*)\[", text[i:])
            close = "]" + m.group(1) + "]"
            j = text.find(close, i + m.end())
            j = n if j < 0 else j
            args.append((text[i + m.end():j], True))
            i = j + len(close)
            continue
        if c == "(":
            if cur:
                args.append(("".join(cur), False))
                cur = []
            depth += 1
            args.append(("(", False))
            i += 1
            continue
        if c == ")":
            if cur:
                args.append(("".join(cur), False))
                cur = []
            depth -= 1
            if depth == 0:
                return args, i + 1
            args.append((")", False))
            i += 1
            continue
        if c.isspace():
            if cur:
                args.append(("".join(cur), False))
                cur = []
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            cur.append(text[i:i + 2])
            i += 2
            continue
        cur.append(c)
        i += 1
    raise ValueError("unbalanced parentheses: a command is not closed before the end of the file")


_CMD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*[ \t]*\(")


def scan(text):
    """Split CMake source ``text`` into :class:`Command` objects.

    ``conditions`` of each command is the tuple of enclosing ``if``/``elseif`` argument strings (an ``else()``
    branch is recorded as ``NOT (<condition>)``).

    :raises ValueError: on unbalanced parentheses or ``endif()`` without ``if()``.
    """
    commands = []
    stack = []  # list of [condition strings so far in this if-chain]
    i = 0
    n = len(text)
    line = 1
    last = 0
    while i < n:
        c = text[i]
        if c == "#":
            i = _skip_comment(text, i)
            continue
        if c == '"':
            j = text.find('"', i + 1)
            i = n if j < 0 else j + 1
            continue
        m = _CMD_RE.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            name = m.group(0).rstrip("( \t").lower()
            args, end = _parse_args(text, m.end())
            raw = text[m.end():end - 1]
            line += text.count("\n", last, i)
            last = i
            conds = tuple(frame[-1] for frame in stack)
            if name == "if":
                stack.append([raw.strip()])
                cmd_conds = conds
            elif name == "elseif":
                if not stack:
                    raise ValueError("elseif() without if() at line %d" % line)
                prev = stack[-1]
                stack[-1] = prev + ["NOT (%s) AND (%s)" % (" OR ".join("(%s)" % p for p in prev if not p.startswith("NOT (")) or "FALSE", raw.strip())]
                cmd_conds = conds[:-1]
            elif name == "else":
                if not stack:
                    raise ValueError("else() without if() at line %d" % line)
                prev = [p for p in stack[-1] if not p.startswith("NOT (")]
                stack[-1] = stack[-1] + ["NOT (%s)" % " OR ".join("(%s)" % p for p in prev)]
                cmd_conds = conds[:-1]
            elif name == "endif":
                if not stack:
                    raise ValueError("endif() without if() at line %d" % line)
                stack.pop()
                cmd_conds = tuple(frame[-1] for frame in stack)
            else:
                cmd_conds = conds
            commands.append(Command(name, args, raw, i, end, cmd_conds, line))
            i = end
            continue
        i += 1
    if stack:
        raise ValueError("if() without endif(): %d block(s) left open" % len(stack))
    return commands


def line_bounds(text, start, end):
    """Offsets of the full lines covering ``text[start:end]`` (end includes the newline if any)."""
    ls = text.rfind("\n", 0, start) + 1
    le = text.find("\n", end)
    le = len(text) if le < 0 else le + 1
    return ls, le


def indent_at(text, offset):
    ls = text.rfind("\n", 0, offset) + 1
    m = re.match(r"[ \t]*", text[ls:])
    return m.group(0)


def gencodes_in(strings):
    """All gencode targets (``sm_120a``, ``sm_90``...) named in ``strings``, in order, without duplicates."""
    seen = []
    for s in strings:
        for m in GENCODE_RE.finditer(s):
            for code in m.group(2).split(","):
                if code.startswith("sm_") and code not in seen:
                    seen.append(code)
    return seen


# --------------------------------------------------------------------------------------------------------------
# Build-cost model
# --------------------------------------------------------------------------------------------------------------

_TRUE = {"1", "ON", "YES", "TRUE", "Y"}
_FALSE = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND", ""}
_BINARY = {"VERSION_GREATER_EQUAL", "VERSION_LESS", "VERSION_GREATER", "VERSION_LESS_EQUAL", "VERSION_EQUAL",
           "STREQUAL", "MATCHES", "EQUAL", "LESS", "GREATER", "LESS_EQUAL", "GREATER_EQUAL", "IN_LIST"}


def _vtuple(s):
    out = []
    for part in str(s).split("."):
        m = re.match(r"\d+", part)
        out.append(int(m.group(0)) if m else 0)
    return tuple(out)


def _vcmp(a, b):
    ta, tb = _vtuple(a), _vtuple(b)
    w = max(len(ta), len(tb))
    ta += (0,) * (w - len(ta))
    tb += (0,) * (w - len(tb))
    return (ta > tb) - (ta < tb)


class _Interp(object):
    def __init__(self, defines, source_dir):
        self.vars = {}
        self.cache = dict(defines)
        self.source_dir = source_dir

    def get(self, name):
        if name in self.vars:
            return self.vars[name]
        return self.cache.get(name)

    def expand(self, word):
        def rep(m):
            v = self.get(m.group(1))
            return "" if v is None else v
        prev = None
        while prev != word and "${" in word:
            prev = word
            word = _VAR_RE.sub(rep, word)
        return word

    def expand_list(self, args):
        out = []
        for text, quoted in args:
            val = self.expand(text)
            if quoted:
                out.append(val)
            else:
                out.extend(x for x in val.split(";") if x != "")
        return out

    # condition evaluation: NOT > AND > OR, parentheses, unary DEFINED/POLICY/EXISTS, binary operators
    def truth(self, tokens):
        self._toks = tokens
        self._pos = 0
        try:
            val = self._or()
        except IndexError:
            return True  # unparseable condition: count the block (estimate stays an upper bound)
        return val

    def _peek(self):
        return self._toks[self._pos] if self._pos < len(self._toks) else None

    def _next(self):
        tok = self._toks[self._pos]
        self._pos += 1
        return tok

    def _or(self):
        val = self._and()
        while self._peek() is not None and self._peek()[0] == "OR":
            self._next()
            rhs = self._and()
            val = val or rhs
        return val

    def _and(self):
        val = self._not()
        while self._peek() is not None and self._peek()[0] == "AND":
            self._next()
            rhs = self._not()
            val = val and rhs
        return val

    def _not(self):
        tok = self._peek()
        if tok is not None and tok[0] == "NOT" and not tok[1]:
            self._next()
            return not self._not()
        return self._atom()

    def _value(self, tok):
        text, quoted = tok
        if quoted:
            return self.expand(text)
        v = self.get(text)
        return self.expand(text) if v is None else v

    def _atom(self):
        tok = self._next()
        if tok == ("(", False):
            val = self._or()
            if self._peek() == (")", False):
                self._next()
            return val
        if not tok[1] and tok[0] in ("DEFINED",):
            name = self._next()[0]
            return self.get(self.expand(name)) is not None
        if not tok[1] and tok[0] in ("POLICY", "TARGET", "COMMAND"):
            self._next()
            return True
        if not tok[1] and tok[0] == "EXISTS":
            path = self._value(self._next())
            return os.path.exists(path)
        nxt = self._peek()
        if nxt is not None and not nxt[1] and nxt[0] in _BINARY:
            op = self._next()[0]
            rhs_tok = self._next()
            self._list_name = rhs_tok[0]  # IN_LIST names a variable (its value is the list)
            rhs = self._value(rhs_tok)
            lhs = self._value(tok)
            if op.startswith("VERSION_"):
                c = _vcmp(lhs, rhs)
                return {"VERSION_GREATER_EQUAL": c >= 0, "VERSION_LESS": c < 0, "VERSION_GREATER": c > 0,
                        "VERSION_LESS_EQUAL": c <= 0, "VERSION_EQUAL": c == 0}[op]
            if op == "STREQUAL":
                return lhs == rhs
            if op == "MATCHES":
                try:
                    return re.search(rhs, lhs) is not None
                except re.error:
                    return True
            if op == "IN_LIST":
                return lhs in (self.get(self._list_name) or "").split(";")
            try:
                a, b = float(lhs), float(rhs)
            except ValueError:
                return False
            return {"EQUAL": a == b, "LESS": a < b, "GREATER": a > b, "LESS_EQUAL": a <= b,
                    "GREATER_EQUAL": a >= b}[op]
        text, quoted = tok
        value = self.expand(text) if quoted else text
        if value.upper() in _TRUE or re.match(r"^-?[1-9][0-9]*(\.[0-9]+)?$", value):
            return True
        if value.upper() in _FALSE or value.upper().endswith("-NOTFOUND"):
            return False
        if quoted:
            return False
        var = self.get(value)
        if var is None:
            return False
        return not (var.upper() in _FALSE or var.upper().endswith("-NOTFOUND"))


def _refs_unresolved(args, globs):
    out = []
    for text, _q in args:
        for var in _VAR_RE.findall(text):
            out.extend(g for g in globs.get(var, []) if g not in out)
    return out


def estimate_build_cost(text, cuda_version="13.0", defines=None, source_dir=None, processor="x86_64"):
    """Translation units x gencodes for each extension built by a sgl-kernel CMakeLists.txt.

    :param text: the CMakeLists.txt content.
    :param cuda_version: CUDA major.minor assumed for ``CUDA_VERSION`` / ``CMAKE_CUDA_COMPILER_VERSION`` gates.
    :param defines: ``-D`` cache entries (dict of str) as the build passes them; default ``ENABLE_BELOW_SM90=OFF``.
    :param source_dir: kernel directory, to count ``file(GLOB)`` matches that live in the tree (fetched
        dependencies are not there before configure: such globs are reported as unresolved).
    :returns: dict ``{"extensions": {target: {...}}, "total": int, "assumptions": {...}}``; each target has
        ``cuda_units``, ``host_units``, ``gencodes`` (list), ``units_x_gencodes`` (cuda_units * max(1, gencodes)
        + host_units), ``unresolved_globs`` (list; their units are not counted, so the figure is a lower bound).
    """
    defs = {"ENABLE_BELOW_SM90": "OFF"}
    if defines:
        defs.update({k: str(v) for k, v in defines.items()})
    cuda = str(cuda_version)
    for name in ("CUDA_VERSION", "CMAKE_CUDA_COMPILER_VERSION", "CUDAToolkit_VERSION"):
        defs.setdefault(name, cuda)
    defs.setdefault("CMAKE_SYSTEM_PROCESSOR", processor)
    defs.setdefault("CMAKE_HOST_SYSTEM_PROCESSOR", processor)
    src = source_dir or ""
    defs.setdefault("CMAKE_CURRENT_SOURCE_DIR", src)
    defs.setdefault("CMAKE_CURRENT_LIST_DIR", src)
    defs.setdefault("PROJECT_SOURCE_DIR", src)
    defs.setdefault("CMAKE_SOURCE_DIR", src)
    it = _Interp(defs, source_dir)
    targets = {}
    order = []
    active = [True]  # stack of "this if-chain's current branch is active"
    taken = [True]   # stack of "some branch of this chain was already taken"
    globs = {}
    for cmd in scan(text):
        name = cmd.name
        if name == "if":
            parent = active[-1]
            val = parent and it.truth(cmd.args)
            active.append(val)
            taken.append(val)
            continue
        if name == "elseif":
            parent = active[-2]
            val = parent and not taken[-1] and it.truth(cmd.args)
            active[-1] = val
            taken[-1] = taken[-1] or val
            continue
        if name == "else":
            parent = active[-2]
            active[-1] = parent and not taken[-1]
            taken[-1] = True
            continue
        if name == "endif":
            active.pop()
            taken.pop()
            continue
        if not active[-1]:
            continue
        words = cmd.words
        if name == "option" and len(words) >= 2:
            var = it.expand(words[0])
            if var not in it.cache and var not in it.vars:
                it.vars[var] = it.expand(words[2]) if len(words) > 2 else "OFF"
        elif name == "set" and words:
            var = it.expand(words[0])
            vals = cmd.args[1:]
            is_cache = any(w == "CACHE" and not q for w, q in vals)
            if is_cache:
                idx = [w for w, _q in vals].index("CACHE")
                force = any(w == "FORCE" and not q for w, q in vals)
                if var not in it.cache or force:
                    it.cache[var] = ";".join(it.expand_list(vals[:idx]))
            else:
                it.vars[var] = ";".join(it.expand_list(vals))
            globs[var] = _refs_unresolved(vals, globs)
        elif name == "list" and len(words) >= 2 and words[0].upper() in ("APPEND", "PREPEND"):
            var = it.expand(words[1])
            globs[var] = globs.get(var, []) + _refs_unresolved(cmd.args[2:], globs)
            cur = [x for x in (it.get(var) or "").split(";") if x]
            new = it.expand_list(cmd.args[2:])
            it.vars[var] = ";".join(cur + new if words[0].upper() == "APPEND" else new + cur)
        elif name == "file" and len(words) >= 3 and words[0].upper() in ("GLOB", "GLOB_RECURSE"):
            var = it.expand(words[1])
            skip = ("CONFIGURE_DEPENDS", "LIST_DIRECTORIES", "true", "false", "RELATIVE")
            pats = [p for p in it.expand_list(cmd.args[2:]) if p not in skip]
            found = []
            unresolved = []
            for pat in pats:
                base = os.path.dirname(pat)
                if base and os.path.isdir(base):
                    found.extend(os.path.join(base, f) for f in sorted(os.listdir(base))
                                 if fnmatch.fnmatch(f, os.path.basename(pat)))
                else:
                    unresolved.append(pat)
            it.vars[var] = ";".join(found)
            globs[var] = unresolved
        elif name in ("python_add_library", "add_library") and words:
            tname = it.expand(words[0])
            rest = it.expand_list(cmd.args[1:])
            srcs = [w for w in rest if w.lower().endswith(_SOURCE_EXT)]
            unresolved = _refs_unresolved(cmd.args[1:], globs)
            targets[tname] = {"sources": srcs, "flags": [], "unresolved_globs": unresolved, "line": cmd.line}
            order.append(tname)
        elif name == "target_sources" and words and it.expand(words[0]) in targets:
            t = targets[it.expand(words[0])]
            t["sources"].extend(w for w in it.expand_list(cmd.args[1:]) if w.lower().endswith(_SOURCE_EXT))
        elif name == "target_compile_options" and words and it.expand(words[0]) in targets:
            targets[it.expand(words[0])]["flags"].extend(it.expand_list(cmd.args[1:]))
    extensions = {}
    total = 0
    for tname in order:
        t = targets[tname]
        cu = [s for s in t["sources"] if s.lower().endswith(".cu")]
        host = [s for s in t["sources"] if not s.lower().endswith(".cu")]
        gens = gencodes_in(t["flags"])
        cost = len(cu) * max(1, len(gens)) + len(host)
        extensions[tname] = {
            "cuda_units": len(cu),
            "host_units": len(host),
            "gencodes": gens,
            "units_x_gencodes": cost,
            "unresolved_globs": t["unresolved_globs"],
            "line": t["line"],
        }
        total += cost
    return {
        "extensions": extensions,
        "total": total,
        "assumptions": {"cuda_version": cuda, "processor": processor,
                        "defines": dict((k, v) for k, v in defs.items() if not k.startswith("CMAKE_")
                                        and k not in ("CUDA_VERSION", "CUDAToolkit_VERSION", "PROJECT_SOURCE_DIR"))},
    }
