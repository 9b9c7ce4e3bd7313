/**
 * UTF-8 lengths of JavaScript strings. The wire counts output in UTF-8 bytes
 * (a status event's `keep`, PROTOCOL.md section 3) while a JS string counts
 * UTF-16 code units, so "é" is 1 unit and 2 bytes, "🎉" 2 units and 4 bytes.
 * Counted by hand over code points rather than with TextEncoder, so nothing is
 * copied and a cut can be checked against character boundaries. A lone
 * surrogate counts 3 bytes, as TextEncoder encodes it (U+FFFD); the server
 * never sends one.
 */

/** Bytes of one code point in UTF-8. */
function codePointBytes(cp: number): number {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

/** The length of s in UTF-8 bytes. */
export function utf8ByteLength(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; ) {
    const cp = s.codePointAt(i)!;
    n += codePointBytes(cp);
    i += cp > 0xffff ? 2 : 1;
  }
  return n;
}

/**
 * The first `bytes` bytes of s's UTF-8 encoding, as a string; undefined when s
 * is shorter than that or the cut would fall inside a character. `bytes` must
 * be a non-negative integer.
 */
export function utf8Prefix(s: string, bytes: number): string | undefined {
  let n = 0;
  let i = 0;
  while (n < bytes) {
    if (i >= s.length) return undefined;
    const cp = s.codePointAt(i)!;
    n += codePointBytes(cp);
    i += cp > 0xffff ? 2 : 1;
  }
  return n === bytes ? s.slice(0, i) : undefined;
}
