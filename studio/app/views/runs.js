// Runs: every run, from one GET /runs when the view opens, then kept current
// by the change feed (GET /runs/events): no periodic requests while open.
// Runs that need a person (status needs_input) come first and look it;
// with the person's permission, a browser notification says when a run
// needs input or ends. Rows are keyed by runId and patched cell by cell,
// so focus and selection survive an update. The chat turns of one thread
// are one conversation row, opened to show its turns (state/runs.js). Each
// run's age is its latest activity, relative, with the local time as its
// tooltip; at phone width the table reflows to one card per run (style.css).

import { errorText, followFeed, getJson } from '../api.js';
import { formatInt, formatUsd } from '../state/format.js';
import { activityOf, ageText, applyNodeEvent, groupRuns, localTime, mergeRunEvent, runOfEvent, staleOnLostNode, supervisorGone, threadOf } from '../state/runs.js';
import { threadName } from '../state/threads.js';
import { clear, h, setText, tableRegion, timeText } from './dom.js';

/** The summary fields a feed event carries (the rest is about the change itself). */

const COLUMNS = ['Run', 'Status', 'Age', 'Wave', 'Tasks', 'Cost', 'Tokens', 'Repository', 'Branch'];
const NUMERIC = ['Wave', 'Cost', 'Tokens'];

/**
 * A cell that names its column, so the phone layout can label it. Roles are
 * explicit: the phone layout's grid rows would otherwise lose the table's
 * semantics in some browsers.
 */
function cell(label, cls = '', ...children) {
  return h(`td${cls}`, { 'data-label': label, role: 'cell' }, ...children);
}

export function needsYou(run) {
  return !!run && run.status === 'needs_input';
}

/** A status as a class name fragment: needs_input → needs-input. */
export function statusClass(status) {
  return String(status ?? 'unknown').replace(/_/g, '-').replace(/[^a-z-]/g, '');
}

export function statusText(status) {
  return status === 'needs_input' ? 'needs input' : String(status ?? '');
}

/**
 * What a run's status badge shows: its status, except a run still going on
 * a node the hub has lost (state/runs.js staleOnLostNode): `node lost`; or
 * whose supervisor is gone (supervisorGone): `supervisor gone`.
 */
export function shownStatus(run) {
  const lost = staleOnLostNode(run);
  if (lost) return { text: 'node lost', cls: 'node-lost', title: `${lost}; its last status was ${statusText(run.status)}` };
  const gone = supervisorGone(run);
  if (gone) return { text: gone.text, cls: 'supervisor-gone', title: `${gone.why}; its last status was ${statusText(run.status)}` };
  return { text: statusText(run?.status), cls: statusClass(run?.status), title: '' };
}

const NOTIFY_KEY = 'runwire.notify';

/** Whether the person asked for notifications and the browser allows them. */
export function notifying() {
  try {
    return typeof Notification !== 'undefined' && Notification.permission === 'granted' && localStorage.getItem(NOTIFY_KEY) === '1';
  } catch {
    return false;
  }
}

/** A notification for a feed event that needs the person: a run waiting for input, or ended. */
export function notifyEvent(ev) {
  if (!ev || (ev.type !== 'needs_input' && ev.type !== 'ended') || !notifying()) return null;
  const name = ev.slug || ev.runId;
  const title = ev.type === 'needs_input' ? `${name} needs you` : `${name} ${ev.status === 'done' ? 'finished' : 'failed'}`;
  const parts = ev.type === 'needs_input'
    ? [ev.task ? `task ${ev.task}` : '', ev.kind ? String(ev.kind).replace(/_/g, ' ') : '', ev.tool || '', ev.detail || '']
    : [ev.task ? `task ${ev.task} ${ev.state || ''}` : '', typeof ev.costUsd === 'number' ? formatUsd(ev.costUsd) : ''];
  try {
    const n = new Notification(title, { body: parts.filter(Boolean).join(' · '), tag: `runwire:${ev.runId}:${ev.type}` });
    n.onclick = () => {
      window.focus();
      location.hash = `#/runs/${encodeURIComponent(ev.runId)}`;
    };
    return n;
  } catch {
    return null;
  }
}

