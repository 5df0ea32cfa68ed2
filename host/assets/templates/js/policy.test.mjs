// The plugin's logic in Node (`npm test`); `airlock plugin run` exercises the component.
import { register } from 'node:module';
import test from 'node:test';
import assert from 'node:assert/strict';

register('./test-hooks.mjs', import.meta.url);
const { plugin, policy } = await import('./plugin.js');

const call = (rawTool) => ({ agent: 'default', service: 'notes', tool: `mcp__notes__${rawTool}`, rawTool, arguments: '{}', roots: [] });

test('denies, asks and allows by tool name', () => {
  plugin.init('policy', JSON.stringify({ deny_prefixes: ['delete_'], ask_prefixes: ['send_'] }));
  assert.equal(policy.checkCall(call('delete_note')).decision.tag, 'deny');
  assert.equal(policy.checkCall(call('send_mail')).decision.tag, 'ask');
  assert.deepEqual(policy.checkCall(call('read_note')), { decision: { tag: 'allow' }, rule: 'default' });
});

test('unknown settings are refused', () => {
  assert.throws(() => plugin.init('policy', '{"deny": []}'), /unknown setting/);
});
