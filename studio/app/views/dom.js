// A tiny DOM helper: h('tag.class', {attrs}, ...children). Never touches
// innerHTML and never sets inline style attributes (the CSP forbids them).

export function h(spec, attrs, ...children) {
  const [tag, ...classes] = spec.split('.');
  const el = document.createElement(tag || 'div');
  if (classes.length) el.className = classes.join(' ');
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      else if (k === 'class') el.className = v;
      else if (v === true) el.setAttribute(k, '');
      else el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Sets textContent only when it differs (no needless mutation). */
export function setText(el, text) {
  const t = String(text ?? '');
  if (el.textContent !== t) el.textContent = t;
}

export function setAttr(el, name, value) {
  const v = value === null || value === undefined ? null : String(value);
  if (v === null) {
    if (el.hasAttribute(name)) el.removeAttribute(name);
  } else if (el.getAttribute(name) !== v) {
    el.setAttribute(name, v);
  }
}

/** A table inside a labelled, keyboard-scrollable region (wide tables scroll there, not the page). */
export function tableRegion(label, table) {
  return h('div.table-wrap', { role: 'region', 'aria-label': label, tabindex: '0' }, table);
}

let uid = 0;
export function nextId(prefix) {
  uid += 1;
  return `${prefix}-${uid}`;
}

/** Coalesces calls into one per animation frame (or a short timer when hidden). */
export function scheduler(fn) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    const run = () => {
      pending = false;
      fn();
    };
    if (document.hidden) setTimeout(run, 50);
    else requestAnimationFrame(run);
  };
}

export function timeText(d = new Date()) {
  return d.toTimeString().slice(0, 8);
}
