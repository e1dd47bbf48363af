# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Callback plugin blackwell.sglang.preload: load the collection's Jinja filters once, in the controller's main process.

ansible-playbook runs every task in a freshly forked worker process. A filter of a collection that the main process
has not used yet is looked up, imported and wrapped inside that worker and lost when it exits, so each task that
uses one of ours pays the lookup again, several times what an assert with builtin filters only costs
(docs/benchmarks.md). The roles use them in a good part of the tasks of a no-op converge. Loaded once before the
first play, the workers inherit them through fork. The same holds for the collection's action plugin.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Load the collection's filters once so that each forked task worker does not load them again
version_added: 0.1.0
description:
  - Before the first play, looks up every Jinja filter and action plugin of blackwell.sglang through Ansible's
    plugin loaders in the main ansible-playbook process. The task workers, forked from it, then find them loaded
    instead of importing them again for every task that uses one (a fraction of a second each, docs/benchmarks.md).
  - Changes no output and no result; a plugin that fails to load is left to the task that uses it, which reports
    the error as before.
requirements:
  - Enable it in ansible.cfg, C(callbacks_enabled = blackwell.sglang.preload) (the collection's own ansible.cfg does).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
"""

import importlib
import os
import time

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, filter_loader

COLLECTION = "blackwell.sglang"
PLUGINS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "ansible_collections.blackwell.sglang.plugins"


def plugin_modules(kind):
    """Stems of the collection's Python plugin files of ``kind`` (``filter``, ``action``), sorted."""
    directory = os.path.join(PLUGINS, kind)
    return sorted(f[:-3] for f in os.listdir(directory) if f.endswith(".py") and not f.startswith("_")) if os.path.isdir(directory) else []


def filter_names():
    """Every filter name the collection's filter files define (a file may define several)."""
    names = []
    for stem in plugin_modules("filter"):
        module = importlib.import_module("%s.filter.%s" % (PACKAGE, stem))
        names.extend(sorted(module.FilterModule().filters()))
    return names


def preload():
    """Look up every filter and action plugin of the collection; returns ``(loaded, failed)`` lists of names."""
    loaded, failed = [], []
    try:
        names = filter_names()
    except Exception:  # pylint: disable=broad-except  # a broken file fails the task that uses it, as without us
        names = []
    for name in names:
        fq = "%s.%s" % (COLLECTION, name)
        (loaded if filter_loader.get(fq) is not None else failed).append(fq)
    for stem in plugin_modules("action"):
        fq = "%s.%s" % (COLLECTION, stem)
        (loaded if action_loader.get(fq, class_only=True) is not None else failed).append(fq)
    return loaded, failed


class CallbackModule(CallbackBase):
    """See DOCUMENTATION."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "blackwell.sglang.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        start = time.monotonic()
        loaded, failed = preload()
        self._display.vvv("blackwell.sglang.preload: %d plugins loaded in %.2f s%s" % (
            len(loaded), time.monotonic() - start, ("; not found: " + ", ".join(failed)) if failed else ""))
