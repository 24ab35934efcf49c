// Browser tests of answering the agent: Chromium (playwright-core) against
// the real runwire-serve --agent claude --interactive, whose agent is the
// replaying stub (fixtures/stub-engines/replay): it prints a recorded Claude
// Code session and checks every line runwire writes back against the
// recording, failing loudly on a mismatch. Each test also asserts the stub
// never complained (its stderr is the server's).
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/   (from studio/)
//   STUDIO_SCREENSHOTS=dir  keeps the screenshots there (else a temp dir)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO, guard, launchBrowser, removeTempDirs, serverBinary, startServer, tempDir, waitFor, jsonLines } from './harness.mjs';

const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };
const CELLS = path.join(REPO, 'fixtures/interactive/claude-code');

let browser;
let shots;
const servers = [];

function envelopes(cell, file) {
  return readFileSync(path.join(CELLS, cell, file), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/** The cell's recorded user messages, in order. */
function messages(cell) {
  return envelopes(cell, 'to-agent.ndjson')
    .map((e) => JSON.parse(e.line))
    .filter((v) => v.type === 'user')
    .map((v) => v.message.content);
}

/** The envelope seq of the cell's first result line. */
function firstResultSeq(cell) {
  return envelopes(cell, 'from-agent.ndjson').find((e) => JSON.parse(e.line).type === 'result').seq;
}

/** The envelope seq just before the client's second user message. */
function beforeSecondMessage(cell) {
  const users = envelopes(cell, 'to-agent.ndjson').filter((e) => JSON.parse(e.line).type === 'user');
  return users[1].seq - 1;
}

/** The person's own answer in the free-text cell. */
const FREE_TEXT = 'two spaces, like the rest of the repo';

/**
 * A cell built at test time from the recorded user-question cell (as
 * tests/it/interactive.rs free_text_cell does): the client answered with
 * FREE_TEXT (claude's "Other") instead of the recorded label, in its
 * control_response (which the replaying stub checks) and in claude's echo.
 */
function freeTextCell() {
  const dir = path.join(tempDir('cell-other'), 'user-question-other');
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'manifest.json'), readFileSync(path.join(CELLS, 'user-question', 'manifest.json')));
  let answered = 0;
  const edit = (answers) => {
    for (const k of Object.keys(answers)) {
      answers[k] = FREE_TEXT;
      answered += 1;
    }
  };
  for (const file of ['to-agent.ndjson', 'from-agent.ndjson']) {
    const out = envelopes('user-question', file).map((e) => {
      const l = JSON.parse(e.line);
      if (l.type === 'control_response' && l.response?.response?.updatedInput?.answers) edit(l.response.response.updatedInput.answers);
      if (l.type === 'user' && l.tool_use_result?.answers) {
        edit(l.tool_use_result.answers);
        const c = l.message.content[0];
        c.content = c.content.replace('="spaces"', `=${JSON.stringify(FREE_TEXT)}`);
      }
      return JSON.stringify({ ...e, line: JSON.stringify(l) });
    });
    writeFileSync(path.join(dir, file), out.join('\n') + '\n');
  }
  assert.equal(answered, 2, "the recording's answer and claude's echo of it");
  return dir;
}

/** runwire-serve --interactive over the replaying stub for `cell` (a name in CELLS, or a directory). */
async function server(cell, extra = '') {
  const dir = tempDir(`engine-${path.basename(cell)}`);
  const engine = path.join(dir, 'engine.sh');
  writeFileSync(engine, `#!/bin/sh\nexec ${path.join(REPO, 'fixtures/stub-engines/replay')} claude ${path.resolve(CELLS, cell)} ${extra} -- "$@"\n`);
  chmodSync(engine, 0o755);
  const s = await startServer({ args: ['--agent', 'claude', '--interactive', '--agent-cmd', engine] });
  servers.push(s);
  return s;
}

function stubHappy(s) {
  assert.ok(!s.stderr().includes('replay stub:'), `the replaying stub complained:\n${s.stderr()}`);
}

/** The input records of the server's journals. */
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

async function page(viewport = DESKTOP) {
  const context = await browser.newContext({ viewport });
  const p = await context.newPage();
  const g = guard(p);
  return { p, g, context };
}

async function send(p, prompt) {
  await p.fill('#chat-prompt', prompt);
  await p.press('#chat-prompt', 'Control+Enter');
}

