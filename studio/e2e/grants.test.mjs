// Browser test of what "Approve for session" grants (issue 34, defect 2):
// Chromium (playwright-core) against the real runwire-serve --agent claude
// --interactive, whose agent is examples/trust-agent (beside the server
// binary): a Claude Code stand-in that raises one Bash approval with planted
// permission suggestions and logs every line runwire writes to it. The card
// shows where each grant reaches once resolved (a worktree name that is a
// symlink to /, rules reaching the home directory: not applied, said so),
// labels a rule that runs any command, and approving for the session sends
// the agent only what the card listed, at 1280 and 390 px.
//
//   RUNWIRE_SERVE=path/to/runwire-serve node --test e2e/   (from studio/)

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { guard, launchBrowser, removeTempDirs, serverBinary, startServer, tempDir, waitFor, jsonLines } from './harness.mjs';

const SIZES = [{ width: 1280, height: 800 }, { width: 390, height: 844 }];

function trustAgent() {
  return path.join(path.dirname(serverBinary()), 'examples', 'trust-agent');
}

const haveAgent = existsSync(trustAgent());
if (!haveAgent && process.env.CI) {
  throw new Error(`${trustAgent()} is missing: cargo build --example trust-agent`);
}

let browser;
const servers = [];

before(async () => {
  if (haveAgent) browser = await launchBrowser();
});

after(async () => {
  for (const s of servers) await s.stop();
  if (browser) await browser.close();
  removeTempDirs();
});

function agentLines(log) {
  return jsonLines(log).map((l) => l.line);
}

/**
 * The updatedPermissions of the answer that reached the agent. In the chat the
 * card turns "answered" on the click, before the resume run is even posted;
 * the server then writes the answer and the agent logs it in its own time, so
 * wait for the line to arrive (reading once failed a CI run at 390 px).
 */
async function sentGrants(log) {
  try {
    const answer = await waitFor(() => agentLines(log).filter((l) => l.type === 'control_response').pop(), { what: 'the answer at the agent' });
    return answer.response.response.updatedPermissions;
  } catch (e) {
    assert.fail(`${e.message}; the agent read: ${agentLines(log).map((l) => JSON.stringify(l)).join('\n')}`);
  }
}

describe('the grants of an approval card in Chromium against runwire-serve --interactive', { skip: !haveAgent && 'no trust-agent built' }, () => {
  for (const size of SIZES) {
    test(`at ${size.width} px: the card shows where each grant reaches and what runs anything; the session gets only those`, async () => {
      const wt = tempDir('grants-wt');
      mkdirSync(path.join(wt, 'src'));
      symlinkSync('/', path.join(wt, 'docs'));
      symlinkSync('src', path.join(wt, 'code'));
      const home = tempDir('grants-home');
      const logs = tempDir('grants-log');
      const log = path.join(logs, 'agent-input.jsonl');
      const suggestions = [
        { type: 'addDirectories', directories: [path.join(wt, 'docs')], destination: 'session' },
        { type: 'addDirectories', directories: [path.join(wt, 'code')], destination: 'session' },
        { type: 'addRules', rules: [{ toolName: 'Edit', ruleContent: '~/**' }], behavior: 'allow', destination: 'session' },
        { type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: 'sh -c:*' }], behavior: 'allow', destination: 'localSettings' },
      ];
      const requests = [{ request_id: 'b1', tool_name: 'Bash', input: { command: 'ls docs' }, permission_suggestions: suggestions }];
      const s = await startServer({
        args: ['--agent', 'claude', '--interactive', '--agent-cmd', trustAgent()],
        cwd: wt,
        env: { HOME: home, TRUST_PROTO: 'claude', TRUST_LOG: log, TRUST_STATE: path.join(logs, 'processes'), TRUST_REQUESTS: JSON.stringify(requests) },
      });
      servers.push(s);
      const context = await browser.newContext({ viewport: size });
      const p = await context.newPage();
      const g = guard(p);
      await p.goto(`${s.url}/#/chat`);
      await p.fill('#chat-prompt', 'look around');
      await p.press('#chat-prompt', 'Control+Enter');
      const card = p.locator('section.request[data-kind="tool_approval"][data-state="open"]').first();
      await card.waitFor({ timeout: 30000 });
      const src = realpathSync(path.join(wt, 'src'));
      const grants = card.locator('.request-grants li');
      assert.equal(await grants.count(), 2);
      assert.match(await grants.nth(0).textContent(), new RegExp(`let the agent work in ${path.join(wt, 'code')} \\(resolves to ${src}\\)`));
      assert.equal(await grants.nth(1).getAttribute('data-runs-anything'), 'true');
      assert.match(await grants.nth(1).locator('.request-runs-anything').textContent(), /Runs any command: Bash\(sh -c:\*\): sh -c runs any code/);
      assert.ok(await card.locator('.request-runs-anything').isVisible());
      const dropped = await card.locator('.request-dropped').textContent();
      assert.match(dropped, /docs \(resolved: \/\) is outside the worktree/);
      assert.match(dropped, /Edit\(~\/\*\*\) reaches .* outside the worktree/);
      if (process.env.STUDIO_SCREENSHOTS) {
        mkdirSync(process.env.STUDIO_SCREENSHOTS, { recursive: true });
        await card.screenshot({ path: path.join(process.env.STUDIO_SCREENSHOTS, `grants-card-${size.width}.png`) });
      }
      const session = card.locator('button[data-action="approve-session"]');
      assert.ok(await session.isVisible());
      await session.click();
      await p.waitForSelector('section.request[data-state="answered"]', { timeout: 30000 });
      assert.deepEqual(await sentGrants(log), [
        { type: 'addDirectories', directories: [src], destination: 'session' },
        { type: 'addRules', rules: [{ toolName: 'Bash', ruleContent: 'sh -c:*' }], behavior: 'allow', destination: 'session' },
      ]);
      g.check();
      await context.close();
    });
  }
});
