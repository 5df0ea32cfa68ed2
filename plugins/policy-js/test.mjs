// The plugin's logic, run in Node against its source (`npm test`). The component itself
// is exercised by Airlock's tests (tests/second_language.rs) through a real server.
import { register } from 'node:module';
import test from 'node:test';
import assert from 'node:assert/strict';

register('./test-hooks.mjs', import.meta.url);
const { plugin, policy } = await import('./policy.js');

const call = (rawTool, args = {}) => ({
  agent: 'default',
  service: 'notes',
  tool: `mcp__notes__${rawTool}`,
  rawTool,
  arguments: JSON.stringify(args),
  annotations: undefined,
  roots: [],
});

test('describe names the stage', () => {
  assert.deepEqual(plugin.describe().stages, ['policy']);
});

test('bad settings are refused with a message', () => {
  assert.throws(() => plugin.init('policy', '{"denny": []}'), /unknown setting "denny"/);
  assert.throws(() => plugin.init('policy', '{"deny_arguments": ["("]}'), /not a valid regex/);
  assert.throws(() => plugin.init('content', '{}'), /policy stage/);
});

test('deny, ask, rewrite and allow', () => {
  plugin.init('policy', JSON.stringify({ deny: ['delete_*'], deny_arguments: ['/etc/'], ask: ['send_?ail'], redact_keys: ['password'] }));
  assert.deepEqual(policy.checkCall(call('delete_note')).rule, 'deny:delete_*');
  assert.equal(policy.checkCall(call('read', { path: '/etc/passwd' })).decision.tag, 'deny');
  assert.equal(policy.checkCall(call('send_mail')).decision.tag, 'ask');
  const rewrite = policy.checkCall(call('login', { user: 'a', nested: { password: 'p' } }));
  assert.equal(rewrite.decision.tag, 'rewrite');
  assert.deepEqual(JSON.parse(rewrite.decision.val), { user: 'a', nested: { password: '[withheld]' } });
  assert.deepEqual(policy.checkCall(call('read_note')), { decision: { tag: 'allow' }, rule: 'default' });
});

test('a long result is withheld', () => {
  plugin.init('policy', '{"max_result_chars": 3}');
  const result = { content: [{ tag: 'text', val: { text: 'four' } }], isError: false };
  assert.equal(policy.checkResult(call('read'), result).decision.tag, 'withhold');
  plugin.init('policy', '{}');
  assert.equal(policy.checkResult(call('read'), result).decision.tag, 'allow');
});
