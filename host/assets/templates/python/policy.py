"""{{name}}: an Airlock policy plugin. It denies calls to tools whose name starts with
one of `deny_prefixes` (default ["delete_"]), asks a person before tools starting with
one of `ask_prefixes`, and allows the rest.

Configure it per service: adapter_config = { policy = { deny_prefixes = ["delete_"] } }

Return errors by raising `Err("message")`: any other exception traps the plugin.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import plugin, policy
from wit_world.imports import types
from wit_world.imports.log import Level, log

RULES = {"deny_prefixes": ["delete_"], "ask_prefixes": []}


def string_list(config, key, default):
    value = config.get(key, default)
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise Err(f"{key} must be a list of strings")
    return value


class Plugin(exports.Plugin):
    def describe(self) -> plugin.PluginInfo:
        return plugin.PluginInfo(name="{{name}}", version="0.1.0", stages=[types.Stage.POLICY])

    def init(self, stage: types.Stage, config: str) -> None:
        settings = json.loads(config)
        for key in settings:
            if key not in RULES:
                raise Err(f'unknown setting "{key}"')
        RULES["deny_prefixes"] = string_list(settings, "deny_prefixes", ["delete_"])
        RULES["ask_prefixes"] = string_list(settings, "ask_prefixes", [])
        log(Level.DEBUG, f"{{name}}: {len(RULES['deny_prefixes'])} deny prefixes")


class Policy(exports.Policy):
    def check_call(self, call: policy.Call) -> policy.Verdict:
        tool = call.raw_tool
        for prefix in RULES["deny_prefixes"]:
            if tool.startswith(prefix):
                reason = f'tools named "{prefix}…" are not allowed'
                return policy.Verdict(decision=policy.Decision_Deny(reason), rule="deny_prefixes")
        for prefix in RULES["ask_prefixes"]:
            if tool.startswith(prefix):
                question = f"Run {tool} on {call.service}?"
                return policy.Verdict(decision=policy.Decision_Ask(question), rule="ask_prefixes")
        return policy.Verdict(decision=policy.Decision_Allow(), rule="default")

    def check_result(self, call: policy.Call, result: types.ToolResult) -> policy.ResultVerdict:
        return policy.ResultVerdict(decision=policy.ResultDecision_Allow(), rule="default")
