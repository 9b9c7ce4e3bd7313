import { conversationPath, groupByDate, type ConversationItem, type SearchState } from '../lib';
import { attr, h, text } from './dom';
import { icon } from './icons';

export interface SidebarActions {
  open(id: string): void;
  create(): void;
  more(): void;
  rename(id: string, title: string): Promise<void>;
  remove(id: string): Promise<void>;
  search(q: string): void;
  moreResults(): void;
  /** Puts the focus somewhere sensible (the message box) when the control that had it is gone. */
  refocus(): void;
}

/** The conversation menu that is open: at most one at a time. */
interface OpenMenu {
  button: HTMLButtonElement;
  menu: HTMLElement;
}

let menuIds = 0;

/**
 * The conversation list: a search box, then the conversations newest
 * activity first under date headings (Today, Yesterday, Previous 7 days…),
 * each with a running mark while it has an answer in progress and a menu to
 * rename or delete it (deleting asks first); or, while a search is typed,
 * the conversations that match with a few words of the message that did.
 *
 * The "…" menu is a WAI-ARIA menu button: opening it puts the focus on its
 * first item; the arrows (wrapping), Home and End move between the items;
 * Escape closes it and gives the focus back to "…"; Tab, a click outside and
 * choosing an item close it. When a rename or the delete question ends, the
 * focus goes back to the "…" that started it, or, when that conversation is
 * gone, to its neighbour in the list (else to the message box), never to
 * nowhere.
 */
export class Sidebar {
  readonly el: HTMLElement;
  private readonly list: HTMLUListElement;
  private readonly results: HTMLElement;
  private readonly more: HTMLButtonElement;
  private readonly moreResults: HTMLButtonElement;
  private readonly searchBox: HTMLInputElement;
  private readonly searchNote: HTMLElement;
  /** "No conversations yet": shown once the list has loaded and is empty. */
  private readonly none: HTMLElement;
  /** Whether the first page of the list has come (before that, empty means not known yet). */
  loaded = false;
  private readonly dialog: HTMLDialogElement;
  private readonly dialogText: HTMLElement;
  private readonly items = new Map<string, HTMLLIElement>();
  private last: { list: ConversationItem[]; openId: string; hasMore: boolean } = { list: [], openId: '', hasMore: false };
  private search: SearchState = { q: '', results: [], loading: false, hasMore: false, error: null };
  private editing: string | null = null;
  private searchTimer: number | undefined;
  private pendingDelete: string | null = null;
  private openMenu: OpenMenu | null = null;
  /** Where the focus goes when the delete question closes. */
  private returnTo: HTMLElement | null = null;

