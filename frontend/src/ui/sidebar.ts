import type { ConversationItem } from '../lib';
import { attr, h, text } from './dom';

/**
 * The conversation list: newest activity first, a running mark on every
 * conversation with a pending or running task, the open one highlighted, and
 * a button for a new conversation.
 */
export class Sidebar {
  readonly el: HTMLElement;
  private readonly list: HTMLUListElement;
  private readonly more: HTMLButtonElement;
  private readonly items = new Map<string, HTMLLIElement>();

  constructor(handlers: { open(id: string): void; create(): void; more(): void }) {
    const newButton = h('button', { type: 'button', class: 'new-button', 'data-testid': 'new-conversation' }, h('span', { 'aria-hidden': 'true' }, '+'), ' New chat');
    newButton.addEventListener('click', () => handlers.create());
    this.list = h('ul', { class: 'conversation-list', 'data-testid': 'conversation-list', 'aria-label': 'Conversations' });
    this.list.addEventListener('click', (ev) => {
      const li = (ev.target as Element).closest<HTMLElement>('[data-id]');
      if (li?.dataset.id) handlers.open(li.dataset.id);
    });
    this.more = h('button', { type: 'button', class: 'link-button more', hidden: true, 'data-testid': 'more-conversations' }, 'Show older');
    this.more.addEventListener('click', () => handlers.more());
    this.el = h(
      'nav',
      { class: 'sidebar', id: 'sidebar', 'aria-label': 'Conversations', 'data-testid': 'sidebar' },
      h('div', { class: 'sidebar-head' }, h('span', { class: 'brand' }, 'Tether'), newButton),
      this.list,
      this.more,
    );
  }

  render(list: ConversationItem[], openId: string, hasMore: boolean): void {
    const seen = new Set<string>();
    let prev: Element | null = null;
    for (const c of list) {
      seen.add(c.id);
      let li = this.items.get(c.id);
      if (!li) {
        li = h('li', { class: 'conversation', 'data-testid': 'conversation-item', 'data-id': c.id, role: 'button', tabindex: '0' }, h('span', { class: 'title' }), h('span', { class: 'running-mark', 'aria-hidden': 'true' }));
        li.addEventListener('keydown', (ev) => {
          if (ev.key === 'Enter' || ev.key === ' ') {
            ev.preventDefault();
            li!.click();
          }
        });
        this.items.set(c.id, li);
      }
      const running = c.active_task_id !== null;
      text(li.querySelector('.title')!, c.title || 'New conversation');
      attr(li, 'data-running', String(running));
      attr(li, 'aria-current', c.id === openId ? 'page' : null);
      attr(li, 'aria-label', `${c.title || 'New conversation'}${running ? ' (answering)' : ''}`);
      const want: Element | null = prev ? prev.nextElementSibling : this.list.firstElementChild;
      if (want !== li) this.list.insertBefore(li, want);
      prev = li;
    }
    for (const [id, li] of this.items) {
      if (!seen.has(id)) {
        li.remove();
        this.items.delete(id);
      }
    }
    this.more.hidden = !hasMore;
  }
}
