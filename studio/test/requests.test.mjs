import test from 'node:test';
import assert from 'node:assert/strict';
import {
  answerBody, answeredElsewhere, applyInput, decide, decisionText, expiresText, fromInputRequest, fromInterrupt, isExpired, resumeEntry,
} from '../app/state/requests.js';

// The shape runwire-serve --interactive puts in RUN_FINISHED.outcome.interrupts
// (src/serve/interrupts.rs interrupt_for).
const toolInterrupt = {
  id: 'req-1',
  reason: 'tool_call',
  message: 'Allow Bash?',
  toolCallId: 'run-1:t:toolu_01',
  responseSchema: {
    type: 'object',
    properties: { approved: { type: 'boolean' }, editedArgs: { type: 'object' }, scope: { type: 'string', enum: ['once', 'session'] } },
    required: ['approved'],
  },
  expiresAt: '2030-01-01T00:10:00.000Z',
  metadata: { runwire: { kind: 'tool_approval', tool: 'Bash', input: { command: 'curl -sI https://example.com' }, suggestions: [{ type: 'addRules' }] } },
};

const questionInterrupt = {
  id: 'req-2',
  reason: 'input_required',
  message: 'Which color?',
  responseSchema: { type: 'object', properties: { answers: { type: 'object' } }, required: ['answers'] },
  metadata: {
    runwire: {
      kind: 'question',
      tool: 'AskUserQuestion',
      questions: [
        { question: 'Which color?', header: 'Color', multiSelect: false, options: [{ label: 'Red' }, { label: 'Blue', description: 'calm' }] },
        { question: 'Which sizes?', multiSelect: true, options: [{ label: 'S' }, { label: 'M' }] },
      ],
    },
  },
};

test('a tool interrupt becomes a card with its tool, input and suggestion', () => {
  const c = fromInterrupt(toolInterrupt);
  assert.equal(c.kind, 'tool_approval');
  assert.equal(c.tool, 'Bash');
  assert.equal(c.toolCallId, 'run-1:t:toolu_01');
  assert.match(c.inputText, /curl -sI/);
  assert.equal(c.suggestions.length, 1);
  assert.equal(c.editable, true);
  assert.equal(fromInterrupt({ id: 1 }), null);
  assert.equal(fromInterrupt(null), null);
});

test('approve, approve with edits, approve for the session, deny: resume entries and task bodies', () => {
  const c = fromInterrupt(toolInterrupt);
  const plain = decide(c, { type: 'approve', edited: c.inputText });
  assert.deepEqual(resumeEntry(c, plain), { interruptId: 'req-1', status: 'resolved', payload: { approved: true } });
  assert.deepEqual(answerBody(c, plain), { request: 'req-1', decision: 'allow', by: 'studio' });
  const edited = decide(c, { type: 'approve', edited: '{"command": "true"}', scope: 'session' });
  assert.deepEqual(resumeEntry(c, edited).payload, { approved: true, scope: 'session', editedArgs: { command: 'true' } });
  assert.deepEqual(answerBody(c, edited).updated_input, { command: 'true' });
  assert.equal(decisionText(edited), 'Approved for the session with edits.');
  assert.match(decide(c, { type: 'approve', edited: '{nope' }).error, /not valid JSON/);
  assert.match(decide(c, { type: 'approve', edited: '[1]' }).error, /JSON object/);
  const denied = decide(c, { type: 'deny', reason: '  not on my network ' });
  assert.deepEqual(resumeEntry(c, denied).payload, { approved: false, message: 'not on my network' });
  assert.equal(answerBody(c, denied).message, 'not on my network');
  assert.deepEqual(resumeEntry(c, decide(c, { type: 'cancel' })), { interruptId: 'req-1', status: 'cancelled' });
  assert.match(decide(c, { type: 'answer', answers: {} }).error, /only a question/);
});

