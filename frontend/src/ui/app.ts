import { describeError, describeTooLong, Limits, TetherClient, TetherError, utf8ByteLength, type ConversationItem, type ConversationView, type KeyValue, type Uploads } from '../lib';
import { Address } from './address';
import { Composer } from './composer';
import { h, text } from './dom';
import { icon } from './icons';
import { Indicator } from './indicator';
import { MessageList } from './messages';
import { Sidebar } from './sidebar';
import { ThemeButton } from './theme';
import { exampleButtons } from './welcome';

/**
 * The chat UI: a thin layer that renders what the client and the upload
 * manager say and forwards what the user does. It holds no state of its own
 * that matters after a reload.
 */
export function mountApp(root: HTMLElement, client: TetherClient, uploads: Uploads, storage: KeyValue | null = null): void {
  let view: ConversationView = client.view();
  let list: ConversationItem[] = client.conversations;

  const closeDrawer = () => root.classList.remove('drawer-open');
  const sidebar = new Sidebar({
    open: (id) => {
      closeDrawer();
      address.open(id);
    },
    create: () => newChat(),
    more: () => void client.loadMoreConversations(),
    rename: async (id, title) => {
      try {
        await client.renameConversation(id, title);
      } catch (err) {
        failed('The conversation was not renamed.', err);
        sidebar.render(list, view.id, client.hasOlderConversations);
      }
    },
    remove: async (id) => {
      try {
        await client.deleteConversation(id);
      } catch (err) {
        failed('The conversation was not deleted.', err);
      }
    },
    search: (q) => void client.searchConversations(q),
    moreResults: () => void client.loadMoreSearch(),
    refocus: () => composer.input.focus(),
  });
  const messages = new MessageList({
    cancel: (id) => void client.cancel(id),
    retry: (id) => {
      try {
        client.retry(id);
      } catch (err) {
        toast(String(err instanceof Error ? err.message : err));
      }
    },
    older: () => void client.loadOlder(),
    regenerate: (id) => {
      try {
        client.regenerate(id);
      } catch (err) {
        toast(err instanceof Error ? err.message : String(err));
      }
    },
    edit: (id, content, attachments) => {
      const bytes = utf8ByteLength(content);
      if (bytes > Limits.maxContentBytes) {
        toast(describeTooLong(bytes, Limits.maxContentBytes).text);
        return;
      }
      try {
        client.editAndResend(id, content, attachments);
        composer.input.focus();
      } catch (err) {
        toast(err instanceof Error ? err.message : String(err));
      }
    },
    show: (id) => client.showVersion(id),
  });
  const composer = new Composer({
    send: (value) => {
      const conv = client.conversationId;
      const bytes = utf8ByteLength(value);
      if (bytes > Limits.maxContentBytes) {
        toast(describeTooLong(bytes, Limits.maxContentBytes).text);
        return false;
      }
      const attachments = uploads.ready(conv);
      if (attachments === null) {
        toast('Wait for the files to finish uploading.');
        return false;
      }
      try {
        // The submit, with its attachments, is stored before the composer
        // lets go of them: a reload in between loses neither.
        client.submit(value, conv, attachments);
        address.sent(conv);
        uploads.take(conv);
        messages.toBottom();
        composer.input.focus();
        return true;
      } catch (err) {
        toast(err instanceof Error ? err.message : String(err));
        return false;
      }
    },
    attach: (files) => {
      for (const problem of uploads.add(client.conversationId, files)) toast(problem);
    },
    // A draft too long to send: the same text, byte for byte, as a file uploaded like any other.
    attachText: (value) => {
      const file = new File([value], 'message.txt', { type: 'text/plain;charset=utf-8' });
      const problems = uploads.add(client.conversationId, [file]);
      for (const problem of problems) toast(problem);
      return problems.length === 0;
    },
    pause: (key) => uploads.pause(key),
    resume: (key) => uploads.resume(key),
    remove: (key) => uploads.remove(key),
  });
  const indicator = new Indicator(() => Date.now(), () => client.connection.reconnectNow());
  const menu = h('button', { type: 'button', class: 'menu-button', 'aria-label': 'Show conversations', 'aria-controls': 'sidebar', 'data-testid': 'menu-button' }, h('span', { 'aria-hidden': 'true' }, '☰'));
  menu.addEventListener('click', () => root.classList.toggle('drawer-open'));
  // At phone width the sidebar, with its New chat, is a drawer: the header has one too.
  const newButton = h('button', { type: 'button', class: 'top-button new-top', 'aria-label': 'New chat', title: 'New chat', 'data-testid': 'header-new-conversation' }, icon('compose'));
  newButton.addEventListener('click', () => newChat());
  const theme = new ThemeButton(storage);
  messages.empty.append(exampleButtons((prompt) => composer.fill(prompt)));
  const title = h('h1', { class: 'chat-title', 'data-testid': 'chat-title' });
  const noticeText = h('span', { 'data-testid': 'notice-text' });
  const noticeDetail = h('code', { 'data-testid': 'notice-detail' });
  const noticeMore = h('details', { class: 'error-more' }, h('summary', {}, 'Details'), noticeDetail);
  const notice = h('div', { class: 'notice', role: 'alert', 'data-testid': 'notice', hidden: true }, noticeText, noticeMore);
  const scrim = h('div', { class: 'scrim', 'aria-hidden': 'true' });
  function newChat(): void {
    closeDrawer();
    client.newConversation();
    address.opened();
    composer.input.focus();
  }
  // Not found: the messages and the composer give way to the message and a New chat button.
  const address = new Address(client, (on) => {
    const hadFocus = composer.el.contains(document.activeElement);
    messages.frame.hidden = on;
    composer.el.hidden = on;
    // The message box it had is gone: the focus goes to the way out.
    if (on && hadFocus) address.notFound.querySelector('button')?.focus();
    else if (!on && document.activeElement === document.body) composer.input.focus();
    renderTitle();
  }, newChat);
  scrim.addEventListener('click', closeDrawer);

  root.replaceChildren(
    sidebar.el,
    scrim,
    h('main', { class: 'chat' }, h('header', { class: 'topbar' }, menu, newButton, title, indicator.el, theme.el), messages.frame, address.notFound, notice, composer.el),
  );

  let noticeTimer: number | undefined;
  function toast(msg: string, detail: string | null = null, level: 'info' | 'error' = 'error'): void {
    notice.dataset.level = level;
    text(noticeText, msg);
    text(noticeDetail, detail ?? '');
    noticeMore.hidden = detail === null;
    (noticeMore as HTMLDetailsElement).open = false;
    notice.hidden = false;
    window.clearTimeout(noticeTimer);
    // A notice with details stays while the reader has them open.
    const hide = () => {
      if ((noticeMore as HTMLDetailsElement).open) noticeTimer = window.setTimeout(hide, 2000);
      else notice.hidden = true;
    };
    noticeTimer = window.setTimeout(hide, detail === null ? 6000 : 10000);
  }

  function renderTitle(): void {
    const c = list.find((x) => x.id === view.id);
    const t = address.isNotFound ? 'Not found' : c?.title || (view.messages.length ? 'Conversation' : 'New conversation');
    text(title, t);
    document.title = `${t} · Tether`;
  }

  client.events.on('connection', (s) => {
    indicator.update(s);
    messages.setLive(s.kind === 'open');
  });
  // Upload progress comes in bursts: draw the chips at most once a frame.
  let chipsFrame = 0;
  const renderDrafts = () => {
    if (chipsFrame) return;
    chipsFrame = requestAnimationFrame(() => {
      chipsFrame = 0;
      composer.setDrafts(uploads.list(view.id));
    });
  };
  uploads.events.on('change', renderDrafts);

  // At most once a frame; only what changed is drawn again: the messages
  // that changed, and the sidebar when another conversation is open.
  client.events.on('view', (v) => {
    const switched = v.id !== view.id;
    view = v;
    address.sync(v);
    messages.render(v);
    composer.setBusy(v.busy);
    if (switched) {
      composer.setDrafts(uploads.list(v.id));
      sidebar.render(list, v.id, client.hasOlderConversations);
    }
    renderTitle();
  });
  client.events.on('conversations', (l) => {
    list = l;
    sidebar.loaded = true;
    sidebar.render(l, view.id, client.hasOlderConversations);
    renderTitle();
  });
  client.events.on('notice', (n) => toast(n.text, n.detail ?? null, n.level));
  client.events.on('search', (s) => sidebar.renderSearch(s, view.id));

  /** A refused action, in plain words with the detail behind a disclosure. */
  function failed(what: string, err: unknown): void {
    const human = err instanceof TetherError ? describeError(err.code, err.message) : { text: 'The connection failed; try again.', detail: err instanceof Error ? err.message : String(err) };
    toast(`${what} ${human.text}`, human.detail);
  }

  // Escape closes the drawer when it is open. Else, and only while the
  // message box is empty, it stops the answer in progress, as Stop does: a
  // draft in the box, or the focus in another text field, means Escape was
  // meant for the typing, and it must never throw an answer away.
  document.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Escape' || ev.defaultPrevented || ev.isComposing || sidebar.busy) return;
    if (root.classList.contains('drawer-open')) {
      closeDrawer();
      menu.focus();
      ev.preventDefault();
      return;
    }
    if (composer.input.value !== '') return;
    const target = ev.target instanceof Element ? ev.target : null;
    if (target !== composer.input && target?.closest('input, textarea, select, [contenteditable]:not([contenteditable="false"])')) return;
    const running = view.messages.find((m) => m.status === 'generating' && m.canCancel && m.task_id);
    if (running?.task_id) {
      ev.preventDefault();
      void client.cancel(running.task_id);
    }
  });

  indicator.update(client.state);
  messages.setLive(client.state.kind === 'open');
  messages.render(view);
  composer.setBusy(view.busy);
  composer.setDrafts(uploads.list(view.id));
  sidebar.render(list, view.id, false);
  // The message box has the focus from the start, as in every chat; not on a
  // touch screen, where it would open the keyboard over the conversation.
  if (!window.matchMedia?.('(pointer: coarse)').matches) composer.input.focus();
}
