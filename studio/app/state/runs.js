// The runs list as people read it: how long ago a run last did something,
// and the chat turns of one thread gathered into one conversation. No DOM.
//
// GET /runs does not say which AG-UI thread a recorded run belongs to (the
// server records `agui-<runId>` and nothing of the thread). So the studio's
// chat names each turn's run `<threadId>.<run-…>`, and a run whose slug reads
// `agui-thread-….run-…` is taken to be a turn of that thread. A `threadId`
// field on the run, should the server send one, is used first.

/** The runId of a chat turn: the thread first, so the runs list can gather the turns. */
export function turnRunId(threadId, runPart) {
  return `${threadId}.${runPart}`;
}

const TURN_SLUG = /^agui-(thread-[0-9A-Za-z_-]+)\.(run-[0-9A-Za-z_-]+)$/;

/** The AG-UI thread a run is a turn of, or null. */
export function threadOf(run) {
  if (!run || typeof run !== 'object') return null;
  if (typeof run.threadId === 'string' && run.threadId) return run.threadId;
  const m = typeof run.slug === 'string' ? TURN_SLUG.exec(run.slug) : null;
  return m ? m[1] : null;
}

/** The run's latest activity in ms since the epoch, or null. */
export function activityOf(run) {
  return run && typeof run.activityMs === 'number' && Number.isFinite(run.activityMs) ? run.activityMs : null;
}