test('the card offers only the scopes the interrupt offers, and says what was dropped', () => {
  const acp = {
    ...toolInterrupt,
    id: 'rw-acp',
    responseSchema: { type: 'object', properties: { approved: { type: 'boolean' }, scope: { type: 'string', enum: ['once', 'always'] } }, required: ['approved'] },
    metadata: { runwire: { kind: 'tool_approval', tool: 'execute', scopes: { once: 'allow_once', always: 'always, saved by the agent (its "Allow always" option)' } } },
  };
  const c = fromInterrupt(acp);
  assert.equal(c.editable, false);
  assert.equal(c.tellsReason, false);
  assert.equal(c.scopes.session, null);
  assert.match(c.scopes.always, /saved by the agent/);
  assert.match(decide(c, { type: 'approve', scope: 'session' }).error, /no “session” grant/);
  const always = decide(c, { type: 'approve', scope: 'always' });
  assert.deepEqual(resumeEntry(c, always).payload, { approved: true, scope: 'always' });
  assert.equal(decisionText(always), 'Approved always (saved by the agent).');
  const claude = fromInterrupt({ ...toolInterrupt, metadata: { runwire: { ...toolInterrupt.metadata.runwire, droppedUpdates: '1 of the agent\'s suggested permission update(s) will not be applied: permission mode bypassPermissions runs tool calls without asking: it needs --grant-all' } } });
  assert.match(claude.dropped, /bypassPermissions/);
  assert.equal(claude.scopes.always, null);
  assert.equal(claude.scopes.session, 'for this session');
});

test('a question needs one answer per question; multi-select takes several', () => {
  const c = fromInterrupt(questionInterrupt);
  assert.equal(c.kind, 'question');
  assert.equal(c.questions.length, 2);
  assert.equal(c.questions[1].multiSelect, true);
  assert.match(decide(c, { type: 'answer', answers: { 'Which color?': 'Red' } }).error, /Which sizes/);
  assert.match(decide(c, { type: 'answer', answers: { 'Which color?': ['Red', 'Blue'], 'Which sizes?': ['S'] } }).error, /takes one answer/);
  const d = decide(c, { type: 'answer', answers: { 'Which color?': 'Blue', 'Which sizes?': ['S', 'M'] } });
  assert.deepEqual(resumeEntry(c, d).payload, { answers: { 'Which color?': 'Blue', 'Which sizes?': ['S', 'M'] } });
  assert.equal(decisionText(d), 'Answered: Blue; S, M.');
  assert.match(decide(c, { type: 'approve' }).error, /answered, not approved/);
});

test('a question that takes free text takes the person\'s own words; one that does not, only its choices', () => {
  const free = structuredClone(questionInterrupt);
  for (const q of free.metadata.runwire.questions) q.freeText = true;
  const c = fromInterrupt(free);
  assert.deepEqual(c.questions.map((q) => q.freeText), [true, true]);
  const d = decide(c, { type: 'answer', answers: { 'Which color?': 'teal, like the logo', 'Which sizes?': ['S', 'XXL'] } });
  assert.deepEqual(resumeEntry(c, d).payload, { answers: { 'Which color?': 'teal, like the logo', 'Which sizes?': ['S', 'XXL'] } });
  assert.deepEqual(answerBody(c, d).answers, { 'Which color?': 'teal, like the logo', 'Which sizes?': ['S', 'XXL'] });
  // "Other" chosen with nothing typed, and two texts of one's own, are refused.
  assert.match(decide(c, { type: 'answer', answers: { 'Which color?': ' ', 'Which sizes?': ['S'] } }).error, /type your own answer to “Which color\?”/);
  assert.match(decide(c, { type: 'answer', answers: { 'Which color?': 'Red', 'Which sizes?': ['XL', 'XXL'] } }).error, /at most one answer of your own/);
  // The same words where the question offers only its choices.
  const plain = fromInterrupt(questionInterrupt);
  assert.equal(plain.questions[0].freeText, false);
  assert.match(decide(plain, { type: 'answer', answers: { 'Which color?': 'teal', 'Which sizes?': ['S'] } }).error, /not one of the choices/);
  // events/v1 spells it free_text.
  const t = fromInputRequest({ id: 'q9', kind: 'question', questions: [{ question: 'Why?', options: [{ label: 'a' }], multi_select: false, free_text: true }] });
  assert.equal(t.questions[0].freeText, true);
  assert.deepEqual(answerBody(t, decide(t, { type: 'answer', answers: { 'Why?': 'because' } })).answers, { 'Why?': 'because' });
});

