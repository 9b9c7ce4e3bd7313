// The demo engine's answers, as the scenarios expect them.
import fs from 'node:fs';
import path from 'node:path';
import { root } from './paths.mjs';

/** The exact output of the demo engine's `/stream n ms`. */
export function streamText(n) {
  let s = '';
  for (let i = 1; i <= n; i++) s += `t${i} `;
  return s;
}

/** The demo engine's /markdown answer, as docs/protocol.md holds it (a Go test keeps it equal to the engine's). */
export function demoMarkdown() {
  const doc = fs.readFileSync(path.join(root, 'docs', 'protocol.md'), 'utf8');
  const open = '<!-- demo /markdown: made from internal/engine/demo_markdown.go -->\n````markdown\n';
  const i = doc.indexOf(open);
  if (i < 0) throw new Error('docs/protocol.md holds no /markdown answer');
  const rest = doc.slice(i + open.length);
  return rest.slice(0, rest.indexOf('\n````\n'));
}
