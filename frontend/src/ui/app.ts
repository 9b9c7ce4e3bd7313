import { TetherClient, type ConversationItem, type ConversationView, type Uploads } from '../lib';
import { Composer } from './composer';
import { h, text } from './dom';
import { Indicator } from './indicator';
import { MessageList } from './messages';
import { Sidebar } from './sidebar';

/**
 * The chat UI: a thin layer that renders what the client and the upload
 * manager say and forwards what the user does. It holds no state of its own
 * that matters after a reload.
 */
export function mountApp(root: HTMLElement, client: TetherClient, uploads: Uploads): void {
  let view: ConversationView = client.view();
  let list: ConversationItem[] = client.conversations;

  const closeDrawer = () => root.classList.remove('drawer-open');
  const sidebar = new Sidebar({
    open: (id) => {
      closeDrawer();
      void client.openConversation(id);
    },
    create: () => {
      closeDrawer();
      client.newConversation();
      composer.input.focus();
    },
    more: () => void client.loadMoreConversations(),
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
  });
  const composer = new Composer({
    send: (value) => {
      const conv = client.conversationId;
      const attachments = uploads.ready(conv);
      if (attachments === null) {
        toast('Wait for the files to finish uploading.');
        return false;
      }
      try {
        // The submit, with its attachments, is stored before the composer
        // lets go of them: a reload in between loses neither.
        client.submit(value, conv, attachments);
        uploads.take(conv);
        return true;
      } catch (err) {
        toast(err instanceof Error ? err.message : String(err));
        return false;
      }
    },
    attach: (files) => {
      for (const problem of uploads.add(client.conversationId, files)) toast(problem);
    },
    pause: (key) => uploads.pause(key),
    resume: (key) => uploads.resume(key),
    remove: (key) => uploads.remove(key),
  });
  const indicator = new Indicator(() => Date.now(), () => client.connection.reconnectNow());
  const menu = h('button', { type: 'button', class: 'menu-button', 'aria-label': 'Show conversations', 'aria-controls': 'sidebar', 'data-testid': 'menu-button' }, h('span', { 'aria-hidden': 'true' }, '☰'));
  menu.addEventListener('click', () => root.classList.toggle('drawer-open'));
  const title = h('h1', { class: 'chat-title', 'data-testid': 'chat-title' });
  const notice = h('div', { class: 'notice', role: 'alert', 'data-testid': 'notice', hidden: true });
  const scrim = h('div', { class: 'scrim', 'aria-hidden': 'true' });
  scrim.addEventListener('click', closeDrawer);

  root.replaceChildren(
    sidebar.el,
    scrim,
    h('main', { class: 'chat' }, h('header', { class: 'topbar' }, menu, title, indicator.el), messages.el, notice, composer.el),
  );

  let noticeTimer: number | undefined;
  function toast(msg: string): void {
    text(notice, msg);
    notice.hidden = false;
    window.clearTimeout(noticeTimer);
    noticeTimer = window.setTimeout(() => (notice.hidden = true), 6000);
  }

  function renderTitle(): void {
    const c = list.find((x) => x.id === view.id);
    const t = c?.title || (view.messages.length ? 'Conversation' : 'New conversation');
    text(title, t);
    document.title = `${t} · Tether`;
  }

  client.events.on('connection', (s) => indicator.update(s));
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

  client.events.on('view', (v) => {
    const switched = v.id !== view.id;
    view = v;
    if (switched) composer.setDrafts(uploads.list(v.id));
    messages.render(v);
    composer.setBusy(v.busy);
    sidebar.render(list, v.id, client.hasOlderConversations);
    renderTitle();
  });
  client.events.on('conversations', (l) => {
    list = l;
    sidebar.render(l, view.id, client.hasOlderConversations);
    renderTitle();
  });
  client.events.on('notice', (n) => toast(n.text));

  indicator.update(client.state);
  messages.render(view);
  composer.setBusy(view.busy);
  composer.setDrafts(uploads.list(view.id));
  sidebar.render(list, view.id, false);
}