test('expiry is read from expiresAt', () => {
  const c = fromInterrupt(toolInterrupt);
  const at = Date.parse(toolInterrupt.expiresAt);
  assert.equal(isExpired(c, at - 1), false);
  assert.equal(isExpired(c, at), true);
  assert.equal(expiresText(c, at - 30_000), 'Denied automatically in 30 s.');
  assert.equal(expiresText(c, at + 1), 'Expired: denied automatically.');
});

test('task streams: input_request opens a card, input_answer closes it once', () => {
  const cards = new Map();
  const data = { id: 'r9', kind: 'tool_approval', tool: 'Write', tool_call_id: 'toolu_9', input: { file_path: '/tmp/x' }, expires_at: '2030-01-01T00:00:00Z' };
  const c = applyInput(cards, 'input_request', data);
  assert.equal(c.source, 'task');
  assert.equal(c.toolCallId, 'toolu_9');
  assert.equal(fromInputRequest(data).expiresAt, '2030-01-01T00:00:00Z');
  // The answer names the request by runwire's id when the line carries one
  // (the supervisor takes no other), else by the agent's.
  assert.equal(answerBody(c, decide(c, { type: 'approve' })).request, 'r9');
  const bound = fromInputRequest({ ...data, interrupt_id: 'rw-00ff' });
  assert.equal(answerBody(bound, decide(bound, { type: 'approve' })).request, 'rw-00ff');
  // A replayed request (reconnect) does not reset the card.
  applyInput(cards, 'input_request', data);
  assert.equal(cards.size, 1);
  applyInput(cards, 'input_answer', { id: 'r9', decision: 'deny', message: 'no', by: 'ana', at: '2030-01-01T00:00:00Z' });
  assert.equal(cards.get('r9').answered.decision, 'deny');
  applyInput(cards, 'input_answer', { id: 'r9', decision: 'allow', at: 'x' });
  assert.equal(cards.get('r9').answered.decision, 'deny');
  assert.equal(applyInput(cards, 'input_answer', { id: 'nope', decision: 'allow' }), null);
  // A plan's answer line says the mode it is carried out in: the card's record does too.
  applyInput(cards, 'input_request', { id: 'p1', kind: 'plan_approval', message: '1. do it' });
  applyInput(cards, 'input_answer', { id: 'p1', decision: 'allow', scope: 'once', mode: 'acceptEdits', at: 'x' });
  assert.equal(cards.get('p1').answered.mode, 'acceptEdits');
  assert.equal(decisionText(cards.get('p1').answered, 'plan_approval'), 'Approved, carried out in acceptEdits.');
});

test('the grants an approval for the session applies: where each reaches, and what runs any command', () => {
  const meta = {
    ...toolInterrupt.metadata.runwire,
    permissionUpdates: [
      { update: { type: 'addDirectories' }, effect: 'let the agent work in /w/docs (resolves to /)', applied: false, reaches: ['/'], dropped: '/w/docs (resolved: /) is outside the worktree /w: it needs --grant-all' },
      { update: { type: 'addDirectories' }, effect: 'let the agent work in /w/code (resolves to /w/src)', applied: true, reaches: ['/w/src'] },
      { update: { type: 'addRules' }, effect: 'add allow rule(s) Bash(sh -c:*)', applied: true, runsAnything: 'Bash(sh -c:*): sh -c runs any code given to it' },
      { effect: 7, applied: true },
    ],
  };
  const c = fromInterrupt({ ...toolInterrupt, metadata: { runwire: meta } });
  assert.deepEqual(c.grants, [
    { effect: 'let the agent work in /w/code (resolves to /w/src)', reaches: ['/w/src'], runsAnything: null },
    { effect: 'add allow rule(s) Bash(sh -c:*)', reaches: [], runsAnything: 'Bash(sh -c:*): sh -c runs any code given to it' },
  ]);
  assert.deepEqual(fromInterrupt(toolInterrupt).grants, []);
});

