// Small formatting helpers shared by the state modules and the views. No DOM.

/** `1536` → `1.5 KiB`; exact bytes below 1 KiB. */
export function formatBytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) return '';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const s = v >= 100 || Number.isInteger(v) ? v.toFixed(0) : v.toFixed(1);
  return `${s} ${units[u]}`;
}

/** Thousands separators, no locale surprises: `12345` → `12,345`. */
export function formatInt(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '';
  const neg = n < 0;
  const s = String(Math.round(Math.abs(n)));
  return (neg ? '-' : '') + s.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** A dollar amount with enough digits to tell small costs apart. */
export function formatUsd(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '';
  if (n === 0) return '$0';
  if (Math.abs(n) < 0.01) return `$${trimNumber(n, 6)}`;
  return `$${n.toFixed(n < 100 ? 4 : 2).replace(/0+$/, '').replace(/\.$/, '')}`;
}

/** Up to `digits` decimals, trailing zeros trimmed: 1.2727272 → "1.272727". */
export function trimNumber(n, digits = 6) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '';
  const s = n.toFixed(digits);
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
}

/** `0.5` → `50%`. */
export function formatPercent(ratio) {
  if (typeof ratio !== 'number' || !Number.isFinite(ratio)) return '';
  return `${trimNumber(ratio * 100, 1)}%`;
}

/** Milliseconds → `1m 02s`, `4.2 s`, `350 ms`. */
export function formatDuration(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${trimNumber(s, 1)} s`;
  const m = Math.floor(s / 60);
  const r = Math.round(s - m * 60);
  return `${m}m ${String(r).padStart(2, '0')}s`;
}

/** Cuts `s` to at most `max` characters, with an ellipsis. */
export function clip(s, max) {
  const str = String(s);
  if (str.length <= max) return str;
  return `${str.slice(0, Math.max(0, max - 1))}\u2026`;
}

/** One line: whitespace runs collapsed. */
export function oneLine(s) {
  return String(s).replace(/\s+/g, ' ').trim();
}