  constructor(private readonly actions: SidebarActions, private readonly now: () => number = Date.now) {
    const newButton = h('button', { type: 'button', class: 'new-button', 'data-testid': 'new-conversation' }, h('span', { 'aria-hidden': 'true' }, '+'), ' New chat');
    newButton.addEventListener('click', () => actions.create());
    this.searchBox = h('input', { type: 'search', class: 'search-box', placeholder: 'Search conversations', 'aria-label': 'Search conversations', 'data-testid': 'conversation-search', enterkeyhint: 'search' });
    this.searchBox.addEventListener('input', () => {
      window.clearTimeout(this.searchTimer);
      const q = this.searchBox.value;
      // Results come while typing, not on every key.
      this.searchTimer = window.setTimeout(() => actions.search(q), q.trim() === '' ? 0 : 200);
    });
    this.searchBox.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape' && this.searchBox.value !== '') {
        ev.preventDefault();
        ev.stopPropagation();
        this.searchBox.value = '';
        actions.search('');
      }
    });
    this.searchNote = h('div', { class: 'search-note', 'data-testid': 'search-note', hidden: true, role: 'status' });
    this.none = h('p', { class: 'list-note', 'data-testid': 'no-conversations', hidden: true }, 'No conversations yet');
    this.list = h('ul', { class: 'conversation-list', 'data-testid': 'conversation-list', 'aria-label': 'Conversations' });
    this.results = h('ul', { class: 'conversation-list results', 'data-testid': 'search-results', 'aria-label': 'Search results', hidden: true });
    this.more = h('button', { type: 'button', class: 'link-button more', hidden: true, 'data-testid': 'more-conversations' }, 'Show older');
    this.more.addEventListener('click', () => actions.more());
    this.moreResults = h('button', { type: 'button', class: 'link-button more', hidden: true, 'data-testid': 'more-results' }, 'More results');
    this.moreResults.addEventListener('click', () => actions.moreResults());

    this.dialogText = h('p', {});
    const cancel = h('button', { type: 'button', class: 'button subtle', 'data-testid': 'cancel-delete' }, 'Cancel');
    const confirm = h('button', { type: 'button', class: 'button danger', 'data-testid': 'confirm-delete' }, 'Delete');
    this.dialog = h('dialog', { class: 'confirm', 'data-testid': 'delete-dialog', 'aria-labelledby': 'delete-title' }, h('h2', { id: 'delete-title' }, 'Delete conversation?'), this.dialogText, h('div', { class: 'dialog-actions' }, cancel, confirm));
    cancel.addEventListener('click', () => this.dialog.close());
    confirm.addEventListener('click', () => {
      const id = this.pendingDelete;
      // Its "…" goes with the conversation: the focus goes to a neighbour.
      this.returnTo = this.returnTo ? neighbour(this.returnTo) : null;
      this.dialog.close();
      if (id) void actions.remove(id);
    });
    this.dialog.addEventListener('close', () => {
      this.pendingDelete = null;
      const back = this.returnTo;
      this.returnTo = null;
      this.focusOr(back);
    });
    // A press anywhere outside the open menu and its button closes it (the press then does what it does).
    document.addEventListener(
      'pointerdown',
      (ev) => {
        const m = this.openMenu;
        if (m && !m.menu.contains(ev.target as Node) && !m.button.contains(ev.target as Node)) this.closeMenu(false);
      },
      true,
    );

    for (const ul of [this.list, this.results]) {
      ul.addEventListener('click', (ev) => this.onClick(ev));
      ul.addEventListener('keydown', (ev) => this.onMenuKey(ev));
      // The focus moved elsewhere (not by a press: a screen reader, a script): the menu closes.
      ul.addEventListener('focusout', (ev) => {
        const m = this.openMenu;
        const to = ev.relatedTarget;
        if (m && to instanceof Node && !m.menu.contains(to) && !m.button.contains(to)) this.closeMenu(false);
      });
      ul.addEventListener('keydown', (ev) => {
        if (ev.defaultPrevented) return;
        const li = (ev.target as Element).closest<HTMLElement>('[data-id]');
        if (li && (ev.target as Element) === li && (ev.key === 'Enter' || ev.key === ' ')) {
          ev.preventDefault();
          actions.open(li.dataset.id!);
        }
      });
    }
    this.el = h(
      'nav',
      { class: 'sidebar', id: 'sidebar', 'aria-label': 'Conversations', 'data-testid': 'sidebar' },
      h('div', { class: 'sidebar-head' }, h('span', { class: 'brand' }, 'Tether'), newButton),
      h('div', { class: 'search' }, icon('search'), this.searchBox),
      this.searchNote,
      this.none,
      this.list,
      this.results,
      this.more,
      this.moreResults,
      this.dialog,
    );
  }

  private onClick(ev: MouseEvent): void {
    const target = ev.target as Element;
    const li = target.closest<HTMLElement>('[data-id]');
    const id = li?.dataset.id;
    if (!li || !id) return;
    const action = target.closest<HTMLElement>('[data-action]')?.dataset.action;
    if (action === 'menu') {
      const button = li.querySelector<HTMLButtonElement>('.item-menu-button')!;
      if (this.openMenu?.button === button) this.closeMenu(true);
      else this.showMenu(li, 'first');
      return;
    }
    if (action === 'rename') {
      this.closeMenu(false);
      this.startRename(li, id);
      return;
    }
    if (action === 'delete') {
      this.closeMenu(false);
      this.pendingDelete = id;
      this.returnTo = li.querySelector<HTMLElement>('.item-menu-button');
      const title = li.querySelector('.title')?.textContent ?? 'this conversation';
      text(this.dialogText, `“${title}” will be deleted with all its messages and files. An answer in progress is stopped. This cannot be undone.`);
      this.dialog.showModal();
      return;
    }
    if (target.closest('input, .item-menu')) {
      // A click in the rename field is inside the title's link: it must not follow it.
      if (target.closest('a')) ev.preventDefault();
      return;
    }
    // The title is a link to /c/<id>: a click with a modifier (new tab, new
    // window) is the browser's; a plain one opens the conversation in place.
    if (ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey || ev.button !== 0) return;
    ev.preventDefault();
    this.closeMenu(false);
    this.actions.open(id);
  }

  /** Opens a conversation's menu (closing any other) with the focus on its first or last item. */
  private showMenu(li: HTMLElement, at: 'first' | 'last'): void {
    const button = li.querySelector<HTMLButtonElement>('.item-menu-button');
    const menu = li.querySelector<HTMLElement>('.item-menu');
    if (!button || !menu) return;
    if (this.openMenu?.button !== button) {
      this.closeMenu(false);
      menu.hidden = false;
      li.dataset.menu = 'open';
      button.setAttribute('aria-expanded', 'true');
      this.openMenu = { button, menu };
    }
    const items = menuItems(menu);
    items[at === 'first' ? 0 : items.length - 1]?.focus();
  }

  /** Closes the open menu; back gives the focus to its "…" button (Escape, Tab). */
  private closeMenu(back: boolean): void {
    const m = this.openMenu;
    if (!m) return;
    this.openMenu = null;
    m.menu.hidden = true;
    m.button.setAttribute('aria-expanded', 'false');
    const li = m.button.closest<HTMLElement>('[data-menu]');
    if (li) delete li.dataset.menu;
    if (back && m.button.isConnected) m.button.focus();
  }

  /** The keys of the menu pattern: on "…" the arrows open it; in it they move, Escape and Tab leave. */
  private onMenuKey(ev: KeyboardEvent): void {
    const target = ev.target as HTMLElement;
    if (ev.altKey || ev.ctrlKey || ev.metaKey || ev.isComposing) return;
    if (target.matches('.item-menu-button')) {
      if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
        ev.preventDefault();
        this.showMenu(target.closest<HTMLElement>('[data-id]')!, ev.key === 'ArrowDown' ? 'first' : 'last');
      } else if (ev.key === 'Escape' && this.openMenu?.button === target) {
        ev.preventDefault();
        ev.stopPropagation();
        this.closeMenu(true);
      }
      return;
    }
    const m = this.openMenu;
    if (!m || !m.menu.contains(target)) return;
    const items = menuItems(m.menu);
    const i = items.indexOf(target as HTMLButtonElement);
    let next: number | null = null;
    switch (ev.key) {
      case 'ArrowDown':
        next = (i + 1) % items.length;
        break;
      case 'ArrowUp':
        next = (i - 1 + items.length) % items.length;
        break;
      case 'Home':
        next = 0;
        break;
      case 'End':
        next = items.length - 1;
        break;
      case 'Escape':
        ev.preventDefault();
        ev.stopPropagation();
        this.closeMenu(true);
        return;
      case 'Tab':
        // Tab goes on from "…", as if the menu had not been there.
        this.closeMenu(true);
        return;
      default:
        return;
    }
    ev.preventDefault();
    items[next]?.focus();
  }

  /** Focuses el when it is still on the page and shown, else lets the app put the focus somewhere sensible. */
  private focusOr(el: HTMLElement | null): void {
    if (el?.isConnected && el.getClientRects().length > 0) el.focus();
    else this.actions.refocus();
  }

  private startRename(li: HTMLElement, id: string): void {
    const title = li.querySelector<HTMLElement>('.title')!;
    const input = h('input', { type: 'text', class: 'rename-input', 'data-testid': 'rename-input', 'aria-label': 'New title', maxlength: '200' });
    input.value = title.textContent ?? '';
    this.editing = id;
    title.hidden = true;
    title.after(input);
    input.focus();
    input.select();
    let done = false;
    const finish = (save: boolean, back = false) => {
      if (done) return;
      done = true;
      this.editing = null;
      const value = input.value.trim();
      input.remove();
      title.hidden = false;
      if (save && value !== '' && value !== title.textContent) {
        text(title, value);
        void this.actions.rename(id, value);
      }
      // Ended from the keyboard: the focus goes back to "…" (a click elsewhere took it already).
      if (back) this.focusOr(li.querySelector<HTMLElement>('.item-menu-button'));
    };
    input.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter') {
        ev.preventDefault();
        finish(true, true);
      } else if (ev.key === 'Escape') {
        ev.preventDefault();
        ev.stopPropagation();
        finish(false, true);
      }
    });
    input.addEventListener('blur', () => finish(true));
  }

  /** Whether a rename is being typed or the delete question is open (Escape is theirs then). */
  get busy(): boolean {
    return this.editing !== null || this.dialog.open;
  }

  render(list: ConversationItem[], openId: string, hasMore: boolean): void {
    this.last = { list, openId, hasMore };
    const seen = new Set<string>();
    const groups = groupByDate(list, this.now());
    const frag: Element[] = [];
    for (const g of groups) {
      frag.push(h('li', { class: 'group-label', role: 'presentation', 'data-testid': 'conversation-group', 'data-label': g.label }, g.label));
      for (const c of g.items) {
        seen.add(c.id);
        let li = this.items.get(c.id);
        if (!li) {
          li = this.item(c.id, 'conversation-item');
          this.items.set(c.id, li);
        }
        this.patch(li, c, openId);
        frag.push(li);
      }
    }
    // Rebuild the order only when it changed, so an open rename field keeps its focus.
    const current = [...this.list.children];
    if (current.length !== frag.length || current.some((el, i) => el !== frag[i] && !(el.classList.contains('group-label') && frag[i]!.classList.contains('group-label') && el.textContent === frag[i]!.textContent))) {
      // Moving a row takes the focus out of it: give it back.
      const focused = document.activeElement instanceof HTMLElement && this.list.contains(document.activeElement) ? document.activeElement : null;
      this.list.replaceChildren(...frag);
      if (focused?.isConnected && document.activeElement !== focused) focused.focus({ preventScroll: true });
    }
    for (const [id, li] of this.items) {
      if (!seen.has(id)) {
        if (this.openMenu && li.contains(this.openMenu.button)) this.closeMenu(false);
        li.remove();
        this.items.delete(id);
      }
    }
    this.more.hidden = !hasMore || this.search.q !== '';
    this.none.hidden = !this.loaded || list.length > 0 || this.search.q.trim() !== '';
  }

  /** Shows a search's results in place of the list (or the list again when it is over). */
  renderSearch(s: SearchState, openId: string): void {
    this.search = s;
    const searching = s.q.trim() !== '';
    this.list.hidden = searching;
    this.results.hidden = !searching;
    this.moreResults.hidden = !searching || !s.hasMore;
    this.searchNote.hidden = !searching || (s.results.length > 0 && !s.error);
    text(this.searchNote, s.error ?? (s.loading ? 'Searching…' : 'No conversations match.'));
    this.more.hidden = searching || !this.last.hasMore;
    this.none.hidden = searching || !this.loaded || this.last.list.length > 0;
    if (!searching) {
      this.results.replaceChildren();
      return;
    }
    const words = s.q.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
    this.results.replaceChildren(
      ...s.results.map((c) => {
        const li = this.item(c.id, 'search-result');
        this.patch(li, c, openId);
        highlight(li.querySelector('.title')!, c.title || 'New conversation', words);
        if (c.snippet) {
          const snip = h('span', { class: 'snippet', 'data-testid': 'search-snippet' });
          highlight(snip, c.snippet.replace(/[*_`#>]+/g, ''), words);
          li.querySelector('.item-text')!.append(snip);
        }
        return li;
      }),
    );
  }

  private item(id: string, testid: string): HTMLLIElement {
    const menuId = `conversation-menu-${++menuIds}`;
    const menu = h(
      'div',
      { class: 'item-menu', role: 'menu', id: menuId, 'aria-label': 'Conversation actions', hidden: true },
      h('button', { type: 'button', role: 'menuitem', tabindex: '-1', 'data-action': 'rename', 'data-testid': 'rename-conversation' }, icon('edit'), ' Rename'),
      h('button', { type: 'button', role: 'menuitem', tabindex: '-1', class: 'danger-text', 'data-action': 'delete', 'data-testid': 'delete-conversation' }, icon('trash'), ' Delete'),
    );
    return h(
      'li',
      { class: 'conversation', 'data-testid': testid, 'data-id': id, tabindex: '0' },
      // A real link, for middle-click and "open in new tab"; out of the tab
      // order, as the row itself is the keyboard's stop (Enter opens it).
      h('a', { class: 'item-text', href: conversationPath(id), tabindex: '-1', draggable: 'false' }, h('span', { class: 'title' })),
      h('span', { class: 'running-mark', 'aria-hidden': 'true' }),
      h('button', { type: 'button', class: 'item-menu-button', 'data-action': 'menu', 'data-testid': 'conversation-menu', 'aria-label': 'Conversation actions', 'aria-haspopup': 'menu', 'aria-expanded': 'false', 'aria-controls': menuId }, icon('more')),
      menu,
    );
  }

  private patch(li: HTMLElement, c: ConversationItem, openId: string): void {
    const running = c.active_task_id !== null;
    if (this.editing !== c.id) text(li.querySelector('.title')!, c.title || 'New conversation');
    attr(li, 'data-running', String(running));
    attr(li, 'aria-current', c.id === openId ? 'page' : null);
    attr(li, 'aria-label', `${c.title || 'New conversation'}${running ? ' (answering)' : ''}`);
    attr(li, 'title', new Date(c.updated_at).toLocaleString());
  }
}

function menuItems(menu: HTMLElement): HTMLButtonElement[] {
  return [...menu.querySelectorAll<HTMLButtonElement>('[role="menuitem"]')];
}

/** The conversation next to the one el is in (the one after it, else before it), or null. */
function neighbour(el: HTMLElement): HTMLElement | null {
  const li = el.closest<HTMLElement>('[data-id]');
  if (!li) return null;
  const rows = [...(li.parentElement?.querySelectorAll<HTMLElement>(':scope > [data-id]') ?? [])];
  const i = rows.indexOf(li);
  return rows[i + 1] ?? rows[i - 1] ?? null;
}

/** Puts text in el with the query's words marked (<mark>), without any HTML from the text. */
function highlight(el: Element, value: string, words: string[]): void {
  if (words.length === 0) {
    el.textContent = value;
    return;
  }
  const re = new RegExp(`(${words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})`, 'giu');
  const parts = value.split(re);
  el.replaceChildren(...parts.map((p, i) => (i % 2 === 1 ? h('mark', {}, p) : document.createTextNode(p))));
}
