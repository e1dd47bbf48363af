# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Action plugin of blackwell.sglang.unknown_variables: host variables with a role's prefix that no role defines."""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.blackwell.sglang.plugins.plugin_utils import _variable_names

# the collection's root: plugins/action/<this file>
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "mode": {"type": "str", "default": "warn", "choices": ["warn", "fail"]},
            "names": {"type": "list", "elements": "str"},
            "ignore": {"type": "list", "elements": "str", "default": []},
        })
        names = args["names"] if args["names"] is not None else list(task_vars or {})
        try:
            known = _variable_names.known_names(ROOT)
            inputs = _variable_names.input_names(ROOT)
            prefixes = _variable_names.role_prefixes(ROOT)
            renamed = _variable_names.renamed_names(ROOT)
        except (OSError, ValueError) as exc:
            raise AnsibleActionFail("cannot read the variable names of the collection at %s: %s" % (ROOT, exc))
        found = [u for u in _variable_names.unknown(names, known, prefixes, inputs, renamed) if u["name"] not in args["ignore"]]
        result.update(changed=False, unknown=found, checked=len(set(names)))
        if not found:
            result["msg"] = "no unknown variable among the %d of this host" % len(set(names))
            return result
        text = "; ".join(u["message"] for u in found)
        if args["mode"] == "fail":
            result.update(failed=True, msg="%s (preflight_unknown_variables: fail; set it to warn to go on)" % text)
        else:
            result["msg"] = text
            result["warnings"] = [u["message"] for u in found]
        return result
