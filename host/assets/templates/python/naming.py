"""{{name}}: an Airlock naming plugin. Tools are named `<prefix>_<service>__<tool>`
(`prefix` default "ext"), with every character outside [A-Za-z0-9_-] replaced by `_`.
The host checks the answer: names must be valid, at most 64 characters, and unique.

Configure it per service:
  adapters = { naming = "./{{name}}.wasm" }
  adapter_config = { naming = { prefix = "team" } }

Return errors by raising `Err("message")`: any other exception traps the plugin.
"""

import json
import re

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import naming, plugin
from wit_world.imports import types

SETTINGS = {"prefix": "ext"}


def sanitize(text):
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


class Plugin(exports.Plugin):
    def describe(self) -> plugin.PluginInfo:
        return plugin.PluginInfo(name="{{name}}", version="0.1.0", stages=[types.Stage.NAMING])

    def init(self, stage: types.Stage, config: str) -> None:
        settings = json.loads(config)
        for key in settings:
            if key != "prefix":
                raise Err(f'unknown setting "{key}"')
        prefix = settings.get("prefix", "ext")
        if not isinstance(prefix, str):
            raise Err("prefix must be a string")
        SETTINGS["prefix"] = sanitize(prefix)


class Naming(exports.Naming):
    def namespace(self, service: naming.ServiceInfo, taken) -> str:
        base = f"{SETTINGS['prefix']}_{sanitize(service.id)}"
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}{n}", n + 1
        return candidate

    def qualify(self, service: naming.ServiceInfo, namespace: str, tools):
        named, seen = [], set()
        for tool in tools:
            base = f"{namespace}__{sanitize(tool.name)}"
            name, n = base[:64], 2
            while name in seen:
                name, n = f"{base[:60]}_{n}", n + 1
            seen.add(name)
            named.append(naming.NamedTool(raw_name=tool.name, name=name, description=tool.description,
                                          input_schema=tool.input_schema or '{"type":"object"}'))
        return named