/** How long ago `ms` was, short: "just now", "42 s ago", "5 min ago", "3 h ago", "2 d ago"; '' without a time. */
export function ageText(ms, now = Date.now()) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '';
  const s = Math.floor((now - ms) / 1000);
  if (s < 10) return 'just now';
  if (s < 60) return `${s} s ago`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ago`;
  const hours = Math.floor(m / 60);
  if (hours < 48) return `${hours} h ago`;
  return `${Math.floor(hours / 24)} d ago`;
}

/** The absolute local date and time of `ms` (the age's tooltip); '' without a time. */
export function localTime(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '';
  return new Date(ms).toLocaleString();
}

function sumCost(runs) {
  const costs = runs.map((r) => r.costUsd).filter((c) => typeof c === 'number' && Number.isFinite(c));
  return costs.length ? costs.reduce((a, b) => a + b, 0) : null;
}

function sumTokens(runs) {
  const ts = runs.map((r) => r.tokens).filter((t) => t && typeof t === 'object');
  if (!ts.length) return null;
  return { input: ts.reduce((a, t) => a + (t.input ?? 0), 0), output: ts.reduce((a, t) => a + (t.output ?? 0), 0) };
}

/** A conversation's status: needs input if a turn does, running if one runs, else its latest turn's. */
function groupStatus(runs) {
  if (runs.some((r) => r.status === 'needs_input')) return 'needs_input';
  if (runs.some((r) => r.status === 'running')) return 'running';
  return runs[0].status;
}

/**
 * Rows for the runs list, in the order of `runs` (already sorted, most
 * relevant first): `{kind: 'run', run}` for a run on its own, and
 * `{kind: 'thread', thread, runs, summary}` in place of the first of two or
 * more turns of one thread (`runs` in the given order; `summary` is a
 * run-like object: status, latest activity, summed cost and tokens).
 */
export function groupRuns(runs) {
  const byThread = new Map();
  for (const run of runs) {
    const t = threadOf(run);
    if (t === null) continue;
    if (!byThread.has(t)) byThread.set(t, []);
    byThread.get(t).push(run);
  }
  const rows = [];
  const placed = new Set();
  for (const run of runs) {
    const t = threadOf(run);
    const turns = t === null ? null : byThread.get(t);
    if (!turns || turns.length < 2) {
      rows.push({ kind: 'run', run });
      continue;
    }
    if (placed.has(t)) continue;
    placed.add(t);
    const times = turns.map(activityOf).filter((x) => x !== null);
    rows.push({
      kind: 'thread',
      thread: t,
      runs: turns,
      summary: {
        status: groupStatus(turns),
        activityMs: times.length ? Math.max(...times) : null,
        costUsd: sumCost(turns),
        tokens: sumTokens(turns),
        repo: turns[0].repo,
        project: turns[0].project,
        branch: turns[0].branch,
      },
    });
  }
  return rows;
}

/** Run statuses after which nothing runs: no pause, resume, steer or kill. */
const RUN_OVER = new Set(['done', 'failed']);
/** Task states after which the task does nothing more. */
const TASK_OVER = new Set(['committed', 'halted', 'failed']);

/**
 * Which live controls a run's page offers: the run's (pause, resume) while
 * the run is not over, a task's (stop, kill, steer) while neither the run
 * nor the task is. A status not known yet keeps them (the page has not
 * heard otherwise).
 */
export function liveControls(runStatus, taskState) {
  const run = !RUN_OVER.has(runStatus);
  return { run, task: run && !TASK_OVER.has(taskState) };
}

/** Why a task ended, as the page says it ('' for a task still going or done well). */
export function taskReason(state, detail) {
  if (!['halted', 'failed'].includes(state)) return '';
  return typeof detail === 'string' ? detail : '';
}

/**
 * Statuses of a run still going (GET /runs' statuses with a live process
 * behind them, and a task's pending or queued): at a hub, stale once its
 * node is lost. An idle or paused session is live too: on a lost node no
 * message or resume reaches it.
 */
const ACTIVE = ['registered', 'running', 'idle', 'needs_input', 'paused', 'pending', 'queued'];

/**
 * At a hub (spec/CLUSTER.md, "Nodes"), a run still going on a node the hub
 * has lost (`nodeState: "lost"`: no heartbeat) is not shown as plain
 * running: the reason to say instead, or null.
 */
export function staleOnLostNode(run) {
  if (run?.nodeState !== 'lost' || !ACTIVE.includes(run.status)) return null;
  const since = Number.isFinite(run.nodeLostSince) ? ` since ${localTime(run.nodeLostSince)}` : '';
  return `node ${run.node} lost: no heartbeat${since}`;
}

/**
 * A run still going whose supervisor is gone (`supervisor: "gone"` on GET
 * /runs' items and GET /runs/:id's run, judged when read: spec/LAYOUT.md,
 * "Who runs a run"), or stopped (`"stopped"`: SIGSTOP, a terminal's Ctrl-Z):
 * nothing runs it now, whatever its status says. What to
 * show instead of plain running: `{ text, why }` (the badge and its
 * reason), or null. A run runwire-serve records has its server for a
 * supervisor, as its reason says.
 */
export function supervisorGone(run) {
  const how = run?.supervisor;
  if ((how !== 'gone' && how !== 'stopped') || !ACTIVE.includes(run.status)) return null;
  // Who ran it is the server's judgement (the reason it wrote names it:
  // its owner record), never the slug, which a supervised run may share.
  const server = typeof run.reason === 'string' && run.reason.startsWith('its server ');
  const who = server ? 'server' : 'supervisor';
  const fallback = how === 'gone' ? `its ${who} is gone: nothing runs it` : `its ${who} is stopped: it takes no command until it continues`;
  const why = typeof run.reason === 'string' && run.reason ? run.reason : fallback;
  return { text: `${who} ${how}`, why };
}

/** The fields of a feed event that are the run's summary (a GET /runs item's). */
export const SUMMARY_KEYS = ['runId', 'slug', 'status', 'wave', 'counts', 'costUsd', 'tokens', 'repo', 'repoRoot', 'project', 'branch', 'worktree', 'activityMs', 'threadId', 'reason', 'node', 'supervisor'];

/**
 * The run summary a feed event carries: its SUMMARY_KEYS, and the change's
 * time as the run's latest activity when the event has none of its own.
 */
export function runOfEvent(ev) {
  const run = {};
  for (const k of SUMMARY_KEYS) if (k in ev) run[k] = ev[k];
  const at = typeof ev.ts === 'string' ? Date.parse(ev.ts) : NaN;
  if (!('activityMs' in run) && Number.isFinite(at)) run.activityMs = at;
  return run;
}

/**
 * A run as the Runs list keeps it after a feed event about it: the event's
 * summary fields over what it had. Whether its supervisor runs, as GET
 * /runs judged it when read, is stale once its journal has a record more:
 * dropped, and only the event's own says (`supervisor: "gone"` on the
 * summary of a run whose journal says its supervisor died, the
 * `supervisor-gone` record's event and those after it; none once a
 * supervisor's `started` follows). The event's `reason` replaces the one
 * the run came with.
 */
export function mergeRunEvent(prev, fields) {
  const run = { ...(prev ?? {}) };
  delete run.supervisor;
  return Object.assign(run, fields);
}

/** A feed `node` event (a hub's: a node lost, or up again) applied to that node's runs (a Map of {run}). */
export function applyNodeEvent(runs, ev) {
  if (ev?.type !== 'node' || typeof ev.node !== 'string') return false;
  for (const entry of runs.values()) {
    if (entry.run.node !== ev.node) continue;
    entry.run = { ...entry.run, nodeState: ev.state };
    if (ev.state === 'lost') entry.run.nodeLostSince = ev.since;
    else delete entry.run.nodeLostSince;
  }
  return true;
}
