// Browser tests of answering codex and cursor from the studio: Chromium
// (playwright-core) against the real runwire-serve --agent codex|cursor
// --interactive, whose agent is examples/replay-agent: it replays a recorded
// `codex app-server` / `cursor-agent acp` session (fixtures/interactive/) and
// checks every line runwire writes back against the recording, failing
// loudly (`replay-agent:` on the server's stderr) on a mismatch.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/   (from studio/)
//   (replay-agent is looked for beside it, in examples/; `cargo test --all-targets` builds it)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { REPO, guard, launchBrowser, removeTempDirs, serverBinary, startServer } from './harness.mjs';

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

async function server(agent, cell) {
  const s = await startServer({
    args: ['--agent', agent, '--interactive', '--agent-cmd', replayAgent()],
    env: { REPLAY_CELL: cellDir(agent, cell), REPLAY_EXPECT_ARGS: agent === 'codex' ? 'app-server' : 'acp' },
  });
  servers.push(s);
  return s;
}

function replayHappy(s) {
  assert.ok(!s.stderr().includes('replay-agent:'), `the replayed agent found a wrong line:\n${s.stderr()}`);
}

function inputRecords(s) {
  const dir = path.join(s.home, 'serve/runstate');
  const out = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('.jsonl') || f.includes('.agent.')) continue;
    for (const l of readFileSync(path.join(dir, f), 'utf8').split('\n')) {
      if (l.trim() && JSON.parse(l).input) out.push(JSON.parse(l));
    }
  }
  return out;
}

async function chat(s, agent, cell) {
  const context = await browser.newContext({ viewport: DESKTOP });
  const p = await context.newPage();
  const g = guard(p);
  await p.goto(`${s.url}/#/chat`);
  await p.fill('#chat-prompt', firstPrompt(agent, cell));
  await p.press('#chat-prompt', 'Control+Enter');
  await p.locator('section.request[data-kind="tool_approval"][data-state="open"]').waitFor({ timeout: 30000 });
  return { p, g, context, card: p.locator('section.request').first() };
}

async function finished(p) {
  await p.waitForSelector('.run-status[data-status="finished"]', { timeout: 30000 });
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
    assert.match(await card.locator('.request-tool').textContent(), /command_execution/);
    await card.locator('button[data-action="approve"]').click();
    await finished(p);
    assert.equal(await card.getAttribute('data-state'), 'answered');
    assert.equal(await card.locator('.request-status').textContent(), 'Approved.');
    assert.match((await p.locator('.chat-log .assistant-text').allTextContents()).join(''), /done/);
    assert.ok(inputRecords(s).some((r) => r.input === 'answered' && r.decision === 'allow'));
    replayHappy(s);
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
    replayHappy(s);
    g.check();
    await context.close();
  });

  test('cursor: a tool call approved; the turn finishes', async () => {
    const s = await server('cursor', 'approval-allow');
    const { p, g, context, card } = await chat(s, 'cursor', 'approval-allow');
    assert.match(await card.locator('.request-tool').textContent(), /execute/);
    await card.locator('button[data-action="approve"]').click();
    await finished(p);
    assert.equal(await card.locator('.request-status').textContent(), 'Approved.');
    assert.ok(inputRecords(s).some((r) => r.input === 'answered' && r.decision === 'allow'));
    replayHappy(s);
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
    replayHappy(s);
    g.check();
    await context.close();
  });
});
