// {{name}}: an Airlock policy plugin. It denies calls to tools whose name starts with
// one of `deny_prefixes` (default ["delete_"]), asks a person before tools starting with
// one of `ask_prefixes`, and allows the rest.
//
// Configure it per service: adapter_config = { policy = { deny_prefixes = ["delete_"] } }
//
// Return errors by throwing a string: any other exception traps the plugin.
import { log } from 'airlock:adapter/log@0.2.0';

let denyPrefixes = ['delete_'];
let askPrefixes = [];

function stringList(config, key, fallback) {
  const value = config[key] ?? fallback;
  if (!Array.isArray(value) || !value.every((s) => typeof s === 'string')) {
    throw `${key} must be a list of strings`;
  }
  return value;
}

export const plugin = {
  describe() {
    return { name: '{{name}}', version: '0.1.0', stages: ['policy'] };
  },
  init(stage, configText) {
    const config = JSON.parse(configText);
    for (const key of Object.keys(config)) {
      if (!['deny_prefixes', 'ask_prefixes'].includes(key)) throw `unknown setting "${key}"`;
    }
    denyPrefixes = stringList(config, 'deny_prefixes', ['delete_']);
    askPrefixes = stringList(config, 'ask_prefixes', []);
    log('debug', `{{name}}: ${denyPrefixes.length} deny and ${askPrefixes.length} ask prefixes`);
  },
};

export const policy = {
  checkCall(call) {
    const tool = call.rawTool;
    const deny = denyPrefixes.find((p) => tool.startsWith(p));
    if (deny) return { decision: { tag: 'deny', val: `tools named "${deny}…" are not allowed` }, rule: 'deny_prefixes' };
    const ask = askPrefixes.find((p) => tool.startsWith(p));
    if (ask) return { decision: { tag: 'ask', val: `Run ${tool} on ${call.service}?` }, rule: 'ask_prefixes' };
    return { decision: { tag: 'allow' }, rule: 'default' };
  },
  checkResult(call, result) {
    return { decision: { tag: 'allow' }, rule: 'default' };
  },
};
