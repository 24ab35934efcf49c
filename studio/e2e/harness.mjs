// Shared pieces of the browser tests: the real runwire-serve with the stub
// engines, a TCP proxy the tests can cut, the system Chromium through
// playwright-core, and a console guard that fails on any unexpected error.

import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const CHROMIUM = process.env.STUDIO_CHROMIUM || '/usr/bin/chromium';

export function serverBinary() {
  if (process.env.RUNWIRE_SERVE) return process.env.RUNWIRE_SERVE;
  const target = process.env.CARGO_TARGET_DIR ? path.resolve(REPO, process.env.CARGO_TARGET_DIR) : path.join(REPO, 'target');
  const bin = path.join(target, 'debug', 'runwire-serve');
  if (!existsSync(bin)) throw new Error(`no runwire-serve binary: set RUNWIRE_SERVE or run cargo build (looked for ${bin})`);
  return bin;
}

/**
 * `runwire-supervise`, found like runwire-serve: `RUNWIRE_SUPERVISE`, else
 * beside `RUNWIRE_SERVE`, else in the cargo target directory.
 */
export function supervisorBinary() {
  if (process.env.RUNWIRE_SUPERVISE) return process.env.RUNWIRE_SUPERVISE;
  const bin = process.env.RUNWIRE_SERVE
    ? path.join(path.dirname(process.env.RUNWIRE_SERVE), 'runwire-supervise')
    : path.join(process.env.CARGO_TARGET_DIR ? path.resolve(REPO, process.env.CARGO_TARGET_DIR) : path.join(REPO, 'target'), 'debug', 'runwire-supervise');
  if (!existsSync(bin)) throw new Error(`no runwire-supervise binary: set RUNWIRE_SUPERVISE or run cargo build (looked for ${bin})`);
  return bin;
}

const temps = [];

/** A fresh temporary directory, removed by removeTempDirs(). */
export function tempDir(name) {
  const d = mkdtempSync(path.join(os.tmpdir(), `runwire-studio-${name}-`));
  temps.push(d);
  return d;
}

export function removeTempDirs() {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** Starts runwire-serve on a free port (in `cwd`, when given); resolves once it prints its address. */
export async function startServer({ args = [], env = {}, home, cwd } = {}) {
  const harness = home || tempDir('home');
  mkdirSync(harness, { recursive: true });
  const proc = spawn(serverBinary(), ['--listen', '127.0.0.1:0', ...args], {
    cwd,
    env: {
      ...process.env,
      PATH: `${path.join(REPO, 'fixtures/stub-engines')}:${process.env.PATH}`,
      HARNESS_HOME: harness,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => {
    stderr += d;
    if (stderr.length > 20000) stderr = stderr.slice(-20000);
  });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`runwire-serve did not start: ${stderr}`)), 20000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1].replace(/\/$/, ''));
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`runwire-serve exited ${code}: ${stderr}`));
    });
  });
  const port = Number(new URL(url).port);
  return {
    url,
    port,
    home: harness,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => {
          const t = setTimeout(() => {
            proc.kill('SIGKILL');
            r();
          }, 5000);
          proc.on('exit', () => {
            clearTimeout(t);
            r();
          });
        });
      }
      if (!home) rmSync(harness, { recursive: true, force: true });
    },
  };
}

/**
 * A TCP proxy in front of the server. `drop()` cuts every open connection
 * (both sides), as a network failure would; `requests` records the head of
 * every request that went through it.
 */
export async function startProxy(targetPort = null) {
  let target = targetPort;
  const open = new Set();
  const requests = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    const pair = { client, upstream };
    open.add(pair);
    let head = '';
    client.on('data', (d) => {
      if (head.length < 16384 && !head.includes('\r\n\r\n')) {
        head += d.toString('latin1');
        if (head.includes('\r\n\r\n')) requests.push(head.slice(0, head.indexOf('\r\n\r\n')));
      }
    });
    client.pipe(upstream);
    upstream.pipe(client);
    const done = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', done);
    upstream.on('error', done);
    client.on('close', done);
    upstream.on('close', done);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    requests,
    /** The server's port (a server that must know the proxy's origin starts after it). */
    setTarget(port) {
      target = port;
    },
    /** Cuts every open connection, as a network failure would; returns how many. */
    drop() {
      let n = 0;
      for (const pair of [...open]) {
        n += 1;
        if (pair.client.resetAndDestroy) pair.client.resetAndDestroy();
        else pair.client.destroy();
        pair.upstream.destroy();
        open.delete(pair);
      }
      return n;
    },
    open: () => open.size,
    close: () => new Promise((r) => {
      for (const pair of open) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      server.close(() => r());
    }),
  };
}

export async function launchBrowser() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/**
 * Fails on any console error or page error, except network errors the test
 * declared it expects (e.g. the 409 of a refused control verb): Chromium
 * logs every non-2xx fetch as a console error.
 */
