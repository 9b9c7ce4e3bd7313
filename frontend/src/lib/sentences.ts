/**
 * What a screen reader hears of an answer while it streams: whole sentences,
 * not every token. Given the text and how much of it was announced already,
 * nextAnnouncement returns the complete sentences since then (a sentence
 * ends at . ! ? or … followed by a space or a line break, a period after a
 * digit excepted ("1. One"), or at a line
 * break that ends a paragraph, list item or heading) and where the next
 * announcement starts; when the answer is final, whatever is left. The
 * text is Markdown, so markers a listener does not need (#, *, _, `, >,
 * table pipes, list bullets) are dropped from what is said.
 */
export interface Announcement {
  /** What to say; '' when nothing is complete yet. */
  say: string;
  /** The length of text announced after this one. */
  upTo: number;
}

const sentenceEnd = /(?<!\d)[.!?…]["')\]*_]*(?=\s)|\n/g;

export function nextAnnouncement(text: string, announced: number, final: boolean): Announcement {
  const from = Math.min(Math.max(announced, 0), text.length);
  let end = from;
  if (final) {
    end = text.length;
  } else {
    sentenceEnd.lastIndex = from;
    for (let m = sentenceEnd.exec(text); m; m = sentenceEnd.exec(text)) end = m.index + m[0].length;
  }
  if (end <= from) return { say: '', upTo: from };
  return { say: speakable(text.slice(from, end)), upTo: end };
}

/** Markdown as it is read aloud: the words, without the markup. */
export function speakable(md: string): string {
  return md
    .replace(/```[^\n]*\n?/g, ' ')
    .replace(/^\s{0,3}(?:#{1,6}|>|[-*+]|\d+[.)])\s+/gm, '')
    .replace(/^\s*\|?[\s:|-]*-{3,}[\s:|-]*\|?\s*$/gm, ' ')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\|/g, ' ')
    .replace(/[*_`]+/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}
