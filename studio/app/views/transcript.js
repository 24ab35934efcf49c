// Renders a transcript (an AG-UI run or an events/v1 task: both reducers
// keep `items` in order, `byId`, and a tool-card model) into a container,
// creating a node per item once and patching only the items named dirty.

import { h, setText } from './dom.js';
import { ToolCardView } from './toolcard.js';

export class TranscriptView {
  constructor(container, state) {
    this.container = container;
    this.state = state;
    this.count = 0;
    this.nodes = new Map();
    this.cards = new Map();
  }

  /** @param {string[]} dirty item keys changed since the last sync */
  sync(dirty) {
    const s = this.state;
    for (; this.count < s.items.length; this.count++) {
      const it = s.items[this.count];
      this.container.appendChild(this.create(it));
    }
    for (const key of dirty) {
      const it = s.byId.get(key);
      if (it) this.update(it);
    }
  }

  create(it) {
    let node;
    if (it.kind === 'tool') {
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
