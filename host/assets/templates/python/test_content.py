"""The plugin's logic, natively (`python -m unittest test_app`), against the bindings that
`componentize-py … bindings bindings` generated; `airlock plugin run` exercises the component."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "bindings"))

from wit_world.imports import types

import app


class ContentTest(unittest.TestCase):
    def test_caps_text_and_notes_other_blocks(self):
        app.Plugin().init(types.Stage.CONTENT, '{"max_chars": 5}')
        result = types.ToolResult(
            content=[
                app.note("hello world"),
                types.ContentBlock_Image(types.MediaBlock(data="AAAA", mime_type="image/png", annotations=None, meta=None)),
            ],
            structured_content=None, is_error=False, meta=None)
        out = app.Content().convert(result)
        self.assertEqual([b.value.text for b in out.content], ["hello [cut]", "[media: image/png]"])


if __name__ == "__main__":
    unittest.main()