/** The switch that asks for notification permission; hidden where the browser has no Notification API. */
export function notifySwitch() {
  const box = h('input', { type: 'checkbox', class: 'notify-switch' });
  const note = h('span.sub');
  const label = h('label.check.notify', null, box, ' Notify me when a run needs me or ends ', note);
  const sync = () => {
    const supported = typeof Notification !== 'undefined';
    label.hidden = !supported;
    if (!supported) return;
    box.checked = notifying();
    setText(note, Notification.permission === 'denied' ? '(blocked in this browser’s settings)' : '');
  };
  box.addEventListener('change', async () => {
    try {
      if (box.checked) {
        const p = Notification.permission === 'granted' ? 'granted' : await Notification.requestPermission();
        localStorage.setItem(NOTIFY_KEY, p === 'granted' ? '1' : '0');
      } else {
        localStorage.setItem(NOTIFY_KEY, '0');
      }
    } catch {
      // Storage or the API refused: the switch shows what holds.
    }
    sync();
  });
  sync();
  return { el: label, sync };
}

export function countsText(counts) {
  if (!counts || typeof counts !== 'object') return '';
  return Object.entries(counts)
    .filter(([, n]) => typeof n === 'number' && n > 0)
    .map(([state, n]) => `${state} ${n}`)
    .join(' · ');
}

/**
 * A run's tasks by state. A chat turn's one task is the agent's session,
 * "leased" as long as it is held (an idle chat too): a task state that says
 * nothing the run's status does not, so it is left out there.
 */
export function tasksText(run) {
  if (!run || typeof run !== 'object') return '';
  return countsText(threadOf(run) === null ? run.counts : { ...run.counts, leased: 0 });
}

export function tokensText(tokens) {
  if (!tokens || typeof tokens !== 'object') return '';
  return `${formatInt(tokens.input ?? 0)} in / ${formatInt(tokens.output ?? 0)} out`;
}

export class RunsView {
  constructor() {
    this.heading = h('h1', { tabindex: '-1' }, 'Runs');
    this.status = h('p.view-status', { role: 'status' });
    this.empty = h('p.empty', { hidden: true }, 'No runs yet. Start one from Chat, or run runwire-supervise with a plan.');
    this.error = h('p.error', { hidden: true, role: 'alert' });
    this.notify = notifySwitch();
    this.tbody = h('tbody', { role: 'rowgroup' });
    const table = h(
      'table.runs',
      { role: 'table' },
      h('caption.visually-hidden', null, 'Registered runs; runs that need you first'),
      h(
        'thead',
        { role: 'rowgroup' },
        h(
          'tr',
          { role: 'row' },
          COLUMNS.map((c) => h(NUMERIC.includes(c) ? 'th.num' : 'th', { scope: 'col', role: 'columnheader' }, c)),
        ),
      ),
      this.tbody,
    );
    this.table = tableRegion('Runs table', table);
    this.table.classList.add('runs-wrap');
    // Until the listing answers: a word that it is coming, not an empty table
    // header (render() shows the table, or "No runs yet", once it has).
    this.table.hidden = true;
    setText(this.status, 'Loading the runs…');
    this.el = h(
      'section.view.view-runs',
      { 'aria-labelledby': 'runs-h' },
      this.heading,
      h('p.lede', null, 'Every run the server knows of, live or finished, kept current as it changes. Runs that need you come first.'),
      this.notify.el,
      this.status,
      this.error,
      this.empty,
      this.table,
    );
    this.heading.id = 'runs-h';
    this.rows = new Map();
    /** runId → {run, rank}: the latest summary and how recently it changed. */
    this.runs = new Map();
    this.clock = 0;
    this.feed = null;
    this.pending = null;
    this.active = false;
    this.feedState = 'connecting';
    /** Conversations the person opened (thread ids). */
    this.open = new Set();
    this.ageTimer = null;
  }

  mount() {
    this.active = true;
    this.notify.sync();
    // Ages move on with the clock: re-rendered (no request) twice a minute.
    if (!this.ageTimer) this.ageTimer = setInterval(() => this.renderAges(), 30000);
    if (this.feed) return;
    // The feed first, then the listing: every change after the feed's
    // position is applied on top of the listing, so none falls between.
    this.pending = [];
    this.feed = followFeed('', {
      onEvent: (ev) => this.onEvent(ev),
      onReady: (id, first) => {
        if (first) this.load();
      },
      onState: (s) => {
        this.feedState = s.state;
        this.el.dataset.feed = s.state;
        this.el.dataset.feedConnections = String(s.connections);
        if (s.state === 'failed') {
          this.error.hidden = false;
          setText(this.error, `The change feed failed: ${s.detail}`);
        }
        this.renderStatus();
      },
    });
  }

