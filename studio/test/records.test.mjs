// The studio as used: answered requests as one-line records, each thing said
// once on a card, a refused call shown denied (not failed), the runs list's
// ages and conversations, and what a demo server is.
import test from 'node:test';
import assert from 'node:assert/strict';
import { cardMessage, cardTitle, fromInputRequest, fromInterrupt, recordLine } from '../app/state/requests.js';
import { applyAgui, createRun } from '../app/state/agui.js';
import { applyEvent, createTask } from '../app/state/events.js';
import { STATUS_LABELS, statusDetail, statusOf } from '../app/state/toolcards.js';
import { ageText, groupRuns, threadOf, turnRunId } from '../app/state/runs.js';
import { DEMO_AGENT_NOTE, HUB_FOOTER, LOCAL_FOOTER, REPLAY_NOTE, describeServer, footerText } from '../app/state/server.js';

const at = new Date(2026, 0, 2, 12, 4, 30);

// As src/serve/interrupts.rs interrupt_for writes them: the stock message
// "Allow TOOL?", a question's message the questions themselves.
const bash = fromInterrupt({
  id: 'r1',
  reason: 'tool_call',
  message: 'Allow Bash?',
  toolCallId: 'run-1:t:toolu_1',
  metadata: { runwire: { kind: 'tool_approval', tool: 'Bash', input: { command: 'rm -rf build', description: 'Clean' } } },
});
const question = fromInterrupt({
  id: 'r2',
  reason: 'input_required',
  message: 'Tabs or spaces?',
  metadata: { runwire: { kind: 'question', questions: [{ question: 'Tabs or spaces?', header: 'Indent', options: [{ label: 'tabs' }, { label: 'spaces' }] }] } },
});

test('answered cards: one line naming the decision, the tool, its command and the time', () => {
  assert.equal(recordLine(bash, { decision: 'allow', scope: 'once' }, { at }).text, 'Approved Bash `rm -rf build` · 12:04');
  assert.equal(recordLine(bash, { decision: 'allow', scope: 'session' }, { at }).text, 'Approved for the session Bash `rm -rf build` · 12:04');
  assert.equal(
    recordLine(bash, { decision: 'allow', scope: 'once', input: { command: 'rm -rf build/tmp' } }, { at }).text,
    'Approved Bash `rm -rf build/tmp` with edits · 12:04',
  );
  // The studio's stock reason is not repeated; a reason the person typed is.
  assert.equal(recordLine(bash, { decision: 'deny', message: 'Denied from the studio.' }, { at }).text, 'Denied Bash `rm -rf build` · 12:04');
  assert.equal(recordLine(bash, { decision: 'deny', message: 'not here' }, { at }).text, 'Denied Bash `rm -rf build`: not here · 12:04');
  assert.equal(recordLine(question, { decision: 'answer', answers: { 'Tabs or spaces?': 'spaces' } }, { at }).text, 'Answered: spaces · 12:04');
  assert.equal(recordLine(bash, { decision: 'allow' }, { at: at.toISOString(), by: 'ana' }).text, 'Approved Bash `rm -rf build` by ana · 12:04');
  // An approved plan says the permission mode it is carried out in (the answer's `mode`).
  const plan = fromInputRequest({ id: 'p', kind: 'plan_approval', message: '1. do it' });
  assert.equal(recordLine(plan, { decision: 'allow', scope: 'once', mode: 'acceptEdits' }, { at, by: 'ana' }).text, 'Approved the plan, carried out in acceptEdits by ana · 12:04');
  assert.equal(recordLine(bash, { decision: 'expired' }, { at }).text, 'Expired, denied automatically: Bash `rm -rf build` · 12:04');
  // From a task stream's input_request, the same line.
  const task = fromInputRequest({ id: 'q', kind: 'tool_approval', tool: 'Bash', input: { command: 'make' } });
  assert.equal(recordLine(task, { decision: 'allow' }, { at }).text, 'Approved Bash `make` · 12:04');
  // A long command is cut to one line.
  const long = fromInterrupt({ id: 'l', reason: 'tool_call', metadata: { runwire: { kind: 'tool_approval', tool: 'Bash', input: { command: `echo ${'x'.repeat(200)}\nls` } } } });
  assert.ok(recordLine(long, { decision: 'allow' }, { at }).code.length <= 60);
});

