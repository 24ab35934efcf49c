// postCommand (app/api.js): each click's command carries an idempotency
// key of its own, so a hub that retries it (or forwards a retry) runs it
// once (spec/CLUSTER.md, "Keys"); other requests carry none.
import test from 'node:test';
import assert from 'node:assert/strict';
import { postCommand, postJson } from '../app/api.js';

async function sent(fn) {
  const seen = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (url, init) => {
    seen.push({ url, key: init.headers['Idempotency-Key'] ?? null, body: init.body });
    return new Response('{"ok":true}', { status: 200 });
  };
  try {
    await fn();
  } finally {
    globalThis.fetch = realFetch;
  }
  return seen;
}

test('each command gets a key of its own; a given key is kept; plain posts get none', async () => {
  const seen = await sent(async () => {
    const a = await postCommand('/runs/r/tasks/t/steer', { msg: 'x' });
    assert.equal(a.status, 200);
    await postCommand('/runs/r/tasks/t/steer', { msg: 'x' });
    await postCommand('/runs/r/tasks/t/kill', undefined, { key: 'click-given' });
    await postJson('/agui', {});
  });
  assert.equal(seen.length, 4);
  assert.match(seen[0].key, /^click-[0-9a-f]{16}$/);
  assert.match(seen[1].key, /^click-[0-9a-f]{16}$/);
  assert.notEqual(seen[0].key, seen[1].key);
  assert.equal(seen[2].key, 'click-given');
  assert.equal(seen[3].key, null);
  assert.equal(seen[0].body, '{"msg":"x"}');
});
