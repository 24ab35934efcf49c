// Runs: every run from GET /runs, refreshed every 2 s while the view is open.
// Rows are keyed by runId and patched cell by cell, so focus and selection
// survive a refresh.

import { errorText, getJson } from '../api.js';
import { formatInt, formatUsd } from '../state/format.js';
import { clear, h, setText, tableRegion, timeText } from './dom.js';

const REFRESH_MS = 2000;

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
    this.tbody = h('tbody');
    const table = h(
      'table.runs',
      null,
      h('caption.visually-hidden', null, 'Registered runs'),
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
      h('p.lede', null, 'Every run the server knows of, live or finished. Kept current while this view is open.'),
      this.status,
      this.error,
      this.empty,
      this.table,
    );
    this.heading.id = 'runs-h';
    this.rows = new Map();
    this.timer = null;
    this.active = false;
  }

  mount() {
    this.active = true;
    this.refresh();
  }

  unmount() {
    this.active = false;
    clearTimeout(this.timer);
  }

  async refresh() {
    clearTimeout(this.timer);
    const answer = await getJson('/runs');
    if (!this.active) return;
    if (answer.status === 200 && answer.body && Array.isArray(answer.body.runs)) {
      this.error.hidden = true;
      this.render(answer.body.runs);
      setText(this.status, `${answer.body.runs.length} run${answer.body.runs.length === 1 ? '' : 's'} · updated ${timeText()}`);
    } else {
      this.error.hidden = false;
      setText(this.error, `Could not list the runs: ${errorText(answer)}`);
    }
    this.timer = setTimeout(() => this.refresh(), REFRESH_MS);
  }

  render(runs) {
    // Newest first by registration order is unknown; keep the server's order.
    const seen = new Set();
    runs.forEach((run, i) => {
      const id = String(run.runId ?? '');
      if (!id) return;
      seen.add(id);
      let row = this.rows.get(id);
      if (!row) {
        row = this.createRow(id);
        this.rows.set(id, row);
      }
      const at = this.tbody.children[i];
      if (at !== row.tr) this.tbody.insertBefore(row.tr, at || null);
      setText(row.link, run.slug || id);
      setText(row.sub, id);
      setText(row.status, run.status ?? '');
      row.status.className = `badge run-${String(run.status ?? 'unknown').replace(/[^a-z-]/g, '')}`;
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
