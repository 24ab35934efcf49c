// Browser test of a thread that opens anywhere (issue 38): the system
// Chromium (headless, through playwright-core) against the real
// runwire-serve with the claude stub engine. One page holds a two-turn
// conversation; a second page opens the same thread by its address: the
// server's record of the thread (GET /agui/thread) shows it the conversation
// before at once, each message once, as the first page shows it, and its
// message then gets no snapshot of what it shows already; then the first
// page's next message brings the second page's turn, once, and nothing it
// already shows again. The chat sends the stream's message ids as its
// history, so the server's thread never holds an answer twice.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/   (from studio/)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { REPO, guard, launchBrowser, removeTempDirs, startServer } from './harness.mjs';

const STREAM = path.join(REPO, 'fixtures/claude/bb-turn-tools.partial.jsonl');

let browser;
let server;

before(async () => {
  browser = await launchBrowser();
  server = await startServer({ args: ['--agent', 'claude'], env: { STUB_STREAM: STREAM, STUB_DELAY: '0' } });
});

after(async () => {
  if (server) await server.stop();
  if (browser) await browser.close();
  removeTempDirs();
});

async function chatRun(p, prompt) {
  await p.fill('#chat-prompt', prompt);
  await p.press('#chat-prompt', 'Control+Enter');
  await p.waitForSelector('.run-status[data-status="finished"]', { timeout: 30000 });
  await p.waitForSelector('.view-chat button[type="submit"]:enabled', { timeout: 10000 });
}

/** The conversation a page shows: [role, message id, text] of every user message and assistant text, in order. */
async function shown(p) {
  return p.evaluate(() =>
    [...document.querySelectorAll('.chat-log .msg.user[data-message-id], .chat-log .assistant-text[data-message-id], .chat-log .earlier .msg.assistant[data-message-id]')]
      .map((el) => {
        const user = el.classList.contains('user');
        // An earlier assistant message: its text only (a message of tool calls alone has none).
        const earlier = el.classList.contains('msg');
        const text = user ? el.querySelector('.user-text').textContent : earlier ? el.querySelector('.assistant-text')?.textContent ?? '' : el.textContent;
        return [user ? 'user' : 'assistant', el.dataset.messageId, text];
      })
      .filter(([, , text]) => text !== ''),
  );
}

function onceEach(list, what) {
  const ids = list.map(([, id]) => id);
  assert.equal(new Set(ids).size, ids.length, `${what} shows a message twice: ${JSON.stringify(list)}`);
}

describe('a thread opened in a second page', () => {
  test('shows the conversation before once, and the first page gets the second page\'s turn once', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const one = await context.newPage();
    const g1 = guard(one);
    await one.goto(`${server.url}/#/chat`);
    await one.waitForSelector('#chat-prompt');
    await chatRun(one, 'fix the build');
    await chatRun(one, 'and now the tests');
    const thread = await one.locator('.thread-id').textContent();
    assert.equal(await one.locator('a.thread-link').getAttribute('href'), `#/chat/${encodeURIComponent(thread)}`);
    const before = await shown(one);
    onceEach(before, 'the first page');
    assert.equal(before.filter(([r]) => r === 'user').length, 2);
    assert.ok(before.filter(([r]) => r === 'assistant').length >= 2, JSON.stringify(before));

    // Another page (another device, a reload) opens the thread by its address.
    const two = await context.newPage();
    const g2 = guard(two);
    await two.goto(`${server.url}/#/chat/${encodeURIComponent(thread)}`);
    // The conversation so far shows at once, from the server's record
    // (GET /agui/thread), exactly as the first page shows it.
    await two.waitForSelector('.chat-log .earlier');
    assert.equal(await two.locator('.thread-id').textContent(), thread);
    assert.deepEqual(await shown(two), before);
    await chatRun(two, 'one more thing');
    const second = await shown(two);
    onceEach(second, 'the second page');
    // What came before, exactly as the first page shows it, then its own turn.
    assert.deepEqual(second.slice(0, before.length), before);
    assert.equal(second[before.length][0], 'user');
    assert.equal(second[before.length][2], 'one more thing');
    assert.ok(second.length > before.length + 1, 'the reply streamed');
    assert.equal(await two.locator('.earlier').count(), 1);

    // The first page goes on: the snapshot brings the second page's turn,
    // once, and nothing it shows already.
    await chatRun(one, 'thanks');
    const after = await shown(one);
    onceEach(after, 'the first page, after');
    assert.deepEqual(after.slice(0, second.length), second, 'the same conversation in both pages');
    assert.equal(after[second.length][2], 'thanks');
    g1.check();
    g2.check();
    await context.close();
  });
});
