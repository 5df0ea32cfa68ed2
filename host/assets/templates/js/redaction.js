// {{name}}: an Airlock redaction plugin. It replaces the service's known secrets and each
// of the configured `words` in every text block with [REDACTED:<rule>], and marks what
// it removed.
//
// Configure it per service:
//   adapters = { redaction = ["builtin:standard", "./{{name}}.wasm"] }
//   adapter_config = { redaction = { words = ["Project Falcon"] } }
//
// Return errors by throwing a string: any other exception traps the plugin.
let words = [];

export const plugin = {
  describe() {
    return { name: '{{name}}', version: '0.1.0', stages: ['redaction'] };
  },
  init(stage, configText) {
    const config = JSON.parse(configText);
    for (const key of Object.keys(config)) {
      if (key !== 'words') throw `unknown setting "${key}"`;
    }
    const list = config.words ?? [];
    if (!Array.isArray(list) || !list.every((w) => typeof w === 'string' && w.length > 0)) {
      throw 'words must be a list of non-empty strings';
    }
    words = list;
  },
};

export const redaction = {
  redact(result, secrets) {
    const needles = secrets
      .filter((s) => s.value.length > 0)
      .map((s) => [s.value, `secret:${s.name}`])
      .concat(words.map((w) => [w, 'word']));
    const marks = [];
    result.content.forEach((block, index) => {
      if (block.tag !== 'text') return;
      for (const [needle, rule] of needles) {
        const parts = block.val.text.split(needle);
        if (parts.length > 1) {
          block.val.text = parts.join(`[REDACTED:${rule}]`);
          marks.push({ location: `content[${index}].text`, rule, count: parts.length - 1 });
        }
      }
    });
    return { result, marks };
  },
};
