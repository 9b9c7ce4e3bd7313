/** A title is at most this many characters (code points), as the server makes it. */
export const titleRunes = 48;

const link = /!?\[([^\]]*)\]\([^)]*\)/g;
const lead = /^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+)+/;
const markup = /[*_`~]+/g;
const fence = /^```+\s*\S*$/;

/**
 * The title a conversation gets from its first message, exactly as the
 * server makes it (internal/task/title.go; both are held to
 * internal/task/testdata/titles.json): the first paragraph,
 * Markdown markup dropped, whitespace collapsed, cut at a word boundary
 * after at most 48 characters with "…". Directives such as "/stream 300
 * 30" stay as typed. The client shows it until the server's list arrives.
 * A message whose text gives no title (files alone) is called after its
 * first file, the name as it is (whitespace collapsed, cut alike).
 */
export function titleFrom(content: string, firstFile = ''): string {
  const lines: string[] = [];
  for (const raw of content.split('\n')) {
    const l = raw.trim();
    if (l === '' || fence.test(l)) {
      if (lines.length) break;
      continue;
    }
    lines.push(l.replace(lead, ''));
  }
  let line = lines.join(' ').replace(link, '$1').replace(markup, '');
  line = line.split(/\s+/).filter(Boolean).join(' ');
  if (line === '') line = firstFile.split(/\s+/).filter(Boolean).join(' ');
  if (line === '') return 'New conversation';
  const runes = [...line];
  if (runes.length <= titleRunes) return line;
  let cut = runes.slice(0, titleRunes - 1).join('');
  const i = cut.lastIndexOf(' ');
  if (i >= cut.length / 2) cut = cut.slice(0, i);
  return cut.replace(/[ ,;:.\-–—]+$/u, '') + '…';
}
