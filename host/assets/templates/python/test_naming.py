"""The plugin's logic, natively (`python -m unittest test_app`), against the bindings that
`componentize-py … bindings bindings` generated; `airlock plugin run` exercises the component."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bindings"))

from wit_world.exports import naming
from wit_world.imports import types

import app


def tool(name):
    return types.Tool(name=name, title=None, description=None, input_schema=None,
                      output_schema=None, annotations=None, meta=None)


class NamingTest(unittest.TestCase):
    def test_namespaces_carry_the_prefix_and_stay_unique(self):
        app.Plugin().init(types.Stage.NAMING, '{"prefix": "team"}')
        service = naming.ServiceInfo(id="notes", label=None, description=None)
        n = app.Naming()
        self.assertEqual(n.namespace(service, []), "team_notes")
        self.assertEqual(n.namespace(service, ["team_notes"]), "team_notes2")
        names = [t.name for t in n.qualify(service, "team_notes", [tool("read.note"), tool("read note")])]
        self.assertEqual(names, ["team_notes__read_note", "team_notes__read_note_2"])


if __name__ == "__main__":
    unittest.main()