async function status(p, s) {
  await p.waitForSelector(`.run-status[data-status="${s}"]`, { timeout: 30000 });
}

/** How often `needle` occurs in `text`. */
function occurrences(text, needle) {
  return text.split(needle).length - 1;
}

/**
 * An answered card is one line (the record, e.g. Approved Bash `cmd` · 12:04)
 * and its form is hidden until the record is opened; returns the record's text.
 */
async function collapsed(card) {
  const record = card.locator('summary.request-record');
  assert.equal(await record.isVisible(), true, 'the record is shown');
  assert.equal(await card.locator('form.request-form').isVisible(), false, 'the answered form is folded away');
  const box = await card.boundingBox();
  const rec = await record.boundingBox();
  assert.ok(box.height <= rec.height + 24, `the answered card is ${box.height}px high, its record ${rec.height}px`);
  return record.textContent();
}

async function noHorizontalOverflow(p, what) {
  const m = await p.evaluate(() => ({ sw: document.scrollingElement.scrollWidth, iw: window.innerWidth }));
  assert.ok(m.sw <= m.iw, `${what}: the document is ${m.sw}px wide in a ${m.iw}px viewport`);
}

before(async () => {
  browser = await launchBrowser();
  shots = process.env.STUDIO_SCREENSHOTS || path.join(tempDir('interrupt-shots'), 'screenshots');
  mkdirSync(shots, { recursive: true });
});

after(async () => {
  for (const s of servers) await s.stop();
  if (browser) await browser.close();
  removeTempDirs();
});

