// Incremental Server-Sent Events parser (the WHATWG "event stream" rules),
// with no IO: feed it decoded text in chunks of any size, get whole events.
// Used instead of EventSource because the page must send an Authorization
// header and its own Last-Event-ID on reconnect.

/** @typedef {{event: string, data: string, id: string, hasId: boolean}} SseEvent */

export class SseParser {
  constructor() {
    this.buf = '';
    this.data = [];
    this.event = '';
    this.idSeen = false;
    this.pendingId = '';
    /** The last event id the stream set (persists across events, as in the spec). */
    this.lastEventId = '';
    /** Milliseconds from a `retry:` field, or null. */
    this.retry = null;
    this.sawCr = false;
  }

  /**
   * @param {string} chunk
   * @returns {SseEvent[]}
   */
  feed(chunk) {
    const out = [];
    let text = chunk;
    // A CR at the end of the previous chunk may be the first half of CRLF.
    if (this.sawCr && text.startsWith('\n')) text = text.slice(1);
    this.sawCr = false;
    this.buf += text;
    let start = 0;
    for (let i = 0; i < this.buf.length; i++) {
      const c = this.buf.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this.buf.slice(start, i);
      if (c === 13) {
        if (i + 1 < this.buf.length) {
          if (this.buf.charCodeAt(i + 1) === 10) i++;
        } else {
          this.sawCr = true;
        }
      }
      start = i + 1;
      this.line(line, out);
    }
    this.buf = this.buf.slice(start);
    return out;
  }

  /** End of input: a partial event without its blank line is discarded (as the spec says). */
  end() {
    this.buf = '';
    this.data = [];
    this.event = '';
    this.idSeen = false;
    return [];
  }

  line(line, out) {
    if (line === '') {
      this.dispatch(out);
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    let field = line;
    let value = '';
    if (colon >= 0) {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
    }
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.event = value;
        break;
      case 'id':
        if (!value.includes('\u0000')) {
          this.lastEventId = value;
          this.idSeen = true;
        }
        break;
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.retry = Number(value);
        break;
      default:
        break;
    }
  }

  dispatch(out) {
    const hasId = this.idSeen;
    this.idSeen = false;
    if (this.data.length === 0) {
      this.event = '';
      return;
    }
    out.push({ event: this.event || 'message', data: this.data.join('\n'), id: this.lastEventId, hasId });
    this.data = [];
    this.event = '';
  }
}

/** Parses a whole SSE body at once (for tests and replays). */
export function parseSse(text) {
  const p = new SseParser();
  return p.feed(text.endsWith('\n') ? text : `${text}\n`);
}
