"""The plugin's logic, natively (`python -m unittest test_app`), against the bindings that
`componentize-py … bindings bindings` generated; `airlock plugin run` exercises the component."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bindings"))

from componentize_py_types import Err
from wit_world.exports import redaction
from wit_world.imports import types

import app


def text(t):
    block = types.ContentBlock_Text(types.TextBlock(text=t, annotations=None, meta=None))
    return types.ToolResult(content=[block], structured_content=None, is_error=False, meta=None)


class RedactionTest(unittest.TestCase):
    def test_removes_secrets_and_words_and_marks_them(self):
        app.Plugin().init(types.Stage.REDACTION, '{"words": ["Falcon"]}')
        out = app.Redaction().redact(text("Falcon uses tok-123 and tok-123"),
                                     [redaction.Secret(name="API_TOKEN", value="tok-123")])
        self.assertEqual(out.result.content[0].value.text,
                         "[REDACTED:word] uses [REDACTED:secret:API_TOKEN] and [REDACTED:secret:API_TOKEN]")
        self.assertEqual(sum(m.count for m in out.marks), 3)

    def test_unknown_settings_are_refused(self):
        with self.assertRaises(Err):
            app.Plugin().init(types.Stage.REDACTION, '{"word": []}')


if __name__ == "__main__":
    unittest.main()