test('each thing once: the heading names the tool, a stock message or the question text is not repeated', () => {
  assert.equal(cardTitle(bash), 'Allow Bash?');
  assert.equal(cardMessage(bash), null);
  assert.equal(cardTitle(question), 'The agent asks');
  assert.equal(cardMessage(question), null);
  // What adds to the card stays: claude's own description of the call, codex's reason.
  const described = fromInterrupt({ id: 'd', reason: 'tool_call', message: 'Touch file in home directory', metadata: { runwire: { kind: 'tool_approval', tool: 'Bash' } } });
  assert.equal(cardMessage(described), 'Touch file in home directory');
  const two = fromInterrupt({
    id: 'q2',
    reason: 'input_required',
    message: 'Which color?\nWhich size?',
    metadata: { runwire: { kind: 'question', questions: [{ question: 'Which color?', options: [] }, { question: 'Which size?', options: [] }] } },
  });
  assert.equal(cardMessage(two), null);
  const plan = fromInterrupt({ id: 'p', reason: 'tool_call', message: 'Approve the plan and start ExitPlanMode?', metadata: { runwire: { kind: 'plan_approval', tool: 'ExitPlanMode' } } });
  assert.equal(cardTitle(plan), 'Approve the plan?');
  assert.equal(cardMessage(plan), null);
});

// The AG-UI runs of a denied call, as runwire-serve --interactive sends them
// (recorded from the approval-deny cell): the call, the request, the answer
// in the resumed run, then claude's error result.
const RAW = 'toolu_01RYGrMixrvN6YTVzWQ6EgWM';
const denyRuns = [
  { type: 'RUN_STARTED', threadId: 't', runId: 't.r1' },
  { type: 'TOOL_CALL_START', toolCallId: `t.r1:t:${RAW}`, toolCallName: 'Bash' },
  { type: 'TOOL_CALL_ARGS', toolCallId: `t.r1:t:${RAW}`, delta: '{"command":"touch ~/x"}' },
  { type: 'TOOL_CALL_END', toolCallId: `t.r1:t:${RAW}` },
  { type: 'CUSTOM', name: 'runwire.input_request', value: { id: 'req', kind: 'tool_approval', tool_call_id: RAW, tool: 'Bash', input: { command: 'touch ~/x' } } },
  { type: 'RUN_FINISHED', threadId: 't', runId: 't.r1', outcome: { type: 'interrupt', interrupts: [{ id: 'req', reason: 'tool_call' }] } },
];
const resumed = [
  { type: 'RUN_STARTED', threadId: 't', runId: 't.r2' },
  { type: 'CUSTOM', name: 'runwire.input_answer', value: { id: 'req', decision: 'deny', message: 'no network from here', by: 'agui' } },
  { type: 'TOOL_CALL_RESULT', messageId: 'm', toolCallId: `t.r1:t:${RAW}`, content: 'Permission request denied', role: 'tool' },
  { type: 'CUSTOM', name: 'runwire.tool_result', value: { toolCallId: `t.r1:t:${RAW}`, isError: true, truncated: false, bytes: 25 } },
  { type: 'RUN_FINISHED', threadId: 't', runId: 't.r2' },
];

test('chat: a call the person denied is "denied", not "failed", with the reason', () => {
  const run = createRun();
  for (const ev of denyRuns) applyAgui(run, ev);
  run.status = 'starting'; // the chat's resume run reuses the exchange's state
  for (const ev of resumed) applyAgui(run, ev);
  const card = run.tools.byId.get(`t.r1:t:${RAW}`);
  assert.equal(statusOf(run.tools, card), 'denied');
  assert.equal(STATUS_LABELS.denied, 'denied');
  assert.equal(statusDetail(run.tools, card), 'Denied: no network from here. The call did not run.');
  assert.equal(run.dirty.has(`tool:t.r1:t:${RAW}`), true);
  // An approved call with an error result is still "failed".
  const ok = createRun();
  for (const ev of denyRuns) applyAgui(ok, ev);
  ok.status = 'starting';
  for (const ev of resumed) applyAgui(ok, ev.name === 'runwire.input_answer' ? { ...ev, value: { id: 'req', decision: 'allow' } } : ev);
  assert.equal(statusOf(ok.tools, ok.tools.byId.get(`t.r1:t:${RAW}`)), 'failed');
});

