// The plugin's logic in Node (`npm test`); `airlock plugin run` exercises the component.
import test from 'node:test';
import assert from 'node:assert/strict';

const { plugin, naming } = await import('./plugin.js');

test('namespaces carry the prefix and stay unique', () => {
  plugin.init('naming', '{"prefix": "team"}');
  const service = { id: 'notes' };
  assert.equal(naming.namespace(service, []), 'team_notes');
  assert.equal(naming.namespace(service, ['team_notes']), 'team_notes2');
  const named = naming.qualify(service, 'team_notes', [{ name: 'read.note' }, { name: 'read note' }]);
  assert.deepEqual(named.map((t) => t.name), ['team_notes__read_note', 'team_notes__read_note_2']);
});
