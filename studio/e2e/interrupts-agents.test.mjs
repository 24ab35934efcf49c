// Browser tests of answering codex and cursor from the studio: Chromium
// (playwright-core) against the real runwire-serve --agent codex|cursor
// --interactive, whose agent is examples/replay-agent: it replays a recorded
// `codex app-server` / `cursor-agent acp` session (fixtures/interactive/) and
// checks every line runwire writes back against the recording, failing
// loudly (`replay-agent:` on the server's stderr) on a mismatch. Every test
// ends with the stand-in's verdict: it replayed the whole recording (its
// state file says `done`), every line runwire wrote matching.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/   (from studio/)
//   (replay-agent is looked for beside it, in examples/; `cargo test --all-targets` builds it)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { REPO, guard, launchBrowser, removeTempDirs, serverBinary, startServer, tempDir, waitFor, jsonLines } from './harness.mjs';

const DESKTOP = { width: 1280, height: 800 };

let browser;
const servers = [];

function replayAgent() {
  return path.join(path.dirname(serverBinary()), 'examples', 'replay-agent');
}

const haveAgent = existsSync(replayAgent());
if (!haveAgent && process.env.CI) {
  throw new Error(`${replayAgent()} is missing: cargo build --example replay-agent`);
}

function cellDir(agent, cell) {
  return path.join(REPO, 'fixtures/interactive', agent === 'codex' ? 'codex' : 'acp-cursor', cell);
}

/** The person's first prompt in the recording (the last text block). */
function firstPrompt(agent, cell) {
  for (const l of readFileSync(path.join(cellDir(agent, cell), 'to-agent.ndjson'), 'utf8').split('\n')) {
    if (!l.trim()) continue;
    const v = JSON.parse(JSON.parse(l).line);
    if (v.method === 'turn/start' || v.method === 'session/prompt') {
      const blocks = v.params.input || v.params.prompt;
      return blocks[blocks.length - 1].text;
    }
  }
  throw new Error(`no prompt in ${cell}`);
}

/** The text of a recorded prompt line (`turn/start`, `turn/steer`, `session/prompt`). */
function promptOf(line) {
  const blocks = line.params.input || line.params.prompt;
  return blocks[blocks.length - 1].text;
}

/**
 * runwire-serve over the stand-in for `cell`. `cont`: after the recorded
 * process, the same stand-in goes on with process `cont` from its prompt
 * (the session stays: the next message on the thread is that prompt).
 */
async function server(agent, cell, { cont } = {}) {
  const state = path.join(tempDir('replay'), 'state.json');
  const env = { REPLAY_CELL: cellDir(agent, cell), REPLAY_EXPECT_ARGS: agent === 'codex' ? 'app-server' : 'acp', REPLAY_STATE: state };
  if (cont) env.REPLAY_CONTINUE = String(cont);
  const s = await startServer({ args: ['--agent', agent, '--interactive', '--agent-cmd', replayAgent()], env });
  s.replayState = () => {
    try {
      return JSON.parse(readFileSync(state, 'utf8'));
    } catch {
      return null;
    }
  };
  servers.push(s);
  return s;
}

/** The stand-in's verdict: no wrong line, and the whole recording replayed. */
async function replayHappy(s) {
  assert.ok(!s.stderr().includes('replay-agent:'), `the replayed agent found a wrong line:\n${s.stderr()}`);
  await waitFor(() => (s.replayState() || {}).state === 'done', { what: `the replay to end (state ${JSON.stringify(s.replayState())})` });
  assert.ok(!s.stderr().includes('replay-agent:'), `the replayed agent found a wrong line:\n${s.stderr()}`);
}

/**
 * Acts as the recorded person until the stand-in waits for a client line
 * with `method`: each approval card that opens meanwhile is approved (the
 * recorded person allowed them all). Returns the stand-in's state then.
 */