test('task view: a denied or expired request marks its call denied in the events/v1 stream', () => {
  for (const [decision, detail] of [['deny', 'Denied: no. The call did not run.'], ['expired', 'Denied automatically: nobody answered in time. The call did not run.']]) {
    const t = createTask();
    const recs = [
      { type: 'tool_call', data: { id: RAW, name: 'Bash', args: { command: 'touch ~/x' } } },
      { type: 'input_request', data: { id: 'req', kind: 'tool_approval', tool_call_id: RAW, tool: 'Bash' } },
      { type: 'input_answer', data: { id: 'req', decision, message: 'no', by: 'studio' } },
      { type: 'tool_result', data: { id: RAW, output: 'Permission request denied', is_error: true } },
      { type: 'exit', data: { rc: 0, ok: true } },
    ];
    recs.forEach((r, i) => assert.equal(applyEvent(t, { v: 'events/v1', seq: i + 1, ...r }), 'applied'));
    const card = t.tools.byId.get(RAW);
    assert.equal(statusOf(t.tools, card), 'denied', decision);
    assert.equal(statusDetail(t.tools, card), detail);
    assert.deepEqual(t.log.slice(1, 3).map((e) => e.summary), ['tool_approval Bash', `${decision} by studio`]);
  }
});

test('runs: the age of the latest activity, short', () => {
  const now = Date.UTC(2026, 0, 2, 12, 0, 0);
  assert.equal(ageText(now - 3000, now), 'just now');
  assert.equal(ageText(now - 42000, now), '42 s ago');
  assert.equal(ageText(now - 5 * 60000 - 5000, now), '5 min ago');
  assert.equal(ageText(now - 3 * 3600000, now), '3 h ago');
  assert.equal(ageText(now - 3 * 86400000, now), '3 d ago');
  assert.equal(ageText(now + 5000, now), 'just now');
  assert.equal(ageText(undefined, now), '');
});

test('runs: the turns of one chat thread are one conversation, in place of its latest turn', () => {
  const t = 'thread-0123456789abcdef';
  const id = turnRunId(t, 'run-00aa');
  assert.equal(id, 'thread-0123456789abcdef.run-00aa');
  assert.equal(threadOf({ slug: `agui-${id}` }), t);
  assert.equal(threadOf({ slug: 'agui-run-00aa' }), null);
  assert.equal(threadOf({ slug: 'feat' }), null);
  assert.equal(threadOf({ slug: 'agui-x', threadId: 'other' }), 'other');
  const runs = [
    { runId: 'a', slug: `agui-${t}.run-3`, status: 'done', activityMs: 300, costUsd: 0.5, tokens: { input: 10, output: 1 } },
    { runId: 'sup', slug: 'sup', status: 'running', activityMs: 250 },
    { runId: 'b', slug: `agui-${t}.run-2`, status: 'failed', activityMs: 200, costUsd: 0.25, tokens: { input: 5, output: 2 } },
    { runId: 'c', slug: 'agui-thread-ffff.run-1', status: 'done', activityMs: 100 },
  ];
  const rows = groupRuns(runs);
  assert.deepEqual(rows.map((r) => (r.kind === 'run' ? r.run.runId : `thread ${r.thread}`)), [`thread ${t}`, 'sup', 'c']);
  const g = rows[0];
  assert.deepEqual(g.runs.map((r) => r.runId), ['a', 'b']);
  assert.deepEqual(g.summary.status, 'done');
  assert.equal(g.summary.activityMs, 300);
  assert.equal(g.summary.costUsd, 0.75);
  assert.deepEqual(g.summary.tokens, { input: 15, output: 3 });
  // A turn waiting for the person makes the whole conversation need input.
  assert.equal(groupRuns([{ ...runs[0] }, { ...runs[2], status: 'needs_input' }])[0].summary.status, 'needs_input');
});

