import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { applyAgui, createRun, takeDirty } from '../app/state/agui.js';
import { applyEvent, createTask, endWithoutExit } from '../app/state/events.js';
import { statusOf } from '../app/state/toolcards.js';
import { jsonLines, repo } from './helpers.mjs';

/** The AG-UI events of a golden SSE file (the real pipeline's output). */
function sseEvents(rel) {
  return readFileSync(repo + rel, 'utf8')
    .split('\n\n')
    .filter((f) => f.startsWith('data: '))
    .map((f) => JSON.parse(f.slice('data: '.length)));
}

function play(events) {
  const run = createRun();
  for (const e of events) applyAgui(run, e);
  return run;
}

test('three concurrent subagents: each a group of its own, under the Task call that spawned it', () => {
  const run = play(sseEvents('fixtures/golden/sse/claude/synthetic.subagents-concurrent.partial.sse'));
  assert.equal(run.status, 'finished');
  // Only the progress notice (a CUSTOM the studio does not show) is skipped.
  assert.equal(run.ignored, 1);
  assert.equal(run.subagents.size, 3);
  for (const k of ['A', 'B', 'C']) {
    const sa = [...run.subagents.values()].find((s) => s.id.endsWith(`:sa:toolu_${k}`));
    assert.ok(sa, k);
    assert.equal(sa.status, 'finished');
    assert.ok(sa.parentToolCallId.endsWith(`:t:toolu_${k}`));
    assert.equal(run.tools.byId.get(sa.parentToolCallId).name, 'Task');
    // Its text and its Bash call are in its group, not in the main transcript.
    const text = sa.items.filter((i) => i.kind === 'text').map((i) => i.text).join('');
    assert.equal(text, `Working on it. (${k})Done with toolu_${k}.`);
    const tools = sa.items.filter((i) => i.kind === 'tool');
    assert.equal(tools.length, 1);
    assert.equal(statusOf(run.tools, run.tools.byId.get(tools[0].id)), 'completed');
    assert.ok(sa.items.every((i) => i.group === sa.id));
    assert.ok(sa.items.filter((i) => i.kind === 'text').every((i) => i.done));
  }
  // The main transcript: its own text, the three Task calls and the three groups.
  const top = run.items.map((i) => i.kind);
  assert.deepEqual(top.filter((k) => k === 'subagent').length, 3);
  assert.deepEqual(top.filter((k) => k === 'tool').length, 3);
  assert.ok(!run.items.some((i) => i.group), 'no subagent item leaked into the main transcript');
  const main = run.items.filter((i) => i.kind === 'text').map((i) => i.text);
  assert.deepEqual(main, ["I'll split this into three tasks.", 'All three done.']);
});

test('a nested subagent is a group inside the group of the subagent that spawned it', () => {
  const run = play(sseEvents('fixtures/golden/sse/claude/synthetic.subagents-nested.sse'));
  const [outer, inner] = [...run.subagents.values()];
  assert.equal(outer.name, 'Plan');
  assert.equal(inner.name, 'Explore');
  assert.equal(inner.parentSubagentRunId, outer.id);
  assert.ok(outer.items.some((i) => i.kind === 'subagent' && i.id === inner.id), 'the inner group is an item of the outer one');
  assert.ok(!run.items.some((i) => i.kind === 'subagent' && i.id === inner.id));
  // The spawning call of the inner one was the outer one's.
  assert.ok(outer.items.some((i) => i.kind === 'tool' && i.id === inner.parentToolCallId));
  assert.ok(inner.items.some((i) => i.kind === 'reasoning' && i.text === 'Use ls.'));
});

test('a cut-off run: its subagent ends failed with the message, its text closed', () => {
  const run = play(sseEvents('fixtures/golden/sse/claude/synthetic.subagent-cut-off.partial.sse'));
  assert.equal(run.status, 'error');
  const [sa] = [...run.subagents.values()];
  assert.equal(sa.status, 'failed');
  assert.match(sa.message, /ended before the subagent finished/);
  assert.ok(sa.items.every((i) => i.done));
});

test('subagent events mark only their group dirty; a bad one is skipped, never thrown', () => {
  const run = createRun();
  applyAgui(run, { type: 'RUN_STARTED', threadId: 't', runId: 'r' });
  applyAgui(run, { type: 'SUBAGENT_STARTED', subagentRunId: 's1', name: 'Explore', parentToolCallId: 'c1' });
  assert.deepEqual(takeDirty(run).keys, ['subagent:s1']);
  applyAgui(run, { type: 'TEXT_MESSAGE_START', messageId: 'm', subagentRunId: 's1' });
  applyAgui(run, { type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'hi', subagentRunId: 's1' });
  assert.deepEqual(takeDirty(run).keys, ['text:m']);
  applyAgui(run, { type: 'SUBAGENT_FINISHED', subagentRunId: 's1', outcome: { type: 'suspended', interruptIds: ['i'] } });
  assert.equal(run.subagents.get('s1').status, 'suspended');
  assert.deepEqual(takeDirty(run).keys.sort(), ['subagent:s1', 'text:m']);
  for (const bad of [{ type: 'SUBAGENT_STARTED' }, { type: 'SUBAGENT_FINISHED', subagentRunId: 'nope' }, { type: 'SUBAGENT_STARTED', subagentRunId: 's1', name: 'again' }]) {
    const before = run.ignored;
    applyAgui(run, bad);
    assert.equal(run.ignored, before + 1, JSON.stringify(bad));
  }
});

test('a task stream (events/v1): subagents grouped by their parent identity, nested, ended with their call', () => {
  const t = createTask();
  for (const rec of jsonLines('fixtures/golden/events/claude/synthetic.subagents-nested.events.jsonl')) applyEvent(t, rec);
  assert.equal(t.status, 'live');
  const outer = t.subagents.get('toolu_outer');
  const inner = t.subagents.get('toolu_inner');
  assert.equal(outer.name, 'Plan');
  assert.equal(outer.description, 'Plan the change');
  assert.equal(inner.parentSubagentRunId, 'toolu_outer');
  assert.equal(inner.parentToolCallId, 'toolu_inner');
  assert.ok(outer.items.some((i) => i.kind === 'subagent' && i.id === 'toolu_inner'));
  assert.ok(outer.items.some((i) => i.kind === 'tool' && i.id === 'toolu_inner'), 'the spawning call is the outer one’s');
  assert.ok(inner.items.some((i) => i.kind === 'tool' && i.id === 'toolu_ls'));
  assert.deepEqual(inner.items.filter((i) => i.kind === 'text').map((i) => i.text), ['a.rs, b.rs']);
  assert.equal(outer.status, 'finished');
  assert.equal(inner.status, 'finished');
  assert.deepEqual(t.items.filter((i) => i.kind === 'text').map((i) => i.text), ['The plan: edit a.rs then b.rs.']);
  // A card's parent is its message, never the subagent object.
  assert.equal(t.tools.byId.get('toolu_ls').parent, 'msg_i1');
});

test('a task cut off: its running subagent ends failed', () => {
  const t = createTask();
  for (const rec of jsonLines('fixtures/golden/events/claude/synthetic.subagent-cut-off.partial.events.jsonl')) applyEvent(t, rec);
  assert.equal(t.subagents.get('toolu_K').status, 'running');
  endWithoutExit(t, 'killed');
  assert.equal(t.subagents.get('toolu_K').status, 'failed');
  assert.ok(t.subagents.get('toolu_K').items.every((i) => i.done));
});
