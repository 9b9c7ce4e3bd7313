import { describeError, describeTaskError, formatBytes, messageKey, messageTime, nextAnnouncement, Paths, type Attachment, type ConversationView, type ViewMessage } from '../lib';
import { attr, disable, h, hide, text } from './dom';
import { icon } from './icons';
import { copyText, MarkdownBody } from './markdown';

interface Row {
  el: HTMLElement;
  /** The message the row shows, and whether the connection was live then: the same again needs no patch. */
  shown: ViewMessage | null;
  shownLive: boolean;
  files: HTMLElement;
  /** The attachments the chips show, to redraw them only when they change. */
  filesKey: string;
  body: HTMLElement;
  /** An answer's Markdown (user messages are shown as typed). */
  md: MarkdownBody | null;
  copy: HTMLButtonElement;
  meta: HTMLElement;
  time: HTMLTimeElement;
  resumed: HTMLElement;
  bar: HTMLElement;
  fill: HTMLElement;
  error: HTMLElement;
  errorText: HTMLElement;
  errorMore: HTMLElement;
  errorDetail: HTMLElement;
  cancel: HTMLButtonElement;
  retry: HTMLButtonElement;
  regenerate: HTMLButtonElement;
  edit: HTMLButtonElement;
  versions: HTMLElement;
  versionLabel: HTMLElement;
  versionPrev: HTMLButtonElement;
  versionNext: HTMLButtonElement;
  /** The text being edited, while the message is being edited. */
  editor: HTMLElement | null;
}

export interface MessageActions {
  cancel(taskId: string): void;
  retry(taskId: string): void;
  older(): void;
  /** A new version of a finished answer. */
  regenerate(taskId: string): void;
  /** The message, edited, sent as a new version of its turn with the files the user kept. */
  edit(taskId: string, content: string, attachments: Attachment[]): void;
  /** Shows another version of a turn. */
  show(taskId: string): void;
}

/**
 * The message list: keyed rows patched in place. The view hands on a
 * message that did not change as the same object (keepUnchanged), and a
 * row whose message is the same is not touched at all: while an answer
 * streams only its row is patched, and the others keep their DOM as it is. It keeps the view pinned to the
 * bottom while the user is there, keeps the position steady when older pages
 * are put in front, and asks for older pages when scrolled to the top.
 */
export class MessageList {
  readonly el: HTMLElement;
  private readonly inner: HTMLElement;
  private readonly top: HTMLElement;
  /** What an empty conversation shows (the app adds its examples). */
  readonly empty: HTMLElement;
  private readonly rows = new Map<string, Row>();
  private conversation = '';
  /** The list and the button that takes the reader back to the newest message. */
  readonly frame: HTMLElement;
  private readonly down: HTMLButtonElement;
  /** A live region that says answers in whole sentences (the list itself is not live). */
  private readonly announcer: HTMLElement;
  /** How much of each answer streamed here was announced. */
  private readonly announced = new Map<string, number>();
  private live = true;
  private last: ConversationView | null = null;

  constructor(private readonly handlers: MessageActions) {
    this.top = h('div', { class: 'history-top', 'data-testid': 'history-top' });
    this.empty = h('div', { class: 'empty', hidden: true }, h('h2', {}, 'How can I help?'), h('p', {}, 'Ask anything. Answers keep going if you refresh, switch tabs or lose the network.'));
    this.inner = h('div', { class: 'messages-inner' });
    this.el = h('div', { class: 'messages', 'data-testid': 'message-list', role: 'region', 'aria-label': 'Messages', tabindex: '0' }, this.top, this.empty, this.inner);
    this.down = h('button', { type: 'button', class: 'scroll-bottom', 'data-testid': 'scroll-bottom', 'aria-label': 'Scroll to the newest message', title: 'Scroll to the newest message', hidden: true }, icon('down'));
    this.down.addEventListener('click', () => this.toBottom());
    this.announcer = h('div', { class: 'sr-only', 'aria-live': 'polite', 'aria-atomic': 'false', 'data-testid': 'announcer' });
    this.frame = h('div', { class: 'messages-frame' }, this.el, this.down, this.announcer);
    this.el.addEventListener('scroll', () => {
      if (this.el.scrollTop < 120) this.handlers.older();
      this.syncDown();
    });
    this.inner.addEventListener('click', (ev) => {
      const b = (ev.target as Element).closest<HTMLButtonElement>('button[data-action]');
      if (b?.dataset.action === 'copy-code' || b?.dataset.action === 'copy-message') {
        void this.copy(b);
        return;
      }
      const task = b?.closest<HTMLElement>('[data-task-id]')?.dataset.taskId;
      if (!b || !task || b.disabled) return;
      switch (b.dataset.action) {
        case 'cancel':
          this.handlers.cancel(task);
          return;
        case 'retry':
          this.handlers.retry(task);
          return;
        case 'regenerate':
          this.handlers.regenerate(task);
          return;
        case 'edit':
          this.startEdit(b.closest<HTMLElement>('[data-key]')?.dataset.key ?? '');
          return;
        case 'version':
          if (b.dataset.target) this.handlers.show(b.dataset.target);
          return;
      }
    });
  }