test('the server says its mode in the one vocabulary; only a replay and the demo get a note', () => {
  const replay = { mode: 'replay', agent: null, interactive: false, version: '0.1.0' };
  assert.deepEqual(describeServer(replay), { label: 'replay · runwire-serve 0.1.0', note: REPLAY_NOTE, mode: 'replay' });
  assert.equal(REPLAY_NOTE, 'Replay: each prompt replays a recorded run; it is not sent to any agent.');
  const demo = describeServer({ mode: 'demo', agent: null, interactive: true, version: '0.1.0' });
  assert.deepEqual(demo, { label: 'demo · runwire-serve 0.1.0', note: DEMO_AGENT_NOTE, mode: 'demo' });
  assert.match(demo.note, /^Demo: runwire's demo agent, no model, runs nothing\./);
  const real = describeServer({ agent: 'claude', mode: 'agent', interactive: true, version: '0.1.0' });
  assert.deepEqual(real, { label: 'agent: claude, interactive · runwire-serve 0.1.0', note: '', mode: 'agent' });
  assert.equal(describeServer({ agent: 'acp', mode: 'agent', interactive: true }).label, 'agent: acp, interactive');
  assert.equal(describeServer({ agent: 'codex', mode: 'agent', interactive: false }).label, 'agent: codex');
  assert.deepEqual(describeServer({ mode: 'hub', agent: null, version: '0.1.0' }), { label: 'hub · runwire-serve 0.1.0', note: '', mode: 'hub' });
  // A word outside the four is no mode: no label of its own, no note.
  assert.deepEqual(describeServer({ mode: 'demo: recorded replay' }), { label: '', note: '', mode: null });
  assert.equal(describeServer(null).note, '');
});

test('the footer says where the data lives: a hub mirrors its nodes, any other server keeps it on its machine', async () => {
  assert.equal(footerText({ mode: 'hub' }), HUB_FOOTER);
  assert.match(HUB_FOOTER, /cluster's nodes/);
  assert.doesNotMatch(HUB_FOOTER, /stays on this machine/);
  for (const mode of ['replay', 'demo', 'agent', 'demo: recorded replay']) assert.equal(footerText({ mode }), LOCAL_FOOTER, mode);
  assert.equal(footerText(null), LOCAL_FOOTER);
  // The page's own first text (before /api/info answers) is the local one, word for word.
  const { readFile } = await import('node:fs/promises');
  const html = await readFile(new URL('../app/index.html', import.meta.url), 'utf8');
  assert.ok(html.includes(`<p id="footer-text">${LOCAL_FOOTER}</p>`), 'index.html footer');
});

test('a finished run offers no live controls, a finished task none of its own, and a halted task says why', async () => {
  const { liveControls, taskReason } = await import('../app/state/runs.js');
  for (const status of ['done', 'failed']) {
    for (const task of [undefined, 'leased', 'halted', 'committed']) {
      assert.deepEqual(liveControls(status, task), { run: false, task: false }, `${status} ${task}`);
    }
  }
  for (const status of ['running', 'idle', 'paused', 'needs_input', 'registered', null, undefined]) {
    assert.deepEqual(liveControls(status, 'leased'), { run: true, task: true }, `${status}`);
    assert.deepEqual(liveControls(status, undefined), { run: true, task: true }, `${status} (task not known yet)`);
    for (const over of ['committed', 'halted', 'failed']) assert.deepEqual(liveControls(status, over), { run: true, task: false });
  }
  const why = 'gate "cargo test" exited 101 (runstate/feat.impl.gate.log)';
  assert.equal(taskReason('halted', why), why);
  assert.equal(taskReason('failed', why), why);
  assert.equal(taskReason('leased', 'steered: resuming the session'), '');
  assert.equal(taskReason('halted', null), '');
});
