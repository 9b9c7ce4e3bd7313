import { describe, expect, it } from 'vitest';
import { utf8ByteLength, utf8Prefix } from '../src/lib/utf8';

const enc = new TextEncoder();

describe('utf8', () => {
  const samples = ['', 'ascii', 'héllo wörld 🎉', '日本語テキスト', '👩‍👩‍👧 family', 'a\u0301', '\u{10FFFF}x', 'lone \ud800 surrogate'];

  it('counts bytes as TextEncoder encodes them', () => {
    for (const s of samples) expect(utf8ByteLength(s)).toBe(enc.encode(s).length);
  });

  it('cuts at every character boundary and refuses every cut inside a character', () => {
    for (const s of samples) {
      const bytes = enc.encode(s);
      for (let k = 0; k <= bytes.length + 1; k++) {
        const got = utf8Prefix(s, k);
        if (k > bytes.length) {
          expect(got).toBeUndefined();
        } else if (k === bytes.length || (bytes[k]! & 0xc0) !== 0x80) {
          expect(got).toBeDefined();
          expect(enc.encode(got!)).toEqual(bytes.subarray(0, k));
          expect(s.startsWith(got!)).toBe(true);
        } else {
          expect(got).toBeUndefined();
        }
      }
    }
  });
});
