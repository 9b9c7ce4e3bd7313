import { h } from './dom';
import { highlight, languageOf } from './highlight';
import { icon } from './icons';
import { renderDelay } from './schedule';

type Engine = typeof import('./markdown-engine');

let engine: Engine | null = null;
let loading: Promise<Engine> | null = null;

/** Loads the Markdown chunk (markdown-it and DOMPurify) once; later calls share it. */
export function loadMarkdown(): Promise<Engine> {
  loading ??= import('./markdown-engine').then((m) => (engine = m));
  loading.catch(() => (loading = null));
  return loading;
}

interface Block {
  html: string;
  el: HTMLElement;
}

/**
 * One answer's text, rendered as Markdown while it streams. Renders are
 * throttled to animation frames (with a timer behind it, as a hidden tab
 * gets no frames), and each parses the source once but touches the DOM only
 * for the top-level blocks whose HTML changed: a token appended to a
 * paragraph replaces that paragraph, never the blocks above it. A render
 * that took long pushes the next one back (renderDelay), so a very long
 * answer costs a bounded share of the main thread. Until the Markdown chunk
 * has loaded the text shows as it is.
 *
 * The element's data-source-length is the length of the source it shows.
 */
export class MarkdownBody {
  private source = '';
  private final = false;
  private shown: string | null = null;
  private shownFinal = false;
  private blocks: Block[] = [];
  private frame = 0;
  private timer: number | undefined;
  private cost = 0;

  constructor(readonly el: HTMLElement) {}

  /** The text to show; final once the answer will not change any more. */
  set(source: string, final: boolean): void {
    this.source = source;
    this.final = final;
    if (source === this.shown && final === this.shownFinal) return;
    if (this.shown === null) {
      // The first paint of a row is at once (a conversation switched to
      // shows its text in the same frame): Markdown if the chunk is here,
      // the text as it is until then.
      if (engine) this.render();
      else this.plain();
      return;
    }
    this.schedule();
  }

  /** The source as last rendered. */
  get text(): string {
    return this.shown ?? '';
  }

  private schedule(): void {
    if (this.frame || this.timer !== undefined) return;
    const run = () => {
      cancelAnimationFrame(this.frame);
      window.clearTimeout(this.timer);
      this.frame = 0;
      this.timer = undefined;
      this.render();
    };
    const delay = renderDelay(this.cost);
    if (delay === 0) this.frame = requestAnimationFrame(run);
    this.timer = window.setTimeout(run, Math.max(delay, 100));
  }

  private plain(): void {
    this.blocks = [];
    this.el.classList.add('plain');
    this.el.textContent = this.source;
    this.mark(this.source, this.final);
    void loadMarkdown().then(() => this.schedule(), () => undefined);
  }

  private render(): void {
    if (!engine) {
      if (this.source !== this.shown) this.plain();
      return;
    }
    const started = performance.now();
    const source = this.source;
    const final = this.final;
    if (this.el.classList.contains('plain')) {
      this.el.classList.remove('plain');
      this.el.textContent = '';
    }
    const htmls = source === '' ? [] : engine.renderBlocks(source);
    for (let i = 0; i < htmls.length; i++) {
      const html = htmls[i]!;
      const old = this.blocks[i];
      if (old?.html === html) continue;
      const el = h('div', { class: 'md-block' });
      el.append(engine.sanitize(html));
      decorate(el);
      if (old) this.el.replaceChild(el, old.el);
      else this.el.append(el);
      this.blocks[i] = { html, el };
    }
    for (const b of this.blocks.splice(htmls.length)) b.el.remove();
    // Code is highlighted once its block is complete: every block but the
    // last while the answer streams.
    const done = final ? this.blocks.length : this.blocks.length - 1;
    for (let i = 0; i < done; i++) highlightIn(this.blocks[i]!.el);
    this.mark(source, final);
    this.cost = performance.now() - started;
  }

  private mark(source: string, final: boolean): void {
    this.shown = source;
    this.shownFinal = final;
    this.el.dataset.sourceLength = String(source.length);
  }
}

/** Puts each code block in a frame with its language and a copy button. */
function decorate(block: HTMLElement): void {
  for (const pre of block.querySelectorAll('pre')) {
    const code = pre.querySelector('code');
    const lang = code ? /(?:^|\s)language-([\w+#.-]+)/.exec(code.className)?.[1] ?? '' : '';
    const copy = h('button', { type: 'button', class: 'copy-code', 'data-action': 'copy-code', 'data-testid': 'copy-code', 'aria-label': 'Copy code', title: 'Copy code' }, icon('copy'), h('span', { class: 'copy-label' }, 'Copy'));
    const head = h('div', { class: 'code-head' }, h('span', { class: 'code-lang' }, lang), copy);
    const frame = h('div', { class: 'code-block', 'data-testid': 'code-block', 'data-lang': lang || undefined });
    pre.replaceWith(frame);
    frame.append(head, pre);
  }
}

function highlightIn(block: HTMLElement): void {
  for (const code of block.querySelectorAll<HTMLElement>('pre > code[class*="language-"]')) {
    if (code.dataset.highlighted) continue;
    const name = /(?:^|\s)language-([\w+#.-]+)/.exec(code.className)?.[1] ?? '';
    const lang = languageOf(name);
    code.dataset.highlighted = lang ? 'pending' : 'none';
    if (lang) highlight(code, lang);
  }
}

/** Copies text to the clipboard; false when the browser would not. */
export async function copyText(value: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(value);
    return true;
  } catch {
    // Older browsers, or a page not in a secure context.
    const area = h('textarea', { class: 'sr-only', 'aria-hidden': 'true' });
    area.value = value;
    document.body.append(area);
    area.select();
    const ok = document.execCommand('copy');
    area.remove();
    return ok;
  }
}
