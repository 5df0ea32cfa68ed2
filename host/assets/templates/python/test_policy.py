"""The plugin's logic, natively (`python -m unittest test_app`), against the bindings that
`componentize-py … bindings bindings` generated; `airlock plugin run` exercises the component."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bindings"))

from componentize_py_types import Err
from wit_world.exports import policy
from wit_world.imports import log as host_log
from wit_world.imports import types

host_log.log = lambda level, message: None  # the host provides it in the sandbox
import app  # noqa: E402


def call(raw_tool):
    return policy.Call(agent="default", service="notes", tool=f"mcp__notes__{raw_tool}",
                       raw_tool=raw_tool, arguments="{}", annotations=None, roots=[])


class PolicyTest(unittest.TestCase):
    def test_denies_asks_and_allows_by_tool_name(self):
        app.Plugin().init(types.Stage.POLICY, '{"deny_prefixes": ["delete_"], "ask_prefixes": ["send_"]}')
        p = app.Policy()
        self.assertIsInstance(p.check_call(call("delete_note")).decision, policy.Decision_Deny)
        self.assertIsInstance(p.check_call(call("send_mail")).decision, policy.Decision_Ask)
        self.assertEqual(p.check_call(call("read_note")).rule, "default")

    def test_unknown_settings_are_refused(self):
        with self.assertRaises(Err):
            app.Plugin().init(types.Stage.POLICY, '{"deny": []}')


if __name__ == "__main__":
    unittest.main()
