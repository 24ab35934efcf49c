// A hub's runs on a lost node (spec/CLUSTER.md, "Nodes"): not shown as
// plain running, and the feed's `node` events mark and unmark them.
import test from 'node:test';
import assert from 'node:assert/strict';
import { applyNodeEvent, staleOnLostNode } from '../app/state/runs.js';

test("a lost node's running runs say so, its finished ones stay as they are", () => {
  const running = { runId: 'alpha.r1', node: 'alpha', status: 'running', nodeState: 'lost', nodeLostSince: Date.UTC(2026, 0, 2) };
  assert.match(staleOnLostNode(running), /^node alpha lost: no heartbeat since /);
  assert.match(staleOnLostNode({ ...running, status: 'needs_input' }), /node alpha lost/);
  // A live session waiting for its next message, or paused: nothing reaches it on a lost node either.
  for (const status of ['idle', 'paused', 'registered']) assert.match(staleOnLostNode({ ...running, status }), /node alpha lost/, status);
  assert.equal(staleOnLostNode({ ...running, status: 'failed' }), null);
  assert.equal(staleOnLostNode({ ...running, status: 'done' }), null);
  assert.equal(staleOnLostNode({ ...running, nodeState: 'up' }), null);
  assert.equal(staleOnLostNode({ runId: 'r', status: 'running' }), null);
});

test('node events mark and unmark every run of that node, and no other', () => {
  const runs = new Map([
    ['alpha.r1', { run: { runId: 'alpha.r1', node: 'alpha', status: 'running', nodeState: 'up' } }],
    ['beta.r2', { run: { runId: 'beta.r2', node: 'beta', status: 'running', nodeState: 'up' } }],
  ]);
  assert.equal(applyNodeEvent(runs, { type: 'run', runId: 'alpha.r1' }), false);
  assert.equal(applyNodeEvent(runs, { type: 'node', node: 'alpha', state: 'lost', since: 5 }), true);
  assert.deepEqual([runs.get('alpha.r1').run.nodeState, runs.get('alpha.r1').run.nodeLostSince], ['lost', 5]);
  assert.equal(runs.get('beta.r2').run.nodeState, 'up');
  assert.ok(staleOnLostNode(runs.get('alpha.r1').run));
  applyNodeEvent(runs, { type: 'node', node: 'alpha', state: 'up', since: 9 });
  assert.equal(runs.get('alpha.r1').run.nodeState, 'up');
  assert.equal('nodeLostSince' in runs.get('alpha.r1').run, false);
  assert.equal(staleOnLostNode(runs.get('alpha.r1').run), null);
});
