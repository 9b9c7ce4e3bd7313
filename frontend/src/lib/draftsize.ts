import { utf8ByteLength } from './utf8';

/**
 * How close a draft is to the size a message may have (PROTOCOL.md section
 * 4: 1..32768 bytes of UTF-8). Counted in bytes, not characters: a CJK
 * character is 3 bytes, so about 11,000 of them reach the limit that 32,768
 * ASCII letters do.
 *
 * - `quiet`: well under the limit; the composer shows nothing.
 * - `near`: past `warnShare` of it; the composer shows "N / 32,768 bytes".
 * - `over`: past it; the message cannot be sent as text, only as a file.
 */
export type DraftSizeLevel = 'quiet' | 'near' | 'over';

export interface DraftSize {
  level: DraftSizeLevel;
  bytes: number;
  limit: number;
  /** "26,300 / 32,768 bytes": what the counter shows (empty while quiet). */
  label: string;
}

/** The share of the limit from which the counter shows. */
export const warnShare = 0.8;

const numbers = new Intl.NumberFormat('en');

/** The counter's level for a byte count. */
export function draftSizeLevel(bytes: number, limit: number): DraftSizeLevel {
  if (bytes > limit) return 'over';
  return bytes >= Math.floor(limit * warnShare) ? 'near' : 'quiet';
}

/** The counter for a draft's text. */
export function draftSize(text: string, limit: number): DraftSize {
  const bytes = utf8ByteLength(text);
  const level = draftSizeLevel(bytes, limit);
  return { level, bytes, limit, label: level === 'quiet' ? '' : `${numbers.format(bytes)} / ${numbers.format(limit)} bytes` };
}

/**
 * What a screen reader hears when the level changes, and only then: a live
 * region that spoke on every key would drown the typing. Null when the level
 * stayed the same, or went back to quiet.
 */
export function draftSizeAnnouncement(prev: DraftSizeLevel, next: DraftSize): string | null {
  if (prev === next.level) return null;
  if (prev === 'over') return 'The message fits again.';
  if (next.level === 'near') return `Near the message limit: ${next.label}.`;
  if (next.level === 'over') return `Too long to send as a message: ${numbers.format(next.bytes - next.limit)} bytes over the limit. It can be attached as a file.`;
  return null;
}
