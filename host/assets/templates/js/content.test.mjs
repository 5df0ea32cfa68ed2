// The plugin's logic in Node (`npm test`); `airlock plugin run` exercises the component.
import test from 'node:test';
import assert from 'node:assert/strict';

const { plugin, content } = await import('./plugin.js');

test('caps text and notes other blocks', () => {
  plugin.init('content', '{"max_chars": 5}');
  const out = content.convert({
    content: [
      { tag: 'text', val: { text: 'hello world' } },
      { tag: 'image', val: { data: 'AAAA', mimeType: 'image/png' } },
    ],
    isError: false,
  });
  assert.deepEqual(out.content.map((b) => b.val.text), ['hello [cut]', '[image: image/png]']);
});
