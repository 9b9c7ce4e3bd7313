import { h } from './dom';

/** An example on the first screen: what the button says, and what it puts in the box. */
export interface Example {
  title: string;
  detail: string;
  prompt: string;
}

/**
 * The first screen's examples: the demo commands that show what Tether is
 * for (an answer that survives F5, Markdown, attachments, a failure) and
 * two plain requests. With a model engine the commands are ordinary text.
 */
export const examples: readonly Example[] = [
  { title: 'Stream a long answer', detail: 'Press F5 while it streams: it carries on.', prompt: '/stream 300 50' },
  { title: 'Show some Markdown', detail: 'Headings, lists, a table and code, as they stream.', prompt: '/markdown' },
  { title: 'Describe my files', detail: 'Attach a file first: the answer gives its size and SHA-256.', prompt: '/attachments' },
  { title: 'Fail on purpose', detail: 'The answer stops with an error you can try again.', prompt: '/fail 5 100' },
  { title: 'Summarise a long text', detail: 'Paste it after this; past 32 KB it can go as a file.', prompt: 'Summarise this text:\n\n' },
  { title: 'Ask a question', detail: 'What makes an answer survive a page reload?', prompt: 'What makes an answer survive a page reload?' },
];

/**
 * The example buttons. A press puts the prompt in the message box and the
 * focus there; it does not send, so the prompt can be changed first (and
 * /attachments waits for a file) and nothing is sent by surprise.
 */
export function exampleButtons(fill: (prompt: string) => void): HTMLElement {
  const list = h('div', { class: 'examples', role: 'group', 'aria-label': 'Examples', 'data-testid': 'examples' });
  for (const e of examples) {
    const b = h('button', { type: 'button', class: 'example', 'data-testid': 'example', 'data-prompt': e.prompt }, h('span', { class: 'example-title' }, e.title), h('span', { class: 'example-detail' }, e.detail));
    b.addEventListener('click', () => fill(e.prompt));
    list.append(b);
  }
  return list;
}
