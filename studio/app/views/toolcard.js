// A tool card in the DOM: a heading whose button toggles the details
// (Enter and Space, as any button; aria-expanded says which), a compact
// argument preview and the status in the header; call id, formatted
// arguments and the correlated result inside. patch() is a no-op unless the
// card's rev moved, so settled cards are never re-rendered.

import {
  STATUS_LABELS,
  argPreview,
  formattedArgs,
  formattedResult,
  statusDetail,
  statusOf,
  truncationNote,
} from '../state/toolcards.js';
import { formatBytes } from '../state/format.js';
import { h, nextId, setAttr, setText } from './dom.js';

export class ToolCardView {
  constructor(model, card) {
    this.model = model;
    this.id = card.id;
    this.rev = -1;
    this.renders = 0;
    const bodyId = nextId('tool-body');
    this.name = h('span.tool-name');
    this.preview = h('span.tool-preview');
    this.badge = h('span.badge');
    this.button = h(
      'button.tool-toggle',
      { type: 'button', 'aria-expanded': 'false', 'aria-controls': bodyId },
      h('span.tool-chevron', { 'aria-hidden': 'true' }),
      this.name,
      this.preview,
      this.badge,
    );
    this.button.addEventListener('click', () => this.toggle());
    this.callId = h('code.tool-id');
    this.detail = h('dd.tool-detail');
    this.argsNote = h('p.note');
    this.args = h('pre.tool-args');
    this.resultNote = h('p.note.truncated');
    this.resultEmpty = h('p.note');
    this.result = h('pre.tool-result');
    this.body = h(
      'div.tool-body',
      { id: bodyId, hidden: true },
      h('dl.tool-meta', null, h('dt', null, 'Call id'), h('dd', null, this.callId), h('dt', null, 'Status'), this.detail),
      h('h4', null, 'Arguments'),
      this.argsNote,
      this.args,
      h('h4', null, 'Result'),
      this.resultNote,
      this.resultEmpty,
      this.result,
    );
    // The subagents this call spawned, always in view (each collapsible on its own).
    this.subagents = h('div.tool-subagents');
    this.el = h('article.tool', { 'data-tool-id': card.id }, h('h3.tool-h', null, this.button), this.subagents, this.body);
    this.patch(card);
  }

  toggle(open) {
    const next = open === undefined ? this.button.getAttribute('aria-expanded') !== 'true' : open;
    this.button.setAttribute('aria-expanded', String(next));
    this.body.hidden = !next;
  }

  /** Re-renders only when the card changed since the last render. */
  patch(card) {
    if (card.rev === this.rev) return false;
    this.rev = card.rev;
    this.renders += 1;
    this.el.dataset.renders = String(this.renders);
    const status = statusOf(this.model, card);
    setAttr(this.el, 'data-status', status);
    setText(this.name, card.name || 'tool');
    setText(this.preview, argPreview(card));
    setText(this.badge, STATUS_LABELS[status]);
    this.badge.className = `badge status-${status}`;
    setText(this.callId, card.id);
    const r = card.result;
    let detail = statusDetail(this.model, card);
    if (r && r.hasContent && typeof r.bytes === 'number') detail += ` Output: ${formatBytes(r.bytes)} (${r.bytes} bytes).`;
    setText(this.detail, detail);
    const fa = formattedArgs(card);
    setText(this.argsNote, fa.note || '');
    this.argsNote.hidden = !fa.note;
    setText(this.args, fa.text);
    this.args.hidden = fa.text === '';
    const fr = formattedResult(card);
    const trunc = truncationNote(card);
    setText(this.resultNote, trunc || '');
    this.resultNote.hidden = !trunc;
    if (fr) {
      setText(this.result, fr.text);
      this.result.hidden = false;
      this.resultEmpty.hidden = fr.text !== '';
      setText(this.resultEmpty, fr.text === '' ? 'The result is empty.' : '');
    } else {
      this.result.hidden = true;
      setText(this.result, '');
      this.resultEmpty.hidden = false;
      setText(
        this.resultEmpty,
        status === 'result-unavailable'
          ? 'No result was retained for this call.'
          : status === 'interrupted'
            ? 'No result: the run stopped first.'
            : 'No result yet.',
      );
    }
    return true;
  }
}
