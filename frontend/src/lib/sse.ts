/** One Server-Sent Event (the fields Tether's gateway sends). */
export interface SseEvent {
  /** The `id:` of the event, or null when it had none. */
  id: string | null;
  /** The `event:` name; "message" when it had none. */
  event: string;
  data: string;
}

/**
 * A parser of the text/event-stream format (the HTML standard's rules,
 * what EventSource does), fed chunks as they arrive: a line ends at CR, LF
 * or CRLF (a CR at the end of a chunk may be followed by the LF of the
 * next); an event ends at a blank line; comment lines (":") are ignored;
 * `data:` lines are joined with LF. Tether reads the stream with fetch
 * instead of EventSource, to send Last-Event-ID itself on every resume and
 * to see the status of each answer (a 204 ends a finished stream).
 */
export class SseParser {
  private buf = '';
  private id: string | null = null;
  private event = '';
  private data: string[] = [];
  private sawCR = false;

  push(chunk: string): SseEvent[] {
    const out: SseEvent[] = [];
    let s = chunk;
    if (this.sawCR && s.startsWith('\n')) s = s.slice(1);
    this.sawCR = false;
    this.buf += s;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      if (m[0] === '\r' && m.index === this.buf.length - 1) {
        // Maybe the first half of a CRLF split between chunks.
        this.sawCR = true;
      }
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      const ev = this.line(line);
      if (ev) out.push(ev);
    }
    return out;
  }

  private line(line: string): SseEvent | null {
    if (line === '') {
      if (this.data.length === 0) {
        this.event = '';
        return null;
      }
      const ev: SseEvent = { id: this.id, event: this.event || 'message', data: this.data.join('\n') };
      this.event = '';
      this.data = [];
      return ev;
    }
    if (line.startsWith(':')) return null;
    const i = line.indexOf(':');
    const field = i === -1 ? line : line.slice(0, i);
    let value = i === -1 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.event = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.id = value;
        break;
    }
    return null;
  }
}