  /**
   * Turns a user message into a box to edit it in; sending it makes a new
   * version of its turn. The message's files come along as chips, and the
   * user may take some out; files alone, without text, can be sent too.
   */
  private startEdit(key: string): void {
    const r = this.rows.get(key);
    const task = r?.el.dataset.taskId;
    if (!r || !task || r.editor) return;
    const input = h('textarea', { class: 'edit-input', 'data-testid': 'edit-input', 'aria-label': 'Edit message', rows: '3' });
    input.value = r.body.textContent ?? '';
    let kept = [...(r.shown?.attachments ?? [])];
    const files = h('div', { class: 'attachments editor-files', 'data-testid': 'edit-attachments', hidden: kept.length === 0 });
    const send = h('button', { type: 'button', class: 'button', 'data-testid': 'edit-send' }, 'Send');
    const sync = () => {
      files.replaceChildren(...kept.map((a) => editChip(a, () => {
        kept = kept.filter((k) => k.id !== a.id);
        sync();
        (files.querySelector('button') ?? input).focus();
      })));
      hide(files, kept.length === 0);
      disable(send, input.value.trim() === '' && kept.length === 0);
    };
    sync();
    input.addEventListener('input', () => disable(send, input.value.trim() === '' && kept.length === 0));
    const cancel = h('button', { type: 'button', class: 'button subtle', 'data-testid': 'edit-cancel' }, 'Cancel');
    const editor = h('div', { class: 'editor', 'data-testid': 'editor' }, files, input, h('div', { class: 'editor-actions' }, cancel, send));
    // The focus goes back to Edit (or, when the message can no longer be
    // edited, to the list), never to nowhere; a sent edit then moves it on.
    const close = () => {
      const had = editor.contains(document.activeElement);
      editor.remove();
      r.editor = null;
      r.body.hidden = false;
      r.el.classList.remove('editing');
      r.edit.hidden = !(r.shown?.canEdit ?? true);
      if (had) (r.edit.hidden ? this.el : r.edit).focus();
    };
    const submit = () => {
      const value = input.value;
      if (value.trim() === '' && kept.length === 0) return;
      close();
      this.handlers.edit(task, value, kept);
    };
    send.addEventListener('click', submit);
    cancel.addEventListener('click', close);
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        submit();
      } else if (ev.key === 'Escape') {
        ev.preventDefault();
        ev.stopPropagation();
        close();
      }
    });
    r.editor = editor;
    r.body.hidden = true;
    r.el.classList.add('editing');
    r.edit.hidden = true;
    r.body.after(editor);
    input.focus();
    input.setSelectionRange(input.value.length, input.value.length);
  }

  /** Copies a code block, or an answer's Markdown, and says so on the button for a moment. */
  private async copy(b: HTMLButtonElement): Promise<void> {
    let value: string | undefined;
    if (b.dataset.action === 'copy-code') {
      value = b.closest('.code-block')?.querySelector('pre code')?.textContent ?? undefined;
    } else {
      const key = b.closest<HTMLElement>('[data-key]')?.dataset.key;
      value = key ? this.rows.get(key)?.md?.text : undefined;
    }
    if (value === undefined) return;
    const ok = await copyText(value);
    b.dataset.copied = ok ? 'true' : 'false';
    const label = b.querySelector('.copy-label');
    if (label) label.textContent = ok ? 'Copied' : 'Copy failed';
    b.setAttribute('aria-label', ok ? 'Copied' : 'Copy failed');
    window.setTimeout(() => {
      delete b.dataset.copied;
      if (label) label.textContent = 'Copy';
      b.setAttribute('aria-label', b.dataset.action === 'copy-code' ? 'Copy code' : 'Copy answer');
    }, 1500);
  }

  /** Whether events can arrive now; an answer in progress says it is paused when not. */
  setLive(live: boolean): void {
    if (live === this.live) return;
    this.live = live;
    if (this.last) this.render(this.last);
  }

  /** Scrolls to the newest message (after the user sent one). */
  toBottom(): void {
    this.el.scrollTop = this.el.scrollHeight;
    this.syncDown();
  }

  private syncDown(): void {
    const away = this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight;
    hide(this.down, away < 160);
    attr(this.down, 'data-streaming', this.last?.busy ? 'true' : null);
  }

  /**
   * Says the complete sentences of the answers streaming in the open
   * conversation that are new since the last time: an answer first seen
   * while it streams is announced from where it was then, and once more at
   * its end for the rest; answers loaded finished are not read out.
   */
  private announce(v: ConversationView): void {
    for (const m of v.messages) {
      if (m.role !== 'assistant' || !m.task_id) continue;
      const final = m.status !== 'generating';
      let upTo = this.announced.get(m.task_id);
      if (upTo === undefined) {
        if (final) continue;
        upTo = m.content.length;
      }
      const a = nextAnnouncement(m.content, upTo, final);
      if (final) this.announced.delete(m.task_id);
      else this.announced.set(m.task_id, a.upTo);
      if (a.say) {
        this.announcer.append(h('p', {}, a.say));
        while (this.announcer.childElementCount > 50) this.announcer.firstElementChild!.remove();
      }
    }
  }

  render(v: ConversationView): void {
    this.last = v;
    const switched = v.id !== this.conversation;
    if (switched) this.announced.clear();
    else this.announce(v);
    if (switched) {
      this.conversation = v.id;
      this.rows.clear();
      this.inner.replaceChildren();
    }
    const nearBottom = this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 80;
    const firstKey = this.inner.firstElementChild ? (this.inner.firstElementChild as HTMLElement).dataset.key : undefined;
    const heightBefore = this.el.scrollHeight;
    const topBefore = this.el.scrollTop;

    const seen = new Set<string>();
    let prev: Element | null = null;
    for (const m of v.messages) {
      const key = messageKey(m);
      seen.add(key);
      let row = this.rows.get(key);
      if (!row) {
        row = this.row(key, m.role);
        this.rows.set(key, row);
      }
      if (row.shown !== m || row.shownLive !== this.live) {
        this.patch(row, m);
        row.shown = m;
        row.shownLive = this.live;
      }
      const want: Element | null = prev ? prev.nextElementSibling : this.inner.firstElementChild;
      if (want !== row.el) this.inner.insertBefore(row.el, want);
      prev = row.el;
    }
    for (const [key, row] of this.rows) {
      if (!seen.has(key)) {
        row.el.remove();
        this.rows.delete(key);
      }
    }

    hide(this.empty, !(v.loaded && v.messages.length === 0));
    attr(this.el, 'aria-busy', v.loaded ? 'false' : 'true');
    attr(this.top, 'data-state', v.loadingOlder ? 'loading' : v.hasOlder ? 'more' : 'start');
    text(this.top, v.loadingOlder ? 'Loading earlier messages…' : v.hasOlder ? '' : v.messages.length ? 'Start of conversation' : '');

    const newFirst = this.inner.firstElementChild ? (this.inner.firstElementChild as HTMLElement).dataset.key : undefined;
    if (switched || nearBottom) {
      this.el.scrollTop = this.el.scrollHeight;
    } else if (firstKey !== newFirst) {
      // Older messages went in front: keep what the user was reading where it was.
      this.el.scrollTop = topBefore + (this.el.scrollHeight - heightBefore);
    }
    this.syncDown();
    // A short conversation cannot scroll; fetch older pages until it can.
    if (v.loaded && v.hasOlder && !v.loadingOlder && this.el.scrollHeight <= this.el.clientHeight + 120) this.handlers.older();
  }

  private row(key: string, role: string): Row {
    const body = h('div', { class: 'body', 'data-testid': 'message-content' });
    const md = role === 'assistant' ? new MarkdownBody(body) : null;
    const copy = h('button', { type: 'button', class: 'icon-button', 'data-action': 'copy-message', 'data-testid': 'copy-message', 'aria-label': 'Copy answer', title: 'Copy answer', hidden: true }, icon('copy'));
    const meta = h('div', { class: 'meta' });
    const time = h('time', { class: 'time', 'data-testid': 'message-time' });
    // Quiet, not an error: the answer carried on where it was after its worker was lost.
    const resumed = h('div', { class: 'note', 'data-testid': 'resumed-note', hidden: true }, 'Resumed after a server interruption');
    const fill = h('div', { class: 'fill' });
    const bar = h('div', { class: 'progress', role: 'progressbar', 'aria-label': 'Answer progress', 'aria-valuemin': '0', 'aria-valuemax': '100', 'data-testid': 'progress', hidden: true }, fill);
    const errorText = h('span', { 'data-testid': 'error-text' });
    const errorDetail = h('code', { 'data-testid': 'error-detail' });
    const errorMore = h('details', { class: 'error-more' }, h('summary', {}, 'Details'), errorDetail);
    const error = h('div', { class: 'error', role: 'alert', 'data-testid': 'message-error', hidden: true }, errorText, errorMore);
    const cancel = h('button', { type: 'button', class: 'button subtle', 'data-action': 'cancel', 'data-testid': 'cancel-button', hidden: true }, 'Stop');
    const retry = h('button', { type: 'button', class: 'button', 'data-action': 'retry', 'data-testid': 'retry-button', hidden: true }, 'Retry');
    const regenerate = h('button', { type: 'button', class: 'icon-button', 'data-action': 'regenerate', 'data-testid': 'regenerate-button', 'aria-label': 'Regenerate', title: 'Regenerate', hidden: true }, icon('retry'));
    const edit = h('button', { type: 'button', class: 'icon-button', 'data-action': 'edit', 'data-testid': 'edit-button', 'aria-label': 'Edit and send again', title: 'Edit', hidden: true }, icon('edit'));
    const versionPrev = h('button', { type: 'button', class: 'icon-button', 'data-action': 'version', 'data-testid': 'version-prev', 'aria-label': 'Previous version' }, icon('left'));
    const versionNext = h('button', { type: 'button', class: 'icon-button', 'data-action': 'version', 'data-testid': 'version-next', 'aria-label': 'Next version' }, icon('right'));
    const versionLabel = h('span', { class: 'version-label', 'data-testid': 'version-label' });
    const versions = h('div', { class: 'versions', 'data-testid': 'version-switcher', role: 'group', 'aria-label': 'Versions', hidden: true }, versionPrev, versionLabel, versionNext);
    const actions = h('div', { class: 'actions' }, versions, edit, copy, regenerate, cancel, retry);
    const files = h('div', { class: 'attachments', 'data-testid': 'message-attachments', hidden: true });
    const el = h('article', { class: 'message', 'data-testid': 'message', 'data-key': key }, files, body, bar, error, h('div', { class: 'footer' }, time, meta, resumed, actions));
    return { el, shown: null, shownLive: this.live, files, filesKey: '', body, md, copy, meta, time, resumed, bar, fill, error, errorText, errorMore, errorDetail, cancel, retry, regenerate, edit, versions, versionLabel, versionPrev, versionNext, editor: null };
  }

  private patch(r: Row, m: ViewMessage): void {
    attr(r.el, 'data-id', m.id);
    attr(r.el, 'data-role', m.role);
    // User messages have no task status; 'sending' until the server confirmed the submit.
    attr(r.el, 'data-status', m.role === 'user' ? (m.sending ? 'sending' : 'sent') : m.status);
    attr(r.el, 'data-task-id', m.task_id);
    attr(r.el, 'data-local', m.local ? 'true' : null);
    attr(r.el, 'aria-label', m.role === 'user' ? 'You' : 'Assistant');
    const generating = m.status === 'generating';
    if (r.md) r.md.set(m.content, !generating);
    else text(r.body, m.content);
    // A message of files alone shows its chips, not an empty bubble.
    r.el.classList.toggle('files-only', m.role === 'user' && m.content === '' && m.attachments.length > 0);
    hide(r.copy, m.role !== 'assistant' || generating || m.content === '');
    const filesKey = m.attachments.map((a) => a.id).join(',');
    if (filesKey !== r.filesKey) {
      r.filesKey = filesKey;
      r.files.replaceChildren(...m.attachments.map(attachmentChip));
      hide(r.files, m.attachments.length === 0);
    }
    r.body.classList.toggle('streaming', generating);
    r.body.classList.toggle('waiting', generating && m.content === '');
    // The bar shows from the first snapshot on, starting at its value, never at 0 by default.
    hide(r.bar, !generating);
    if (generating) {
      attr(r.bar, 'data-value', m.progress === null ? null : String(m.progress));
      attr(r.bar, 'aria-valuenow', m.progress === null ? null : String(m.progress));
      r.bar.classList.toggle('indeterminate', m.progress === null);
      r.fill.style.width = m.progress === null ? '' : `${m.progress}%`;
    }
    const err = m.status !== 'failed' ? null : m.errorCode ? describeError(m.errorCode, m.error) : describeTaskError(m.error);
    hide(r.error, err === null);
    if (err) {
      text(r.errorText, err.text);
      hide(r.errorMore, err.detail === null);
      text(r.errorDetail, err.detail ?? '');
    }
    r.body.classList.toggle('paused', generating && !this.live);
    hide(r.cancel, !generating);
    disable(r.cancel, !m.canCancel);
    text(r.cancel, m.cancelling ? 'Stopping…' : 'Stop');
    hide(r.retry, !m.canRetry);
    hide(r.regenerate, !m.canRegenerate);
    hide(r.edit, !m.canEdit || r.editor !== null);
    // The switcher sits under the answer (ChatGPT's ‹ 2/3 ›); the user message of an edited turn changes with it.
    const v = m.role === 'assistant' ? m.versions : null;
    hide(r.versions, v === null);
    if (v) {
      text(r.versionLabel, `${v.index}/${v.count}`);
      attr(r.versions, 'data-index', String(v.index));
      attr(r.versions, 'data-count', String(v.count));
      attr(r.versionLabel, 'aria-label', `Version ${v.index} of ${v.count}`);
      disable(r.versionPrev, v.prev === null);
      disable(r.versionNext, v.next === null);
      attr(r.versionPrev, 'data-target', v.prev);
      attr(r.versionNext, 'data-target', v.next);
    }
    hide(r.resumed, !m.resumed);
    text(r.meta, meta(m, this.live));
    attr(r.time, 'datetime', m.created_at);
    text(r.time, messageTime(m.created_at, Date.now()));
    attr(r.time, 'title', new Date(m.created_at).toLocaleString());
  }
}