  unmount() {
    this.active = false;
    clearInterval(this.ageTimer);
    this.ageTimer = null;
    if (this.feed) this.feed.stop();
    this.feed = null;
    this.pending = null;
  }

  async load() {
    this.pending = this.pending || [];
    const answer = await getJson('/runs');
    if (!this.active) return;
    if (answer.status === 200 && answer.body && Array.isArray(answer.body.runs)) {
      this.error.hidden = true;
      const list = answer.body.runs;
      this.runs.clear();
      list.forEach((run, i) => {
        const id = String(run.runId ?? '');
        if (id) this.runs.set(id, { run, rank: list.length - i });
      });
      this.clock = list.length;
      const pending = this.pending || [];
      this.pending = null;
      for (const ev of pending) this.apply(ev);
      this.render();
    } else {
      this.pending = null;
      this.error.hidden = false;
      setText(this.error, `Could not list the runs: ${errorText(answer)}`);
    }
  }

  onEvent(ev) {
    notifyEvent(ev);
    if (this.pending) {
      this.pending.push(ev);
      return;
    }
    this.apply(ev);
    this.render();
  }

  /** One feed event: the run's summary as of that change, and it moves up as the most recent. */
  apply(ev) {
    if (applyNodeEvent(this.runs, ev)) {
      this.lastChange = ev;
      return;
    }
    const id = String(ev.runId ?? '');
    if (!id) return;
    if (ev.type === 'removed') {
      // `runs rm` / `runs prune` took it out of the registry: its row goes.
      this.runs.delete(id);
      this.lastChange = ev;
      return;
    }
    // The run's summary as of the change (the change is its latest activity).
    const prev = this.runs.get(id);
    this.runs.set(id, { run: mergeRunEvent(prev?.run, runOfEvent(ev)), rank: ++this.clock });
    this.lastChange = ev;
  }

  renderStatus() {
    const n = this.runs.size;
    const needs = [...this.runs.values()].filter((r) => needsYou(r.run)).length;
    const parts = [`${n} run${n === 1 ? '' : 's'}`];
    if (needs) parts.push(`${needs} need${needs === 1 ? 's' : ''} you`);
    parts.push(this.feedState === 'live' ? `live · updated ${timeText()}` : this.feedState);
    if (!this.pending) setText(this.status, parts.join(' · '));
  }

  render() {
    const runs = [...this.runs.values()]
      .sort((a, b) => Number(needsYou(b.run)) - Number(needsYou(a.run)) || b.rank - a.rank)
      .map((r) => r.run);
    const order = [];
    for (const g of groupRuns(runs)) {
      if (g.kind === 'run') {
        order.push(this.runRow(g.run, false));
        continue;
      }
      const opened = this.open.has(g.thread);
      order.push(this.threadRow(g, opened));
      for (const run of g.runs) {
        const row = this.runRow(run, true);
        row.tr.hidden = !opened;
        order.push(row);
      }
    }
    const seen = new Set();
    order.forEach((row, i) => {
      seen.add(row.key);
      const at = this.tbody.children[i];
      if (at !== row.tr) this.tbody.insertBefore(row.tr, at || null);
    });
    for (const [key, row] of this.rows) {
      if (!seen.has(key)) {
        row.tr.remove();
        this.rows.delete(key);
      }
    }
    this.empty.hidden = runs.length > 0;
    this.table.hidden = runs.length === 0;
    this.renderStatus();
  }

  /** The row of one run (`turn`: a turn shown under its conversation). */
  runRow(run, turn) {
    const id = String(run.runId ?? '');
    let row = this.rows.get(id);
    if (!row) {
      row = this.createRow(id);
      this.rows.set(id, row);
    }
    row.tr.classList.toggle('turn', turn);
    this.fill(row, run);
    // A chat turn by its thread's name where this browser knows it (state/threads.js).
    const name = threadName(threadOf(run));
    setText(row.link, name || run.slug || id);
    setText(row.sub, id);
    return row;
  }

