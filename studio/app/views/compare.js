// Compare: GET /api/evidence through the compare model. Shows status,
// reason, the per-variant rows, the evidence line and the trials, or the
// error with its findings. Never blank: every answer maps to something.

import { getJson } from '../api.js';
import { compareModel } from '../state/compare.js';
import { clear, h, setText, tableRegion, timeText } from './dom.js';

const NUMERIC = new Set(['passedCompleted', 'passRate', 'meanScore', 'infraErrors', 'totalCost', 'costPerCompleted', 'credits', 'trial', 'score', 'cost', 'turns', 'duration', 'exit']);

export class CompareView {
  constructor() {
    this.heading = h('h1', { tabindex: '-1', id: 'compare-h' }, 'Compare');
    this.body = h('div.compare-body', { 'aria-live': 'polite' });
    this.updated = h('span.sub');
    this.el = h(
      'section.view.view-compare',
      { 'aria-labelledby': 'compare-h' },
      this.heading,
      h(
        'p.lede',
        null,
        'The compare verdict this server was pointed at (--evidence), checked by verdict-check on every load. ',
        h('button', { type: 'button', onclick: () => this.refresh() }, 'Reload'),
        ' ',
        this.updated,
      ),
      this.body,
    );
  }

  mount() {
    this.refresh();
  }

  unmount() {}

  async refresh() {
    if (!this.body.firstChild) this.body.appendChild(h('p.loading', null, 'Loading the evidence…'));
    const a = await getJson('/api/evidence');
    const m = compareModel({ httpStatus: a.status, body: a.body, networkError: a.error });
    this.render(m);
    setText(this.updated, `loaded ${timeText()}`);
  }

  render(m) {
    clear(this.body);
    this.body.dataset.kind = m.kind;
    if (m.kind !== 'ok') {
      const box = h('div.problem', { role: m.kind === 'absent' ? 'note' : 'alert' }, h('h2', null, m.title), h('p.problem-message', null, m.message));
      if (m.about) box.appendChild(h('p', null, m.about));
      if (m.hint) box.appendChild(h('p', null, m.hint));
      if (m.kind === 'invalid' && m.findings.length) {
        box.appendChild(
          tableRegion(
            'Findings',
            h(
              'table.findings',
              null,
              h('caption', null, `${m.total} finding${m.total === 1 ? '' : 's'}`),
              h('thead', null, h('tr', null, ['File', 'Path', 'Finding'].map((c) => h('th', { scope: 'col' }, c)))),
              // Labelled cells: at phone width each finding is a card of them (style.css).
              h('tbody', null, m.findings.map((f) => h('tr', null, h('td', { 'data-label': 'File' }, f.source), h('td', { 'data-label': 'Path' }, h('code', null, f.path)), h('td', { 'data-label': 'Finding' }, f.message)))),
            ),
          ),
        );
        if (m.more) box.appendChild(h('p.note', null, `${m.more} more finding${m.more === 1 ? '' : 's'} not listed.`));
      }
      this.body.appendChild(box);
      return;
    }
    const variantCols = [
      ['variant', 'Variant'],
      ['passedCompleted', 'Passed / completed'],
      ['passRate', 'Pass rate'],
      ['meanScore', 'Mean score'],
      ['infraErrors', 'Infra errors'],
      ['totalCost', 'Total cost USD'],
      ['costPerCompleted', 'Cost / completed USD'],
      ['credits', 'Credits'],
    ];
    const trialCols = [
      ['variant', 'Variant'],
      ['trial', 'Trial'],
      ['harness', 'Harness'],
      ['classification', 'Outcome'],
      ['score', 'Score'],
      ['passed', 'Passed'],
      ['cost', 'Cost'],
      ['turns', 'Turns'],
      ['duration', 'Duration'],
      ['exit', 'Exit'],
      ['revision', 'Revision'],
      ['error', 'Executor error'],
    ];
    const table = (label, cols, rows, cls) =>
      tableRegion(
        label,
        h(
          `table.${cls}`,
          null,
          h('caption.visually-hidden', null, label),
          h('thead', null, h('tr', null, cols.map(([k, t], i) => h(i > 0 && NUMERIC.has(k) ? 'th.num' : 'th', { scope: 'col' }, t)))),
          h(
            'tbody',
            null,
            rows.map((r) =>
              h(
                'tr',
                { 'data-variant': r.variant },
                cols.map(([k], i) => (i === 0 ? h('th', { scope: 'row' }, r[k]) : h(NUMERIC.has(k) ? 'td.num' : 'td', null, r[k]))),
              ),
            ),
          ),
        ),
      );
    this.body.append(
      h(
        'div.verdict',
        null,
        h('p.verdict-status', null, h(`span.badge.tone-${m.tone}`, { 'data-status': m.status }, m.title)),
        h('p.verdict-reason', null, m.reason),
        m.source ? h('p.sub', null, 'From ', h('code', null, m.source)) : null,
      ),
      h('h2', null, 'Variants'),
      table('Per-variant figures', variantCols, m.variants, 'variants'),
      h('h2', null, 'Evidence'),
      h(
        'dl.facts.evidence',
        null,
        h('dt', null, 'Evidence'),
        h('dd.evidence-line', null, m.evidenceLine || '—'),
        h('dt', null, 'Cost'),
        h('dd.cost-line', null, m.costLine || '—'),
        m.policy.length ? [h('dt', null, 'Policy'), h('dd', null, m.policy.map((p) => `${p.key} ${p.value}`).join(' · '))] : null,
      ),
      h('h2', null, `Trials (${m.trials.length})`),
      m.trials.length ? table('Trials', trialCols, m.trials, 'trials') : h('p.empty', null, 'The verdict has no trial rows.'),
    );
  }
}
