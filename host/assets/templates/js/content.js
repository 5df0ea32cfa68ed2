// {{name}}: an Airlock content plugin. It keeps text blocks, caps each at `max_chars`
// characters (default 2000), and turns every other block into a one-line text note.
//
// Configure it per service:
//   adapters = { content = "./{{name}}.wasm" }
//   adapter_config = { content = { max_chars = 500 } }
//
// Return errors by throwing a string: any other exception traps the plugin.
let maxChars = 2000;

const note = (text) => ({ tag: 'text', val: { text } });

export const plugin = {
  describe() {
    return { name: '{{name}}', version: '0.1.0', stages: ['content'] };
  },
  init(stage, configText) {
    const config = JSON.parse(configText);
    for (const key of Object.keys(config)) {
      if (key !== 'max_chars') throw `unknown setting "${key}"`;
    }
    const max = config.max_chars ?? 2000;
    if (!Number.isInteger(max) || max < 0) throw 'max_chars must be a whole number';
    maxChars = max;
  },
};

export const content = {
  convert(result) {
    result.content = result.content.map((block) => {
      switch (block.tag) {
        case 'text': {
          const chars = [...block.val.text];
          if (chars.length > maxChars) block.val.text = chars.slice(0, maxChars).join('') + ' [cut]';
          return block;
        }
        case 'image':
        case 'audio':
          return note(`[${block.tag}: ${block.val.mimeType}]`);
        case 'resource-link':
          return note(`[resource: ${block.val.uri}]`);
        case 'embedded':
          return note('[embedded resource]');
        default:
          return note(`[${block.val.kind} block]`);
      }
    });
    return result;
  },
};
