// {{name}}: an Airlock naming plugin. Tools are named `<prefix>_<service>__<tool>`
// (`prefix` default "ext"), with every character outside [A-Za-z0-9_-] replaced by `_`.
// The host checks the answer: names must be valid, at most 64 characters, and unique.
//
// Configure it per service:
//   adapters = { naming = "./{{name}}.wasm" }
//   adapter_config = { naming = { prefix = "team" } }
//
// Return errors by throwing a string: any other exception traps the plugin.
let prefix = 'ext';

const sanitize = (text) => text.replace(/[^A-Za-z0-9_-]/g, '_');

export const plugin = {
  describe() {
    return { name: '{{name}}', version: '0.1.0', stages: ['naming'] };
  },
  init(stage, configText) {
    const config = JSON.parse(configText);
    for (const key of Object.keys(config)) {
      if (key !== 'prefix') throw `unknown setting "${key}"`;
    }
    if (config.prefix !== undefined && typeof config.prefix !== 'string') throw 'prefix must be a string';
    prefix = sanitize(config.prefix ?? 'ext');
  },
};

export const naming = {
  namespace(service, taken) {
    const base = `${prefix}_${sanitize(service.id)}`;
    let candidate = base;
    for (let n = 2; taken.includes(candidate); n++) candidate = `${base}${n}`;
    return candidate;
  },
  qualify(service, namespace, tools) {
    const seen = new Set();
    return tools.map((tool) => {
      let name = `${namespace}__${sanitize(tool.name)}`.slice(0, 64);
      for (let n = 2; seen.has(name); n++) name = `${namespace}__${sanitize(tool.name)}`.slice(0, 60) + `_${n}`;
      seen.add(name);
      return {
        rawName: tool.name,
        name,
        description: tool.description,
        inputSchema: tool.inputSchema ?? '{"type":"object"}',
      };
    });
  },
};
