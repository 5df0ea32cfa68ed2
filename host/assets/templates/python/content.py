"""{{name}}: an Airlock content plugin. It keeps text blocks, caps each at `max_chars`
characters (default 2000), and turns every other block into a one-line text note.

Configure it per service:
  adapters = { content = "./{{name}}.wasm" }
  adapter_config = { content = { max_chars = 500 } }

Return errors by raising `Err("message")`: any other exception traps the plugin.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import plugin
from wit_world.imports import types

SETTINGS = {"max_chars": 2000}


def note(text):
    return types.ContentBlock_Text(types.TextBlock(text=text, annotations=None, meta=None))


class Plugin(exports.Plugin):
    def describe(self) -> plugin.PluginInfo:
        return plugin.PluginInfo(name="{{name}}", version="0.1.0", stages=[types.Stage.CONTENT])

    def init(self, stage: types.Stage, config: str) -> None:
        settings = json.loads(config)
        for key in settings:
            if key != "max_chars":
                raise Err(f'unknown setting "{key}"')
        max_chars = settings.get("max_chars", 2000)
        if not isinstance(max_chars, int) or max_chars < 0:
            raise Err("max_chars must be a whole number")
        SETTINGS["max_chars"] = max_chars


class Content(exports.Content):
    def convert(self, input: types.ToolResult) -> types.ToolResult:
        converted = []
        for block in input.content:
            if isinstance(block, types.ContentBlock_Text):
                if len(block.value.text) > SETTINGS["max_chars"]:
                    block.value.text = block.value.text[: SETTINGS["max_chars"]] + " [cut]"
                converted.append(block)
            elif isinstance(block, (types.ContentBlock_Image, types.ContentBlock_Audio)):
                converted.append(note(f"[media: {block.value.mime_type}]"))
            elif isinstance(block, types.ContentBlock_ResourceLink):
                converted.append(note(f"[resource: {block.value.uri}]"))
            elif isinstance(block, types.ContentBlock_Embedded):
                converted.append(note("[embedded resource]"))
            else:
                converted.append(note(f"[{block.value.kind} block]"))
        input.content = converted
        return input
