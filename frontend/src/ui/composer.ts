import { draftSize, draftSizeAnnouncement, formatBytes, Limits, type DraftSizeLevel, type DraftView } from '../lib';
import { attr, h, text } from './dom';
import { icon } from './icons';

/** What the composer asks of the app. */
export interface ComposerActions {
  /** Sends the text (with the finished attachments); false keeps it in the box. */
  send(text: string): boolean;
  /** Files the user picked, dropped or pasted. */
  attach(files: File[]): void;
  /** Attaches the text as a file (a draft too long to send); false when it was refused. */
  attachText(text: string): boolean;
  pause(key: string): void;
  resume(key: string): void;
  remove(key: string): void;
}

interface Chip {
  el: HTMLElement;
  name: HTMLElement;
  detail: HTMLElement;
  bar: HTMLElement;
  fill: HTMLElement;
  toggle: HTMLButtonElement;
  remove: HTMLButtonElement;
}

/**
 * The message box: Enter sends, Shift+Enter adds a line. Files come in by
 * the attach button, by dropping them on the box or by pasting; each shows
 * as a chip with its progress bar and pause/resume and remove buttons, and
 * the message can be sent once every file is uploaded; files alone, without
 * text, are a message too. While the open
 * conversation has an answer in progress there is no way to send: the
 * button is disabled and says why, so a running task never gets a "send
 * again".
 *
 * Near the size limit (in UTF-8 bytes, PROTOCOL.md section 4) a counter
 * shows; past it Send is disabled, the counter says why and offers to turn
 * the draft into a text file attachment. A screen reader hears the counter
 * only when it crosses a threshold, never on every key.
 */
export class Composer {
  readonly el: HTMLFormElement;
  readonly input: HTMLTextAreaElement;
  private readonly button: HTMLButtonElement;
  private readonly hint: HTMLElement;
  private readonly box: HTMLElement;
  private readonly drafts: HTMLElement;
  private readonly file: HTMLInputElement;
  private readonly chips = new Map<string, Chip>();
  private busy = false;
  /** Files still uploading or paused, and files whose upload failed: either holds the message back. */
  private waiting = 0;
  private failed = 0;
  /** Failed files that trying again may fix. */
  private retryable = 0;
  /** Files uploaded and ready to go: enough to send without text. */
  private ready = 0;
  private depth = 0;
  private readonly size: HTMLElement;
  private readonly sizeText: HTMLElement;
  private readonly sizeReason: HTMLElement;
  private readonly sizeSaid: HTMLElement;
  private readonly asFile: HTMLButtonElement;
  private level: DraftSizeLevel = 'quiet';