  /** The row of a conversation: its turns' summary and a button that shows them. */
  threadRow(g, opened) {
    const key = `thread:${g.thread}`;
    let row = this.rows.get(key);
    if (!row) {
      row = this.createRow(key, g.thread);
      this.rows.set(key, row);
    }
    row.toggle.setAttribute('aria-expanded', String(opened));
    row.tr.dataset.turns = String(g.runs.length);
    const name = threadName(g.thread);
    setText(row.name, name || 'Conversation');
    setText(row.sub, `${g.thread} · ${g.runs.length} turns`);
    this.fill(row, g.summary);
    setText(row.counts, `${g.runs.length} turns`);
    return row;
  }

  fill(row, run) {
    row.tr.classList.toggle('needs-you', needsYou(run));
    row.tr.dataset.status = String(run.status ?? '');
    const shown = shownStatus(run);
    setText(row.status, shown.text);
    row.status.className = `badge run-${shown.cls}`;
    // Why a run failed, on the badge; the run's page says it in full.
    if (shown.title) row.status.title = shown.title;
    else if (typeof run.reason === 'string' && run.reason) row.status.title = run.reason;
    else row.status.removeAttribute('title');
    const why = run.status === 'failed' && typeof run.reason === 'string' ? run.reason : '';
    setText(row.reason, why);
    row.reason.hidden = !why;
    row.activityMs = activityOf(run);
    this.renderAge(row);
    setText(row.wave, run.wave ?? '');
    setText(row.counts, tasksText(run));
    setText(row.cost, typeof run.costUsd === 'number' ? formatUsd(run.costUsd) : '');
    setText(row.tokens, tokensText(run.tokens));
    setText(row.repo, run.repo || run.project || run.repoRoot || '');
    setText(row.branch, run.branch || '');
    // At a hub (spec/CLUSTER.md), the machine the run is on.
    // A lost node says so on its tag (the hub has had no heartbeat from it).
    const lost = run.nodeState === 'lost';
    setText(row.node, run.node ? (lost ? `${run.node} · lost` : run.node) : '');
    row.node.classList.toggle('lost', lost);
    row.node.title = lost ? 'node lost: no heartbeat' : 'node';
    row.node.hidden = !run.node;
  }

  renderAge(row, now = Date.now()) {
    const ms = row.activityMs;
    setText(row.age, ageText(ms, now));
    if (ms === null) {
      row.age.removeAttribute('title');
      row.age.removeAttribute('datetime');
    } else {
      const title = `last activity ${localTime(ms)}`;
      if (row.age.getAttribute('title') !== title) row.age.setAttribute('title', title);
      row.age.setAttribute('datetime', new Date(ms).toISOString());
    }
  }

  renderAges() {
    const now = Date.now();
    for (const row of this.rows.values()) this.renderAge(row, now);
  }

  /** A row: a run's (a link to it), or with `thread`, a conversation's (a button opening its turns). */
  createRow(key, thread = null) {
    const link = thread === null ? h('a', { href: `#/runs/${encodeURIComponent(key)}` }) : null;
    const toggle = thread === null
      ? null
      : h('button.thread-toggle', { type: 'button', 'aria-expanded': 'false', onclick: () => {
        if (this.open.has(thread)) this.open.delete(thread);
        else this.open.add(thread);
        this.render();
      } }, h('span.tool-chevron', { 'aria-hidden': 'true' }), h('span.conversation-name', null, 'Conversation'));
    const sub = h('span.sub');
    const row = {
      key,
      link,
      toggle,
      name: toggle ? toggle.querySelector('.conversation-name') : null,
      sub,
      activityMs: null,
      status: h('span.badge'),
      // Why a failed run failed, under its badge: a title alone is never
      // seen on a touch screen (the README promises the reason in the studio).
      reason: h('span.reason'),
      node: h('span.node-tag', { title: 'node' }),
      age: h('time'),
      wave: cell('Wave', '.num'),
      counts: cell('Tasks'),
      cost: cell('Cost', '.num'),
      tokens: cell('Tokens', '.num'),
      repo: cell('Repository'),
      branch: cell('Branch'),
    };
    row.tr = h(
      thread === null ? 'tr' : 'tr.thread',
      thread === null ? { 'data-run-id': key, role: 'row' } : { 'data-thread': thread, role: 'row' },
      h('th', { scope: 'row', role: 'rowheader' }, link || toggle, row.node, sub),
      cell('Status', '.status-cell', row.status, row.reason),
      cell('Age', '.age', row.age),
      row.wave,
      row.counts,
      row.cost,
      row.tokens,
      row.repo,
      row.branch,
    );
    return row;
  }

  clear() {
    clear(this.tbody);
    this.rows.clear();
  }
}
