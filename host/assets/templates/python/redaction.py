"""{{name}}: an Airlock redaction plugin. It replaces the service's known secrets and each
of the configured `words` in every text block with [REDACTED:<rule>], and marks what it
removed.

Configure it per service:
  adapters = { redaction = ["builtin:standard", "./{{name}}.wasm"] }
  adapter_config = { redaction = { words = ["Project Falcon"] } }

Return errors by raising `Err("message")`: any other exception traps the plugin.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import plugin, redaction
from wit_world.imports import types

WORDS = []


class Plugin(exports.Plugin):
    def describe(self) -> plugin.PluginInfo:
        return plugin.PluginInfo(name="{{name}}", version="0.1.0", stages=[types.Stage.REDACTION])

    def init(self, stage: types.Stage, config: str) -> None:
        settings = json.loads(config)
        for key in settings:
            if key != "words":
                raise Err(f'unknown setting "{key}"')
        words = settings.get("words", [])
        if not isinstance(words, list) or not all(isinstance(w, str) and w for w in words):
            raise Err("words must be a list of non-empty strings")
        WORDS[:] = words


class Redaction(exports.Redaction):
    def redact(self, input: types.ToolResult, secrets) -> redaction.Redacted:
        needles = [(s.value, f"secret:{s.name}") for s in secrets if s.value]
        needles += [(w, "word") for w in WORDS]
        marks = []
        for index, block in enumerate(input.content):
            if not isinstance(block, types.ContentBlock_Text):
                continue
            for needle, rule in needles:
                count = block.value.text.count(needle)
                if count:
                    block.value.text = block.value.text.replace(needle, f"[REDACTED:{rule}]")
                    marks.append(redaction.RedactionMark(location=f"content[{index}].text", rule=rule, count=count))
        return redaction.Redacted(result=input, marks=marks)