export function guard(page) {
  const problems = [];
  const allowed = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error' && m.type() !== 'assert') return;
    const text = m.text();
    if (allowed.some((re) => re.test(text))) return;
    problems.push(`console.${m.type()}: ${text} (${m.location().url || ''})`);
  });
  page.on('crash', () => problems.push('the page crashed'));
  return {
    problems,
    /** Expect network errors matching `re` from now on. */
    allow(re) {
      allowed.push(re);
    },
    disallowAll() {
      allowed.length = 0;
    },
    check() {
      if (problems.length) throw new Error(`console/page errors:\n${problems.join('\n')}`);
    },
  };
}

/** POST /agui from node (no browser): resolves to the whole SSE body once the run ends. */
export async function postRun(base, { threadId, runId, prompt }) {
  const res = await fetch(`${base}/agui`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
    body: JSON.stringify({ threadId, runId, messages: [{ id: 'm1', role: 'user', content: prompt }] }),
  });
  if (res.status !== 200) throw new Error(`POST /agui: HTTP ${res.status}: ${await res.text()}`);
  return res.text();
}

/** Reads a whole SSE body (from node) into frames {id, data}. */
export function frames(body) {
  return body
    .split(/\n\n/)
    .map((block) => {
      const f = { id: null, data: [] , event: 'message' };
      for (const line of block.split('\n')) {
        if (line.startsWith('id:')) f.id = line.slice(3).trim();
        else if (line.startsWith('data:')) f.data.push(line.slice(5).replace(/^ /, ''));
        else if (line.startsWith('event:')) f.event = line.slice(6).trim();
      }
      return { ...f, data: f.data.join('\n') };
    })
    .filter((f) => f.data !== '');
}

/**
 * The complete JSON lines of a file another process appends to, parsed: a
 * line still being written (no newline yet) is left out. A writer's line
 * may land in more than one write: reading it half-written made a
 * clean-clone CI run's JSON.parse fail.
 */
export function jsonLines(file) {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  return text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

export async function waitFor(fn, { timeout = 15000, interval = 50, what = 'condition' } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, interval));
  }
}

/** True while `pid` exists and is not a zombie (a zombie still answers signal 0). */
export function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 1).trimStart().startsWith('Z');
  } catch {
    return false;
  }
}

/** True while some process is in group `pgid` (signal 0 to the group). */
export function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (e) {
    if (e.code === 'ESRCH') return false;
    throw e;
  }
}

/**
 * Starts `runwire-supervise` on `plan` (an object) in a fresh working
 * directory, registered under `home` (the HARNESS_HOME of the server under
 * test), with the stub engines first on PATH. It runs in its own process
 * group; stop() sends SIGTERM to that group (the supervisor then halts its
 * tasks), SIGKILL after 10 s.
 */
export function startSupervisor({ plan, home, slug = 'sup', args = [], env = {} }) {
  // Short: the control socket ($HARNESS_HOME/sock/<runId>.sock) must fit in sun_path.
  const dir = tempDir('sup');
  const plan_ = path.join(dir, `${slug}.plan.json`);
  writeFileSync(plan_, JSON.stringify(plan));
  const pidFile = path.join(dir, 'stub.pids');
  const proc = spawn(supervisorBinary(), ['--plan', plan_, ...args], {
    cwd: dir,
    env: {
      ...process.env,
      PATH: `${path.join(REPO, 'fixtures/stub-engines')}:${process.env.PATH}`,
      HARNESS_HOME: home,
      STUB_PID_FILE: pidFile,
      ...env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  let stderr = '';
  proc.stderr.on('data', (d) => {
    stderr += d;
    if (stderr.length > 20000) stderr = stderr.slice(-20000);
  });
  let exit = null;
  const exited = new Promise((r) => proc.on('exit', (code, signal) => r((exit = { code, signal }))));
  const runstate = path.join(dir, 'runstate');
  const readJson = (p) => {
    try {
      return JSON.parse(readFileSync(p, 'utf8'));
    } catch {
      return null;
    }
  };
  return {
    dir,
    runstate,
    pid: proc.pid,
    stderr: () => stderr,
    exit: () => exit,
    exited,
    /** The journal's records (a line being written is skipped). */
    journal() {
      let text = '';
      try {
        text = readFileSync(path.join(runstate, `${slug}.jsonl`), 'utf8');
      } catch {
        return [];
      }
      return text.split('\n').flatMap((l) => {
        try {
          return l.trim() ? [JSON.parse(l)] : [];
        } catch {
          return [];
        }
      });
    },
    /** The liveness file, or null while it is missing or being replaced. */
    live: () => readJson(path.join(runstate, `${slug}.live.json`)),
    /** Every pid the stub engines wrote (each engine and its child). */
    stubPids() {
      try {
        return readFileSync(pidFile, 'utf8').split('\n').map((l) => Number(l.trim())).filter((n) => n > 0);
      } catch {
        return [];
      }
    },
    async stop() {
      if (exit) return exit;
      try {
        process.kill(-proc.pid, 'SIGTERM');
      } catch {}
      const t = setTimeout(() => {
        try {
          process.kill(-proc.pid, 'SIGKILL');
        } catch {}
      }, 10000);
      await exited;
      clearTimeout(t);
      return exit;
    },
  };
}