  constructor(private readonly actions: ComposerActions) {
    this.input = h('textarea', { rows: '1', placeholder: 'Message Tether', 'aria-label': 'Message', 'data-testid': 'composer-input', enterkeyhint: 'send' });
    this.button = h('button', { type: 'submit', class: 'send', 'aria-label': 'Send', 'data-testid': 'send-button' }, h('span', { 'aria-hidden': 'true' }, '↑'));
    this.file = h('input', { type: 'file', multiple: true, hidden: true, tabindex: '-1', 'data-testid': 'file-input' });
    const attachButton = h('button', { type: 'button', class: 'attach', 'aria-label': 'Attach files', title: 'Attach files', 'data-testid': 'attach-button' }, icon('clip'));
    this.drafts = h('div', { class: 'drafts', 'data-testid': 'draft-list', hidden: true });
    this.hint = h('div', { class: 'hint', 'data-testid': 'composer-hint' });
    this.sizeText = h('span', { class: 'size-text', 'data-testid': 'draft-size-text' });
    this.sizeReason = h('span', { class: 'size-reason', 'data-testid': 'draft-size-reason' });
    const asFile = (this.asFile = h('button', { type: 'button', class: 'size-file', 'data-testid': 'send-as-file' }, icon('file'), 'Attach as a file'));
    this.size = h('div', { class: 'size', id: 'draft-size', 'data-testid': 'draft-size', hidden: true }, this.sizeText, this.sizeReason, asFile);
    this.sizeSaid = h('div', { class: 'sr-only', 'aria-live': 'polite', 'data-testid': 'draft-size-announcer' });
    this.box = h('div', { class: 'composer-box' }, this.drafts, h('div', { class: 'composer-row' }, attachButton, this.file, this.input, this.button), this.size);
    this.el = h('form', { class: 'composer', 'data-testid': 'composer' }, this.box, this.hint, this.sizeSaid);
    asFile.addEventListener('click', () => {
      if (!actions.attachText(this.input.value)) return;
      this.fill('');
    });

    const send = () => {
      const value = this.input.value;
      if (!this.canSend()) return;
      if (actions.send(value)) {
        this.input.value = '';
        this.grow();
        this.sync();
      }
    };
    this.el.addEventListener('submit', (ev) => {
      ev.preventDefault();
      send();
    });
    this.input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        send();
      }
    });
    this.input.addEventListener('input', () => {
      this.grow();
      this.sync();
    });
    this.input.addEventListener('paste', (ev) => {
      const files = [...(ev.clipboardData?.files ?? [])];
      if (files.length) {
        ev.preventDefault();
        actions.attach(files);
      }
    });
    attachButton.addEventListener('click', () => this.file.click());
    this.file.addEventListener('change', () => {
      const files = [...(this.file.files ?? [])];
      this.file.value = '';
      if (files.length) actions.attach(files);
    });
    this.drafts.addEventListener('click', (ev) => {
      const b = (ev.target as Element).closest<HTMLButtonElement>('button[data-action]');
      const key = b?.closest<HTMLElement>('[data-key]')?.dataset.key;
      if (!b || !key) return;
      if (b.dataset.action === 'remove') actions.remove(key);
      else if (b.dataset.action === 'pause') actions.pause(key);
      else actions.resume(key);
    });
    this.wireDrop();
    this.sync();
  }

  /** Puts text in the box (an example prompt) with the caret at its end, ready to send. */
  fill(value: string): void {
    this.input.value = value;
    this.grow();
    this.sync();
    this.input.focus();
    this.input.setSelectionRange(value.length, value.length);
  }

  setBusy(busy: boolean): void {
    this.busy = busy;
    this.sync();
  }

  /** Shows the open conversation's files. */
  setDrafts(list: readonly DraftView[]): void {
    const seen = new Set<string>();
    let prev: Element | null = null;
    for (const d of list) {
      seen.add(d.key);
      let c = this.chips.get(d.key);
      if (!c) {
        c = this.chip(d.key);
        this.chips.set(d.key, c);
      }
      this.patch(c, d);
      const want: Element | null = prev ? prev.nextElementSibling : this.drafts.firstElementChild;
      if (want !== c.el) this.drafts.insertBefore(c.el, want);
      prev = c.el;
    }
    for (const [key, c] of this.chips) {
      if (!seen.has(key)) {
        c.el.remove();
        this.chips.delete(key);
      }
    }
    this.drafts.hidden = list.length === 0;
    this.waiting = list.filter((d) => d.state === 'uploading' || d.state === 'paused').length;
    this.failed = list.filter((d) => d.state === 'failed').length;
    this.retryable = list.filter((d) => d.state === 'failed' && !d.final).length;
    this.ready = list.filter((d) => d.state === 'done').length;
    this.sync();
  }

  private chip(key: string): Chip {
    const name = h('span', { class: 'draft-name', 'data-testid': 'draft-name' });
    const detail = h('span', { class: 'draft-detail', 'data-testid': 'draft-detail' });
    const fill = h('div', { class: 'fill' });
    const bar = h('div', { class: 'draft-progress', role: 'progressbar', 'aria-valuemin': '0', 'aria-valuemax': '100', 'data-testid': 'draft-progress' }, fill);
    const toggle = h('button', { type: 'button', class: 'chip-button', 'data-action': 'pause', 'data-testid': 'draft-toggle' });
    const remove = h('button', { type: 'button', class: 'chip-button', 'data-action': 'remove', 'aria-label': 'Remove', title: 'Remove', 'data-testid': 'draft-remove' }, icon('close'));
    const el = h('div', { class: 'draft', 'data-testid': 'draft', 'data-key': key }, icon('file'), h('div', { class: 'draft-text' }, name, detail, bar), toggle, remove);
    return { el, name, detail, bar, fill, toggle, remove };
  }

  private patch(c: Chip, d: DraftView): void {
    attr(c.el, 'data-state', d.state);
    attr(c.el, 'data-id', d.id);
    attr(c.el, 'title', d.error ?? d.name);
    text(c.name, d.name);
    const pct = Math.floor(d.progress * 100);
    let detail: string;
    switch (d.state) {
      case 'done':
        detail = formatBytes(d.size);
        break;
      case 'paused':
        detail = `Paused · ${pct}%`;
        break;
      case 'failed':
        detail = d.error ?? 'Failed';
        break;
      default:
        detail = `${formatBytes(d.size)} · ${pct}%`;
    }
    text(c.detail, detail);
    c.bar.hidden = d.state === 'done' || d.state === 'failed';
    attr(c.bar, 'data-value', String(pct));
    attr(c.bar, 'aria-valuenow', String(pct));
    attr(c.bar, 'aria-label', `Upload of ${d.name}`);
    c.fill.style.width = `${pct}%`;
    c.toggle.hidden = d.state === 'done' || (d.state === 'failed' && !!d.final);
    const action = d.state === 'uploading' ? 'pause' : 'resume';
    if (c.toggle.dataset.action !== action || !c.toggle.firstChild) {
      c.toggle.dataset.action = action;
      const label = d.state === 'uploading' ? 'Pause' : d.state === 'failed' ? 'Try again' : 'Resume';
      attr(c.toggle, 'aria-label', label);
      attr(c.toggle, 'title', label);
      c.toggle.replaceChildren(icon(action === 'pause' ? 'pause' : d.state === 'failed' ? 'retry' : 'play'));
    }
  }

  /** Files dropped anywhere on the composer are attached; the box shows where they go. */
  private wireDrop(): void {
    const hasFiles = (ev: DragEvent) => [...(ev.dataTransfer?.types ?? [])].includes('Files');
    this.el.addEventListener('dragenter', (ev) => {
      if (!hasFiles(ev)) return;
      ev.preventDefault();
      this.depth++;
      this.box.dataset.dropping = 'true';
    });
    this.el.addEventListener('dragover', (ev) => {
      if (!hasFiles(ev)) return;
      ev.preventDefault();
      if (ev.dataTransfer) ev.dataTransfer.dropEffect = 'copy';
    });
    this.el.addEventListener('dragleave', () => {
      if (--this.depth <= 0) {
        this.depth = 0;
        delete this.box.dataset.dropping;
      }
    });
    this.el.addEventListener('drop', (ev) => {
      if (!hasFiles(ev)) return;
      ev.preventDefault();
      this.depth = 0;
      delete this.box.dataset.dropping;
      const files = [...(ev.dataTransfer?.files ?? [])];
      if (files.length) this.actions.attach(files);
    });
  }

  /** Nothing holds the message back, and there is something to send: text, or files. */
  private canSend(): boolean {
    return !this.busy && this.waiting + this.failed === 0 && (this.input.value.trim() !== '' || this.ready > 0);
  }

  private sync(): void {
    const over = this.syncSize();
    this.button.disabled = !this.canSend() || over;
    this.el.dataset.busy = String(this.busy);
    this.hint.textContent = this.busy
      ? 'An answer is in progress. Stop it (Escape, with the box empty) or wait for it to finish.'
      : this.failed > 0
        ? `A file could not be uploaded: remove it${this.retryable > 0 ? ' or try it again' : ''} to send.`
        : this.waiting > 0
          ? `Sending waits for ${this.waiting === 1 ? 'the upload' : `${this.waiting} uploads`} to finish.`
          : 'Enter to send, Shift+Enter for a new line. Drop files here to attach them.';
  }

  /** Shows the byte counter near the limit; true when the draft is over it. */
  private syncSize(): boolean {
    const s = draftSize(this.input.value, Limits.maxContentBytes);
    const said = draftSizeAnnouncement(this.level, s);
    if (said !== null) this.sizeSaid.textContent = said;
    this.level = s.level;
    this.size.hidden = s.level === 'quiet';
    this.size.dataset.level = s.level;
    if (this.sizeText.textContent !== s.label) this.sizeText.textContent = s.label;
    this.sizeReason.textContent = s.level === 'over' ? 'Too long to send as a message.' : '';
    this.asFile.hidden = s.level !== 'over';
    if (s.level === 'over') {
      this.button.setAttribute('aria-describedby', 'draft-size');
      this.button.title = 'Too long to send as a message';
    } else {
      this.button.removeAttribute('aria-describedby');
      this.button.removeAttribute('title');
    }
    return s.level === 'over';
  }

  private grow(): void {
    this.input.style.height = 'auto';
    this.input.style.height = `${Math.min(this.input.scrollHeight, 200)}px`;
  }
}
