// Runs: every run, from one GET /runs when the view opens, then kept current
// by the change feed (GET /runs/events): no periodic requests while open.
// Runs that need a person (status needs_input) come first and look it;
// with the person's permission, a browser notification says when a run
// needs input or ends. Rows are keyed by runId and patched cell by cell,
// so focus and selection survive an update.

import { errorText, followFeed, getJson } from '../api.js';
import { formatInt, formatUsd } from '../state/format.js';
import { clear, h, setText, tableRegion, timeText } from './dom.js';

/** The summary fields a feed event carries (the rest is about the change itself). */
const SUMMARY_KEYS = ['runId', 'slug', 'status', 'wave', 'counts', 'costUsd', 'tokens', 'repo', 'repoRoot', 'project', 'branch', 'worktree'];

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
    this.tbody = h('tbody');
    const table = h(
      'table.runs',
      null,
      h('caption.visually-hidden', null, 'Registered runs; runs that need you first'),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          ['Run', 'Status', 'Wave', 'Tasks', 'Cost', 'Tokens', 'Repository', 'Branch'].map((c) =>
            h(['Wave', 'Cost', 'Tokens'].includes(c) ? 'th.num' : 'th', { scope: 'col' }, c),
          ),
        ),
      ),
      this.tbody,
    );
    this.table = tableRegion('Runs table', table);
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
  }

  mount() {
    this.active = true;
    this.notify.sync();
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
    const id = String(ev.runId ?? '');
    if (!id) return;
    if (ev.type === 'removed') {
      // `runs rm` / `runs prune` took it out of the registry: its row goes.
      this.runs.delete(id);
      this.lastChange = ev;
      return;
    }
    const run = {};
    for (const k of SUMMARY_KEYS) if (k in ev) run[k] = ev[k];
    const prev = this.runs.get(id);
    this.runs.set(id, { run: prev ? { ...prev.run, ...run } : run, rank: ++this.clock });
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
    const seen = new Set();
    runs.forEach((run, i) => {
      const id = String(run.runId ?? '');
      seen.add(id);
      let row = this.rows.get(id);
      if (!row) {
        row = this.createRow(id);
        this.rows.set(id, row);
      }
      const at = this.tbody.children[i];
      if (at !== row.tr) this.tbody.insertBefore(row.tr, at || null);
      const needs = needsYou(run);
      row.tr.classList.toggle('needs-you', needs);
      row.tr.dataset.status = String(run.status ?? '');
      setText(row.link, run.slug || id);
      setText(row.sub, id);
      setText(row.status, statusText(run.status));
      row.status.className = `badge run-${statusClass(run.status)}`;
      setText(row.wave, run.wave ?? '');
      setText(row.counts, countsText(run.counts));
      setText(row.cost, typeof run.costUsd === 'number' ? formatUsd(run.costUsd) : '');
      setText(row.tokens, tokensText(run.tokens));
      setText(row.repo, run.repo || run.project || run.repoRoot || '');
      setText(row.branch, run.branch || '');
    });
    for (const [id, row] of this.rows) {
      if (!seen.has(id)) {
        row.tr.remove();
        this.rows.delete(id);
      }
    }
    this.empty.hidden = runs.length > 0;
    this.table.hidden = runs.length === 0;
    this.renderStatus();
  }

  createRow(id) {
    const link = h('a', { href: `#/runs/${encodeURIComponent(id)}` });
    const sub = h('span.sub');
    const row = {
      link,
      sub,
      status: h('span.badge'),
      wave: h('td.num'),
      counts: h('td'),
      cost: h('td.num'),
      tokens: h('td.num'),
      repo: h('td'),
      branch: h('td'),
    };
    row.tr = h(
      'tr',
      { 'data-run-id': id },
      h('th', { scope: 'row' }, link, sub),
      h('td', null, row.status),
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
