import type { ServerMessage } from './protocol';

/** The objects of one server frame, and the lines that were not JSON objects. */
export interface ParsedFrame {
  messages: ServerMessage[];
  bad: string[];
}

/**
 * Splits a server frame into its messages. A gateway may coalesce a burst of
 * events into one frame, one compact JSON object per line (PROTOCOL.md section
 * 4); they must be handled in order. A bad line is reported, not fatal, so one
 * broken object never hides the events around it.
 */
export function parseFrame(data: string): ParsedFrame {
  const out: ParsedFrame = { messages: [], bad: [] };
  for (const line of data.split('\n')) {
    const trimmed = line.trim();
    if (trimmed === '') continue;
    try {
      const v: unknown = JSON.parse(trimmed);
      if (v !== null && typeof v === 'object' && !Array.isArray(v) && typeof (v as { type?: unknown }).type === 'string') {
        out.messages.push(v as ServerMessage);
      } else {
        out.bad.push(trimmed);
      }
    } catch {
      out.bad.push(trimmed);
    }
  }
  return out;
}
