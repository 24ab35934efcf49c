// Renders a transcript (an AG-UI run or an events/v1 task: both reducers
// keep `items` in order, `byId`, and a tool-card model) into a container,
// creating a node per item once and patching only the items named dirty.

import { SUBAGENT_LABELS } from '../state/agui.js';
import { h, setAttr, setText } from './dom.js';
import { ToolCardView } from './toolcard.js';

export class TranscriptView {
  /** @param list the items to render: the transcript's, or one subagent's */
  constructor(container, state, list = state.items) {
    this.container = container;
    this.state = state;
    this.list = list;
    this.count = 0;
    this.nodes = new Map();
    this.cards = new Map();
    /** Subagent groups rendered here, each with its own view of its items. */
    this.groups = [];
  }

  /** @param {string[]} dirty item keys changed since the last sync */
  sync(dirty) {
    const s = this.state;
    for (; this.count < this.list.length; this.count++) {
      const it = this.list[this.count];
      this.container.appendChild(this.create(it));
    }
    for (const key of dirty) {
      const it = s.byId.get(key);
      if (it && this.nodes.has(key)) this.update(it);
    }
    for (const g of this.groups) g.view.sync(dirty);
  }

  /**
   * A subagent: a collapsible group (open while it works) holding what it
   * produced, put inside the card of the call that spawned it when this
   * view shows that card, else where it began.
   */
  createSubagent(it) {
    const sa = this.state.subagents.get(it.id);
    const label = h('span.subagent-name');
    const desc = h('span.subagent-desc');
    const badge = h('span.badge');
    const body = h('div.subagent-body');
    const node = h(
      'details.subagent',
      { 'data-subagent-id': it.id, open: true },
      h('summary', null, label, desc, badge),
      body,
    );
    node._parts = { label, desc, badge };
    const view = new TranscriptView(body, this.state, sa ? sa.items : []);
    this.groups.push({ id: it.id, view });
    this.nodes.set(it.key, node);
    this.patchSubagent(it, node);
    view.sync([]);
    const card = sa && sa.parentToolCallId ? this.cards.get(sa.parentToolCallId) : null;
    if (card) {
      card.subagents.appendChild(node);
      // Its place in the list stays empty: the group lives in the card.
      return h('span.subagent-anchor', { hidden: true, 'data-subagent-id': it.id });
    }
    return node;
  }

  patchSubagent(it, node) {
    const sa = this.state.subagents.get(it.id);
    if (!sa) return;
    const { label, desc, badge } = node._parts;
    setText(label, sa.name);
    setText(desc, sa.description || '');
    desc.hidden = !sa.description;
    setText(badge, SUBAGENT_LABELS[sa.status] || sa.status);
    badge.className = `badge subagent-${sa.status}`;
    setAttr(node, 'data-status', sa.status);
    setAttr(node, 'title', sa.message);
  }

  create(it) {
    let node;
    if (it.kind === 'subagent') {
      return this.createSubagent(it);
    } else if (it.kind === 'tool') {
      const card = this.state.tools.byId.get(it.id);
      const view = new ToolCardView(this.state.tools, card);
      this.cards.set(it.id, view);
      node = view.el;
    } else if (it.kind === 'reasoning') {
      const text = h('div.reasoning-text');
      node = h('details.reasoning', { 'data-message-id': it.id }, h('summary', null, 'Reasoning'), text);
      node._text = text;
      setText(text, it.text);
    } else {
      node = h('div.assistant-text', { 'data-message-id': it.id });
      setText(node, it.text);
    }
    this.nodes.set(it.key, node);
    return node;
  }

  update(it) {
    if (it.kind === 'subagent') {
      this.patchSubagent(it, this.nodes.get(it.key));
      return;
    }
    if (it.kind === 'tool') {
      const view = this.cards.get(it.id);
      if (view) view.patch(this.state.tools.byId.get(it.id));
      return;
    }
    const node = this.nodes.get(it.key);
    if (!node) return;
    setText(node._text || node, it.text);
    node.classList.toggle('streaming', !it.done);
  }
}