test('answeredElsewhere: the journal closes the cards whose answer this page has not sent, with how and by whom', () => {
  const tool = fromInterrupt(toolInterrupt);
  const question = fromInterrupt(questionInterrupt);
  // Noted here, not sent yet (sent with the others): the journal's answer wins.
  question.answered = { decision: 'answer', answers: { 'Which color?': 'red' } };
  // req-3's answer was sent by this page: not among the cards asked about.
  const cards = new Map([[tool.id, tool], [question.id, question]]);
  const answers = [
    { ts: '2030-01-01T00:00:01.000Z', task: 'agent', request: 'toolu_01', interrupt: 'req-1', decision: 'deny', by: 'alice', detail: 'not on prod' },
    { ts: '2030-01-01T00:00:02.000Z', task: 'agent', request: 'q', interrupt: 'req-2', decision: 'answer', by: 'link', detail: '{"Which color?":"blue"}' },
    { ts: '2030-01-01T00:00:03.000Z', task: 'agent', request: 'x', interrupt: 'req-3', decision: 'allow', by: 'agui' },
    { ts: '2030-01-01T00:00:04.000Z', task: 'agent', request: 'y', interrupt: 'req-9', decision: 'allow', by: 'bob' },
    { decision: 'allow' },
    'junk',
  ];
  const got = answeredElsewhere(answers, cards);
  assert.deepEqual(got, [
    { id: 'req-1', d: { decision: 'deny', scope: null, input: null, mode: null, message: 'not on prod', answers: {}, by: 'alice', at: '2030-01-01T00:00:01.000Z' } },
    { id: 'req-2', d: { decision: 'answer', scope: null, input: null, mode: null, message: '', answers: { 'Which color?': 'blue' }, by: 'link', at: '2030-01-01T00:00:02.000Z' } },
  ]);
  assert.equal(decisionText(got[0].d, tool.kind), 'Denied: not on prod');
  assert.deepEqual(answeredElsewhere(null, cards), []);
});

test('answeredElsewhere: an allow says what it granted, as the journal keeps it (scope, edited input, a plan\'s mode)', () => {
  const tool = fromInterrupt(toolInterrupt);
  const clipped = fromInterrupt({ ...toolInterrupt, id: 'req-4' });
  const plan = fromInputRequest({ id: 'req-5', kind: 'plan_approval', message: '1. do it' });
  const cards = new Map([[tool.id, tool], [clipped.id, clipped], [plan.id, plan]]);
  const answers = [
    { ts: '2030-01-01T00:00:01.000Z', interrupt: 'req-1', decision: 'allow', by: 'bob', scope: 'session', updated_input: '{"command":"ls -a"}' },
    { ts: '2030-01-01T00:00:02.000Z', interrupt: 'req-4', decision: 'allow', by: 'bob', scope: 'once', updated_input: '{"command":"xxxx…' },
    { ts: '2030-01-01T00:00:03.000Z', interrupt: 'req-5', decision: 'allow', by: 'ana', scope: 'once', mode: 'acceptEdits' },
  ];
  const got = answeredElsewhere(answers, cards);
  assert.deepEqual(got.map((g) => [g.d.scope, g.d.input, g.d.mode]), [
    ['session', { command: 'ls -a' }, null],
    ['once', {}, null],
    ['once', null, 'acceptEdits'],
  ]);
  assert.equal(decisionText(got[0].d, tool.kind), 'Approved for the session with edits.');
  assert.equal(decisionText(got[1].d, tool.kind), 'Approved with edits.');
  assert.equal(decisionText(got[2].d, plan.kind), 'Approved, carried out in acceptEdits.');
});
