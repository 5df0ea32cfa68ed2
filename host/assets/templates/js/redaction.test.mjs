// The plugin's logic in Node (`npm test`); `airlock plugin run` exercises the component.
import test from 'node:test';
import assert from 'node:assert/strict';

const { plugin, redaction } = await import('./plugin.js');

test('removes secrets and words and marks them', () => {
  plugin.init('redaction', JSON.stringify({ words: ['Falcon'] }));
  const result = { content: [{ tag: 'text', val: { text: 'Falcon uses tok-123 and tok-123' } }], isError: false };
  const out = redaction.redact(result, [{ name: 'API_TOKEN', value: 'tok-123' }]);
  assert.equal(out.result.content[0].val.text, '[REDACTED:word] uses [REDACTED:secret:API_TOKEN] and [REDACTED:secret:API_TOKEN]');
  assert.equal(out.marks.reduce((n, m) => n + m.count, 0), 3);
});

test('unknown settings are refused', () => {
  assert.throws(() => plugin.init('redaction', '{"word": []}'), /unknown setting/);
});
