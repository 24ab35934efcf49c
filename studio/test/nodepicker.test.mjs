// The chat's node picker at a hub (spec/CLUSTER.md, "The studio at a hub"):
// the nodes offered are the ones /api/info says are up, a choice stays while
// its node is up, and a run names its node only at a hub.
import test from 'node:test';
import assert from 'node:assert/strict';
import { chatForwardedProps, pickNode, upNodes } from '../app/state/server.js';

const hub = (nodes) => ({ mode: 'hub', nodes });

test('a hub offers its up nodes, by name; a lost one, a bad name or another mode offers none', () => {
  const info = hub([
    { node: 'beta', state: 'up', since: 2 },
    { node: 'alpha', state: 'up', since: 1 },
    { node: 'gamma', state: 'lost', since: 3 },
    { node: 'a.b', state: 'up', since: 4 },
    { node: 'beta', state: 'up', since: 2 },
    { state: 'up' },
    null,
  ]);
  assert.deepEqual(upNodes(info), ['alpha', 'beta']);
  assert.deepEqual(upNodes(hub([{ node: 'gamma', state: 'lost', since: 3 }])), []);
  assert.deepEqual(upNodes(hub('alpha')), []);
  assert.deepEqual(upNodes({ mode: 'agent', nodes: [{ node: 'alpha', state: 'up' }] }), []);
  assert.deepEqual(upNodes(null), []);
});

test('a choice stays while its node is up, else the first up node, else none', () => {
  assert.equal(pickNode(['alpha', 'beta'], 'beta'), 'beta');
  assert.equal(pickNode(['alpha'], 'beta'), 'alpha');
  assert.equal(pickNode(['alpha', 'beta'], ''), 'alpha');
  assert.equal(pickNode([], 'beta'), '');
});

test("a run names the thread's node at a hub only, and never a name the hub refuses", () => {
  assert.deepEqual(chatForwardedProps('hub', 'beta'), { node: 'beta' });
  // A thread opened from elsewhere: the hub knows its node.
  assert.deepEqual(chatForwardedProps('hub', null), {});
  assert.deepEqual(chatForwardedProps('hub', 'a.b'), {});
  assert.deepEqual(chatForwardedProps('agent', 'beta'), {});
  assert.deepEqual(chatForwardedProps('replay', 'beta'), {});
});