async function approveUntil(p, s, method) {
  const end = Date.now() + 60000;
  for (;;) {
    const st = s.replayState() || {};
    assert.notEqual(st.state, 'fail', `the replay failed: ${JSON.stringify(st)}\n${s.stderr()}`);
    if (st.state === 'wait' && st.expect && st.expect.method === method) return st;
    const open = p.locator('section.request[data-kind="tool_approval"][data-state="open"]');
    if (await open.count()) {
      await open.first().locator('button[data-action="approve"]').click();
      await p.waitForFunction(() => !document.querySelector('section.request[data-state="sending"]'), null, { timeout: 5000 }).catch(() => {});
    }
    assert.ok(Date.now() < end, `the stand-in never waited for ${method}: ${JSON.stringify(st)}\n${s.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function inputRecords(s) {
  const dir = path.join(s.home, 'serve/runstate');
  const out = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.jsonl') || f.includes('.agent.')) continue;
    for (const r of jsonLines(path.join(dir, f))) {
      if (r.input) out.push(r);
    }
  }
  return out;
}

async function open(s, agent, cell) {
  const context = await browser.newContext({ viewport: DESKTOP });
  const p = await context.newPage();
  const g = guard(p);
  await p.goto(`${s.url}/#/chat`);
  await send(p, firstPrompt(agent, cell));
  return { p, g, context };
}

async function chat(s, agent, cell, kind = 'tool_approval') {
  const { p, g, context } = await open(s, agent, cell);
  await p.locator(`section.request[data-kind="${kind}"][data-state="open"]`).waitFor({ timeout: 30000 });
  return { p, g, context, card: p.locator('section.request').first() };
}

async function send(p, prompt) {
  await p.fill('#chat-prompt', prompt);
  await p.press('#chat-prompt', 'Control+Enter');
}

async function status(p, st) {
  await p.waitForSelector(`.run-status[data-status="${st}"]`, { timeout: 30000 });
}

async function finished(p) {
  await status(p, 'finished');
}

/** Steers from the chat's live steer box; resolves to the note the studio shows. */
async function steer(p, text) {
  await p.waitForSelector('form.live-steer:not([hidden])', { timeout: 30000 });
  await p.fill('#chat-steer', text);
  await p.press('#chat-steer', 'Enter');
  await p.waitForFunction(() => /^Steer(:| refused)/.test(document.querySelector('form.live-steer .answer').textContent) && !/sending/.test(document.querySelector('form.live-steer .answer').textContent), null, { timeout: 30000 });
  return p.locator('form.live-steer .answer').textContent();
}

/**
 * The prompt of process `n` of the cell (what the person sent after the
 * stop): processes split as the stand-in splits them, at a new recorder run
 * or a client `initialize`.
 */
function promptOfProcess(agent, cell, n) {
  const envs = readFileSync(path.join(cellDir(agent, cell), 'to-agent.ndjson'), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l))
    .sort((a, b) => a.run - b.run || a.seq - b.seq);
  const parts = [];
  let run = null;
  for (const e of envs) {
    const v = JSON.parse(e.line);
    if (!parts.length || e.run !== run || (v.method === 'initialize' && parts[parts.length - 1].length)) parts.push([]);
    run = e.run;
    parts[parts.length - 1].push(v);
  }
  const line = (parts[n - 1] || []).find((v) => v.method === 'turn/start' || v.method === 'session/prompt');
  assert.ok(line, `no prompt in process ${n} of ${cell}`);
  return promptOf(line);
}

before(async () => {
  if (haveAgent) browser = await launchBrowser();
});

after(async () => {
  for (const s of servers) await s.stop();
  if (browser) await browser.close();
  removeTempDirs();
});

describe('answering codex and cursor in Chromium against runwire-serve --interactive', { skip: !haveAgent && 'no replay-agent built' }, () => {
  test('codex: a command approval card, approved; the turn finishes with the command done', async () => {
    const s = await server('codex', 'approval-allow');
    const { p, g, context, card } = await chat(s, 'codex', 'approval-allow');
    assert.match(await card.locator('.request-h').textContent(), /command_execution/);
    await card.locator('button[data-action="approve"]').click();
    await finished(p);
    assert.equal(await card.getAttribute('data-state'), 'answered');
    assert.equal(await card.locator('.request-status').textContent(), 'Approved.');
    assert.match((await p.locator('.chat-log .assistant-text').allTextContents()).join(''), /done/);
    assert.ok(inputRecords(s).some((r) => r.input === 'answered' && r.decision === 'allow'));
    await replayHappy(s);
    g.check();
    await context.close();
  });

  test('codex: a command denied with a reason; the turn goes on', async () => {
    const s = await server('codex', 'approval-deny');
    const { p, g, context, card } = await chat(s, 'codex', 'approval-deny');
    await card.locator('input[name="reason"]').fill('not outside the workspace');
    await card.locator('button[data-action="deny"]').click();
    await finished(p);
    assert.match(await card.locator('.request-status').textContent(), /Denied: not outside the workspace/);
    assert.ok(inputRecords(s).some((r) => r.decision === 'deny' && r.detail === 'not outside the workspace'));
    await replayHappy(s);
    g.check();
    await context.close();
  });

  test('cursor: a tool call approved; the turn finishes', async () => {
    const s = await server('cursor', 'approval-allow');
    const { p, g, context, card } = await chat(s, 'cursor', 'approval-allow');
    assert.match(await card.locator('.request-h').textContent(), /execute/);
    await card.locator('button[data-action="approve"]').click();
    await finished(p);
    assert.equal(await card.locator('.request-status').textContent(), 'Approved.');
    assert.ok(inputRecords(s).some((r) => r.input === 'answered' && r.decision === 'allow'));
    await replayHappy(s);
    g.check();
    await context.close();
  });

  test('cursor: a tool call denied; the agent says so and the turn finishes', async () => {
    const s = await server('cursor', 'approval-deny');
    const { p, g, context, card } = await chat(s, 'cursor', 'approval-deny');
    await card.locator('button[data-action="deny"]').click();
    await finished(p);
    assert.match(await card.locator('.request-status').textContent(), /Denied/);
    assert.match((await p.locator('.chat-log .assistant-text').allTextContents()).join(''), /denied/);
    assert.ok(inputRecords(s).some((r) => r.decision === 'deny'));
    await replayHappy(s);
    g.check();
    await context.close();
  });

  test('codex: a question answered from its card by choosing one; the turn finishes with the answer', async () => {
    const s = await server('codex', 'user-question');
    const { p, g, context, card } = await chat(s, 'codex', 'user-question', 'question');
    const labels = await card.locator('.option input').evaluateAll((xs) => xs.map((x) => x.value));
    assert.deepEqual(labels, ['tabs', 'spaces']);
    await card.locator('.option label', { hasText: 'spaces' }).click();
    await card.locator('button[type="submit"]').click();
    await finished(p);
    assert.match(await card.locator('.request-status').textContent(), /Answered: spaces/);
    assert.match((await p.locator('.chat-log .assistant-text').allTextContents()).join(''), /spaces/);
    assert.ok(inputRecords(s).some((r) => r.input === 'answered' && r.decision === 'answer'));
    await replayHappy(s);
    g.check();
    await context.close();
  });

  test('codex: steer written into the running turn (turn/steer); the turn finishes', async () => {
    const s = await server('codex', 'steer');
    const { p, g, context } = await open(s, 'codex', 'steer');
    // The stand-in waits for the steer where the person sent it: the turn runs.
    const st = await approveUntil(p, s, 'turn/steer');
    const note = await steer(p, promptOf(st.expect));
    assert.match(note, /written into the running turn \(live steer\)/);
    await finished(p);
    // The steer stays in the conversation, with what became of it.
    const shown = p.locator('.chat-log .steer');
    assert.equal(await shown.count(), 1);
    assert.match(await shown.textContent(), /You, mid-turn: /);
    assert.ok((await shown.locator('.steer-text').textContent()).includes(promptOf(st.expect)));
    assert.match(await shown.locator('.steer-detail').textContent(), /live steer/);
    await replayHappy(s);
    g.check();
    await context.close();
  });

  test('codex: Stop interrupts the turn (turn/interrupt); the run ends cancelled, the session stays for the next message', async () => {
    const s = await server('codex', 'stop-interrupt', { cont: 2 });
    const { p, g, context } = await open(s, 'codex', 'stop-interrupt');
    await approveUntil(p, s, 'turn/interrupt');
    await p.locator('.view-chat form.prompt button', { hasText: 'Stop' }).click();
    await status(p, 'cancelled');
    assert.match(await p.locator('.run-line').last().textContent(), /Stopped/);
    // The same session takes the next message (no new process: the stand-in goes on).
    await send(p, promptOfProcess('codex', 'stop-interrupt', 2));
    await finished(p);
    assert.equal(await p.locator('article.exchange').count(), 2);
    assert.match(await p.locator('article.exchange').last().locator('.assistant-text').last().textContent(), /4/);
    await replayHappy(s);
    g.check();
    await context.close();
  });

  test('cursor: steer is cancel-then-prompt, said so; the new prompt runs to its end', async () => {
    const s = await server('cursor', 'steer');
    const { p, g, context } = await open(s, 'cursor', 'steer');
    // The person approved each `sleep 2`, then steered: ACP's cancel, then a prompt.
    const st = await approveUntil(p, s, 'session/cancel');
    assert.equal(st.then.method, 'session/prompt');
    const note = await steer(p, promptOf(st.then));
    assert.match(note, /ACP cannot steer a running turn: the turn was cancelled and the message prompts again/);
    // The new prompt asks once more (`git branch`): approved, and the run finishes.
    const last = p.locator('section.request[data-state="open"]');
    await last.waitFor({ timeout: 30000 });
    assert.match(await last.locator('.request-h').textContent(), /execute/);
    await last.locator('button[data-action="approve"]').click();
    await finished(p);
    // Shown as what it was, in the conversation where it happened (the box's note goes with the run).
    const shown = p.locator('.chat-log .steer');
    assert.equal(await shown.count(), 1);
    assert.ok((await shown.locator('.steer-text').textContent()).includes(promptOf(st.then)));
    assert.match(await shown.locator('.steer-detail').textContent(), /the turn was cancelled and the message prompts again/);
    await replayHappy(s);
    g.check();
    await context.close();
  });

  test('cursor: Stop cancels the turn (session/cancel); the run ends cancelled, the session stays for the next message', async () => {
    const s = await server('cursor', 'stop-interrupt', { cont: 2 });
    const { p, g, context } = await open(s, 'cursor', 'stop-interrupt');
    await approveUntil(p, s, 'session/cancel');
    await p.locator('.view-chat form.prompt button', { hasText: 'Stop' }).click();
    await status(p, 'cancelled');
    assert.match(await p.locator('.run-line').last().textContent(), /Stopped/);
    await send(p, promptOfProcess('cursor', 'stop-interrupt', 2));
    await finished(p);
    assert.equal(await p.locator('article.exchange').count(), 2);
    await replayHappy(s);
    g.check();
    await context.close();
  });
});