describe('answering the agent in Chromium against runwire-serve --interactive', () => {
  test('chat: a tool approval card, approved by keyboard; the turn finishes with the result', async () => {
    const cell = 'approval-allow';
    const s = await server(cell);
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    await waitFor(async () => (await p.textContent('#server-info')) !== '', { what: 'the server line' });
    assert.match(await p.textContent('#server-info'), /^agent: claude, interactive · /);
    assert.equal(await p.locator('.demo-note').isVisible(), false, 'a real agent (here its stand-in) is no demo');
    await send(p, messages(cell)[0]);
    await p.locator('section.request[data-kind="tool_approval"][data-state="open"]').waitFor({ timeout: 30000 });
    const card = p.locator(`section.request[data-request-id="${await p.locator('section.request').first().getAttribute('data-request-id')}"]`);
    await status(p, 'waiting');
    // Said once: the heading names the tool; no "Tool Bash" line repeats it
    // (the grants list names the rules it grants, such as Bash(curl …): not a repeat).
    assert.equal(await card.locator('.request-h').textContent(), 'Allow Bash?');
    const shown = await card.evaluate((el) => {
      const grants = el.querySelector('.request-grants');
      return grants ? el.innerText.replace(grants.innerText, '') : el.innerText;
    });
    assert.equal(occurrences(shown, 'Bash'), 1, shown);
    assert.match(await card.locator('textarea.request-input').inputValue(), /curl -sI https:\/\/example\.com/);
    assert.ok(await card.locator('details.request-suggestions').count() >= 0);
    await p.screenshot({ path: path.join(shots, 'interrupt-card-desktop.png'), fullPage: true });
    // Keyboard only: Tab to Approve, Enter.
    await card.locator('button[data-action="approve"]').focus();
    await p.keyboard.press('Enter');
    await status(p, 'finished');
    assert.equal(await card.getAttribute('data-state'), 'answered');
    assert.equal(await card.locator('.request-status').textContent(), 'Approved.');
    // Collapsed to its record, which keeps the keyboard focus the Approve button had.
    assert.match(await collapsed(card), /^Approved Bash curl -sI https:\/\/example\.com \| head -n 1 · \d\d:\d\d$/);
    assert.equal(await card.locator('.request-record code').textContent(), 'curl -sI https://example.com | head -n 1');
    assert.equal(await p.evaluate(() => document.activeElement.classList.contains('request-record')), true);
    // In the conversation where it was answered: before the agent's reply to it.
    const order = await p.evaluate(() => {
      const rec = document.querySelector('section.request');
      const texts = [...document.querySelectorAll('.exchange .assistant-text')];
      return { inTranscript: !!rec.closest('.transcript'), replyAfter: !!(rec.compareDocumentPosition(texts.at(-1)) & Node.DOCUMENT_POSITION_FOLLOWING) };
    });
    assert.deepEqual(order, { inTranscript: true, replyAfter: true });
    // Still there to read: Enter opens the whole card.
    await p.keyboard.press('Enter');
    assert.equal(await card.locator('form.request-form').isVisible(), true);
    assert.equal(await card.locator('button[data-action="approve"]').isDisabled(), true);
    await p.keyboard.press('Enter');
    assert.equal(await card.locator('form.request-form').isVisible(), false);
    // The call's card got its result in the resumed run.
    const tool = p.locator('.tool').first();
    assert.equal(await tool.getAttribute('data-status'), 'completed');
    await tool.locator('.tool-toggle').click();
    assert.match(await tool.locator('.tool-result').textContent(), /HTTP\/2 200/);
    await p.screenshot({ path: path.join(shots, 'interrupt-approved-desktop.png'), fullPage: true });
    await waitFor(() => inputRecords(s).some((r) => r.input === 'answered' && r.decision === 'allow' && r.by === 'agui'), { what: 'the answer journaled' });
    stubHappy(s);
    g.check();
    await context.close();
  });

  test('chat at 390 px: deny with a reason; the card fits and the turn finishes', async () => {
    const cell = 'approval-deny';
    const s = await server(cell);
    const { p, g, context } = await page(PHONE);
    await p.goto(`${s.url}/#/chat`);
    await send(p, messages(cell)[0]);
    await p.locator('section.request[data-state="open"]').waitFor({ timeout: 30000 });
    const card = p.locator('section.request').first();
    await noHorizontalOverflow(p, 'the approval card at 390 px');
    await p.screenshot({ path: path.join(shots, 'interrupt-card-390.png'), fullPage: true });
    await card.locator('input[name="reason"]').fill('no network from here');
    await card.locator('button[data-action="deny"]').click();
    await status(p, 'finished');
    assert.match(await card.locator('.request-status').textContent(), /Denied: no network from here/);
    assert.match(await collapsed(card), /^Denied Bash touch ~\/bb-recording-outside\.txt: no network from here · \d\d:\d\d$/);
    // The refused call never ran: "denied", with the reason, not "failed".
    const tool = p.locator('.tool').first();
    assert.equal(await tool.getAttribute('data-status'), 'denied');
    assert.equal(await tool.locator('.badge').textContent(), 'denied');
    assert.equal(await tool.locator('.tool-detail').textContent(), 'Denied: no network from here. The call did not run. Output: 25 B (25 bytes).');
    assert.equal(await p.locator('.tool[data-status="failed"]').count(), 0);
    await waitFor(() => inputRecords(s).some((r) => r.decision === 'deny' && r.detail === 'no network from here'), { what: 'the deny journaled with its reason' });
    await noHorizontalOverflow(p, 'the answered card at 390 px');
    stubHappy(s);
    g.check();
    await context.close();
  });

  test('chat: a question with its choices, answered by choosing one', async () => {
    const cell = 'user-question';
    const s = await server(cell);
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    await send(p, messages(cell)[0]);
    await p.locator('section.request[data-kind="question"][data-state="open"]').waitFor({ timeout: 30000 });
    const card = p.locator('section.request').first();
    const labels = await card.locator('.option input').evaluateAll((xs) => xs.map((x) => x.value));
    assert.deepEqual(labels, ['tabs', 'spaces']);
    // The question is asked once (its fieldset), not again as the card's message.
    const asked = await card.locator('legend').textContent();
    const q = asked.slice(asked.indexOf(': ') + 2);
    const shown = await card.evaluate((el) => el.innerText);
    assert.equal(occurrences(shown, q), 1, shown);
    // Sending with nothing chosen says so and sends nothing.
    await card.locator('button[type="submit"]').click();
    assert.match(await card.locator('.request-status').textContent(), /choose an answer/);
    await card.locator('.option label', { hasText: 'spaces' }).click();
    await card.locator('button[type="submit"]').click();
    await status(p, 'finished');
    assert.match(await card.locator('.request-status').textContent(), /Answered: spaces/);
    assert.match(await collapsed(card), /^Answered: spaces · \d\d:\d\d$/);
    await waitFor(() => inputRecords(s).some((r) => r.decision === 'answer'), { what: 'the answer journaled' });
    stubHappy(s);
    g.check();
    await context.close();
  });

  test('chat at 390 px: a question answered with "Other", typed by keyboard; claude gets the words', async () => {
    const cell = freeTextCell();
    const s = await server(cell);
    const { p, g, context } = await page(PHONE);
    await p.goto(`${s.url}/#/chat`);
    await send(p, messages('user-question')[0]);
    await p.locator('section.request[data-kind="question"][data-state="open"]').waitFor({ timeout: 30000 });
    const card = p.locator('section.request').first();
    const other = card.locator('input[data-other]');
    const own = card.locator('input.request-own');
    assert.equal(await card.locator('.option-other label').textContent(), 'Other…');
    await noHorizontalOverflow(p, 'the question card with Other at 390 px');
    // "Other" chosen with nothing typed says so and sends nothing.
    await other.focus();
    await p.keyboard.press('Space');
    assert.equal(await other.isChecked(), true);
    assert.equal(await own.evaluate((x) => x === document.activeElement), true, 'choosing Other moves to its text box');
    await p.keyboard.press('Enter');
    assert.match(await card.locator('.request-status').textContent(), /type your own answer/);
    // A choice, then typing: typing chooses Other again; Enter sends.
    await card.locator('.option label', { hasText: 'tabs' }).click();
    assert.equal(await other.isChecked(), false);
    await own.focus();
    await p.keyboard.type(FREE_TEXT);
    assert.equal(await other.isChecked(), true);
    await p.screenshot({ path: path.join(shots, 'question-other-390.png'), fullPage: true });
    await p.keyboard.press('Enter');
    await status(p, 'finished');
    assert.equal(await card.locator('.request-status').textContent(), `Answered: ${FREE_TEXT}.`);
    assert.match(await collapsed(card), new RegExp(`^Answered: ${FREE_TEXT} · \\d\\d:\\d\\d$`));
    await waitFor(() => inputRecords(s).some((r) => r.decision === 'answer'), { what: 'the answer journaled' });
    await noHorizontalOverflow(p, 'the answered question card at 390 px');
    stubHappy(s);
    g.check();
    await context.close();
  });

  test('chat: steer written into the running turn, then the turn finishes', async () => {
    const cell = 'steer';
    const s = await server(cell, `--end-at ${firstResultSeq(cell)}`);
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    const [first, steer] = messages(cell);
    await send(p, first);
    // The stub waits for the steer at the recorded point: the turn is running.
    await p.waitForSelector('form.live-steer:not([hidden])', { timeout: 30000 });
    await p.fill('#chat-steer', steer);
    await p.press('#chat-steer', 'Enter');
    await status(p, 'finished');
    assert.match(await p.locator('form.live-steer .answer').textContent(), /written into the running turn/);
    stubHappy(s);
    g.check();
    await context.close();
  });

  test('chat: Stop interrupts the turn; the run ends cancelled and the session stays', async () => {
    const cell = 'steer';
    const s = await server(cell, `--end-at ${beforeSecondMessage(cell)}`);
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    await send(p, messages(cell)[0]);
    await p.waitForSelector('form.live-steer:not([hidden])', { timeout: 30000 });
    await p.locator('.view-chat form.prompt button', { hasText: 'Stop' }).click();
    await status(p, 'cancelled');
    assert.match(await p.locator('.run-line').last().textContent(), /Stopped/);
    stubHappy(s);
    g.check();
    await context.close();
  });

  test('the demo agent (--demo): a denied call says denied; approve, then answer; each answered card is a one-line record', async () => {
    const s = await startServer({ args: ['--demo'] });
    servers.push(s);
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    await p.locator('.demo-note:not([hidden])').waitFor();
    assert.match(await p.textContent('.demo-note'), /^Demo: runwire's demo agent, no model, runs nothing\./);
    // Turn 1: denied with a reason.
    await send(p, 'hello');
    const first = p.locator('section.request[data-kind="tool_approval"][data-state="open"]');
    await first.waitFor({ timeout: 30000 });
    assert.equal(await first.locator('.request-h').textContent(), 'Allow Bash?');
    await first.locator('input[name="reason"]').fill('not now');
    await first.locator('button[data-action="deny"]').click();
    await status(p, 'finished');
    const denied = p.locator('section.request[data-decision="deny"]');
    assert.match(await collapsed(denied), /^Denied Bash touch demo\.txt && ls: not now · \d\d:\d\d$/);
    const tool = p.locator('.exchange').first().locator('.tool');
    assert.equal(await tool.locator('.badge').textContent(), 'denied');
    // Turn 2: approved, then the question it asks, answered.
    await send(p, 'again');
    const second = p.locator('.exchange').last();
    await second.locator('section.request[data-kind="tool_approval"][data-state="open"]').waitFor({ timeout: 30000 });
    await second.locator('button[data-action="approve"]').click();
    const question = second.locator('section.request[data-kind="question"][data-state="open"]');
    await question.waitFor({ timeout: 30000 });
    const shown = await question.evaluate((el) => el.innerText);
    assert.equal(occurrences(shown, 'Which should the demo do next?'), 1, shown);
    await question.locator('.option label', { hasText: 'Tell a joke' }).click();
    await question.locator('button[type="submit"]').click();
    await waitFor(async () => (await p.locator('.exchange').last().locator('.run-line').getAttribute('data-status')) === 'finished', { what: 'the second turn to finish' });
    const records = await second.locator('summary.request-record').allTextContents();
    assert.equal(records.length, 2);
    assert.match(records[0], /^Approved Bash touch demo\.txt && ls · \d\d:\d\d$/);
    assert.match(records[1], /^Answered: Tell a joke · \d\d:\d\d$/);
    assert.equal(await second.locator('.tool[data-status="completed"]').count(), 2);
    // Nothing left open: the conversation is text, two tool cards and three one-line records.
    assert.equal(await p.locator('section.request[data-state="open"]').count(), 0);
    for (const card of await p.locator('section.request').all()) await collapsed(card);
    g.check();
    await context.close();
  });

  test('chat: a request answered elsewhere closes here, saying by whom, and is not answered twice', async () => {
    const s = await startServer({ args: ['--demo'] });
    servers.push(s);
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    await send(p, 'hello');
    const card = p.locator('section.request[data-kind="tool_approval"][data-state="open"]');
    await card.waitFor({ timeout: 30000 });
    await status(p, 'waiting');
    const interrupt = await card.getAttribute('data-request-id');
    // Another client (a phone, a script) answers it through the task route.
    const runs = await (await fetch(`${s.url}/runs`)).json();
    assert.equal(runs.runs.length, 1, JSON.stringify(runs));
    const res = await fetch(`${s.url}/runs/${encodeURIComponent(runs.runs[0].runId)}/tasks/agent/answer`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ request: interrupt, decision: 'deny', message: 'not from here', by: 'alice' }),
    });
    assert.equal(res.status, 200, await res.text());
    const closed = p.locator(`section.request[data-request-id="${interrupt}"][data-state="answered"]`);
    await closed.waitFor({ timeout: 15000 });
    assert.equal(await closed.locator('.request-status').textContent(), 'Answered elsewhere by alice: Denied: not from here');
    assert.match(await collapsed(closed), /^Denied Bash touch demo\.txt && ls: not from here by alice · \d\d:\d\d$/);
    await status(p, 'answered-elsewhere');
    assert.equal(await p.locator('.view-chat form.prompt button[type="submit"]').isDisabled(), false, 'the page may go on');
    // The page sent no answer of its own: the journal holds one, alice's.
    await new Promise((r) => setTimeout(r, 500));
    const answered = jsonLines(path.join(s.home, 'serve/runstate', readdirSync(path.join(s.home, 'serve/runstate')).find((f) => f.endsWith('.jsonl') && !f.includes('.agent.') && !f.includes('.steer.'))))
      .filter((r) => r.input === 'answered');
    assert.deepEqual(answered.map((r) => [r.decision, r.by]), [['deny', 'alice']]);
    // The next message goes on in the same session.
    await send(p, 'again');
    await p.locator('.exchange').last().locator('section.request[data-state="open"]').waitFor({ timeout: 30000 });
    g.check();
    await context.close();
  });

  test('chat: two open requests, one noted here then answered elsewhere: the note is dropped and only the other is sent', async () => {
    const agent = path.join(path.dirname(serverBinary()), 'examples', 'trust-agent');
    const logs = tempDir('two-requests');
    const requests = [
      { request_id: 'rq1', tool_name: 'Bash', input: { command: 'echo one' } },
      { request_id: 'rq2', tool_name: 'Bash', input: { command: 'echo two' } },
    ];
    const s = await startServer({
      args: ['--agent', 'claude', '--interactive', '--agent-cmd', agent],
      env: { TRUST_PROTO: 'claude', TRUST_LOG: path.join(logs, 'agent.jsonl'), TRUST_STATE: path.join(logs, 'processes'), TRUST_REQUESTS: JSON.stringify(requests) },
    });
    servers.push(s);
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/chat`);
    await send(p, 'hello');
    // Until two requests wait at once (the stand-in may raise them one after the other).
    const open = p.locator('.exchange').last().locator('section.request[data-state="open"]');
    await waitFor(async () => {
      if ((await open.count()) === 1 && (await p.locator('.run-status').getAttribute('data-status')) === 'waiting' && !(await open.first().locator('button[data-action="approve"]').isDisabled())) {
        if ((await open.first().getAttribute('data-request-id')) && (await p.locator('section.request[data-state="open"]').count()) === 1 && (await p.locator('section.request').count()) === 1) {
          await open.first().locator('button[data-action="approve"]').click();
        }
      }
      return (await open.count()) === 2;
    }, { timeout: 30000, what: 'two open requests' });
    const [first, second] = [open.nth(0), open.nth(1)];
    const firstId = await first.getAttribute('data-request-id');
    const secondId = await second.getAttribute('data-request-id');
    // Denied here: only noted (the answers go together).
    await first.locator('button[data-action="deny"]').click();
    // (A request the agent raised again has a card in each run that ended with it: the last is this one.)
    const firstCard = p.locator(`section.request[data-request-id="${firstId}"]`).last();
    await waitFor(async () => /Noted/.test(await firstCard.locator('.request-status').textContent()), { what: 'the note' });
    // Meanwhile alice allows it elsewhere.
    const runs = await (await fetch(`${s.url}/runs`)).json();
    const res = await fetch(`${s.url}/runs/${encodeURIComponent(runs.runs[0].runId)}/tasks/agent/answer`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ request: firstId, decision: 'allow', by: 'alice' }),
    });
    assert.equal(res.status, 200, await res.text());
    await waitFor(async () => /^Answered elsewhere by alice: Approved/.test(await firstCard.locator('.request-status').textContent()), { what: 'the note replaced by alice\'s answer' });
    // The other one, approved here: only it is sent, and the turn goes on.
    await p.locator(`section.request[data-request-id="${secondId}"]`).last().locator('button[data-action="approve"]').click();
    await waitFor(async () => ['finished', 'waiting'].includes(await p.locator('.run-status').getAttribute('data-status')), { timeout: 30000, what: 'the resumed run' });
    assert.doesNotMatch(await p.locator('.exchange').last().innerText(), /resume_refused|already decided/);
    // Read afresh each time: the run's status can reach the page before
    // the journal's record of the answer is written.
    const of = (id) => inputRecords(s).filter((r) => r.input === 'answered' && r.interrupt === id).map((r) => [r.decision, r.by]);
    assert.deepEqual(of(firstId), [['allow', 'alice']]);
    await waitFor(() => of(secondId).length === 1, { what: 'the second answer journaled' });
    assert.deepEqual(of(secondId), [['allow', 'agui']]);
    g.check();
    await context.close();
  });

  test('task view: the pending request as a card, approved there; the journal says by whom', async () => {
    const cell = 'approval-allow';
    const s = await server(cell);
    // The run is started by another client; the page answers from the task view.
    const res = await fetch(`${s.url}/agui`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ threadId: 'tv', runId: 'tv-1', messages: [{ id: 'm1', role: 'user', content: messages(cell)[0] }] }),
    });
    const body = await res.text();
    assert.match(body, /"outcome":\{"type":"interrupt"/);
    const run = /"run":"([^"]+)"/.exec(body)[1];
    const { p, g, context } = await page();
    await p.goto(`${s.url}/#/runs/${encodeURIComponent(run)}/tasks/agent`);
    await p.locator('section.request[data-state="open"]').waitFor({ timeout: 30000 });
    const card = p.locator('section.request').first();
    assert.match(await card.locator('textarea.request-input').inputValue(), /curl -sI/);
    await card.locator('button[data-action="approve"]').click();
    await waitFor(async () => (await card.getAttribute('data-state')) === 'answered', { what: 'the card answered' });
    assert.match(await collapsed(card), /^Approved Bash curl -sI https:\/\/example\.com \| head -n 1 · \d\d:\d\d$/);
    await waitFor(() => inputRecords(s).some((r) => r.input === 'answered' && r.decision === 'allow' && r.by === 'studio'), { what: 'the answer journaled by the studio' });
    stubHappy(s);
    g.check();
    await context.close();
  });
});