function meta(m: ViewMessage, live: boolean): string {
  if (m.role === 'user') return m.sending ? (live ? 'Sending…' : 'Waiting for the connection…') : '';
  switch (m.status) {
    case 'generating':
      // Nothing can arrive while the connection is down: never "Writing…" then.
      if (!live) return m.cancelling ? 'Stopping once reconnected…' : 'Paused — reconnecting…';
      if (m.sending) return 'Sending…';
      if (m.cancelling) return 'Stopping…';
      return m.content === '' ? 'Thinking…' : 'Writing…';
    case 'cancelled':
      return 'Stopped';
    case 'done':
      if (m.finishedFirst) return 'Finished before it could be stopped';
      return m.attempt && m.attempt > 1 && !m.resumed ? `Attempt ${m.attempt}` : '';
    case 'failed':
      return m.attempt && m.attempt > 1 ? `Failed (attempt ${m.attempt})` : 'Failed';
    default:
      // A resumed answer says so in its note; its attempt number would only puzzle.
      return m.attempt && m.attempt > 1 && !m.resumed ? `Attempt ${m.attempt}` : '';
  }
}


/** A sent file: a link that downloads it (the server sends it as an attachment, with its name). */
function attachmentChip(a: Attachment): HTMLElement {
  return h(
    'a',
    { class: 'chip', href: `${Paths.uploads}${encodeURIComponent(a.id)}`, download: a.name, title: `Download ${a.name}`, 'data-testid': 'attachment-chip', 'data-id': a.id },
    icon('file'),
    h('span', { class: 'chip-name' }, a.name),
    h('span', { class: 'chip-size' }, formatBytes(a.size)),
  );
}

/** A file of a message being edited, with a button that leaves it out of the new version. */
function editChip(a: Attachment, remove: () => void): HTMLElement {
  const button = h('button', { type: 'button', class: 'chip-button', 'aria-label': `Remove ${a.name}`, title: 'Remove', 'data-testid': 'edit-attachment-remove' }, icon('close'));
  button.addEventListener('click', remove);
  return h('span', { class: 'chip', 'data-testid': 'edit-attachment', 'data-id': a.id }, icon('file'), h('span', { class: 'chip-name' }, a.name), h('span', { class: 'chip-size' }, formatBytes(a.size)), button);
}
