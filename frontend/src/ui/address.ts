import { conversationPath, parseRoute, type ConversationView, type Route, type TetherClient } from '../lib';
import { h } from './dom';

/**
 * The page's URL and the open conversation, kept in step: opening a
 * conversation (a click in the list, a new chat's first send) pushes
 * `/c/<id>`, a new chat pushes `/`, Back and Forward open what their entry
 * names, and a URL that names no conversation of this user's shows "not
 * found" in place of the messages and the composer, never another
 * conversation. When the client switches by itself (the open conversation
 * was deleted) the entry is replaced, not pushed.
 */
export class Address {
  /** Shown in place of the messages while the URL names nothing of this user's. */
  readonly notFound: HTMLElement;
  private shown = false;

  constructor(
    private readonly client: TetherClient,
    private readonly onNotFound: (shown: boolean) => void,
    /** Starts a new chat the way the New chat button does. */
    private readonly create: () => void,
  ) {
    const again = h('button', { type: 'button', class: 'button', 'data-testid': 'not-found-new' }, 'Start a new chat');
    again.addEventListener('click', () => this.create());
    this.notFound = h(
      'div',
      { class: 'empty not-found', 'data-testid': 'not-found', hidden: true },
      h('h2', {}, 'Conversation not found'),
      h('p', {}, 'This conversation doesn’t exist or isn’t yours.'),
      again,
    );
    window.addEventListener('popstate', () => this.follow());
  }

  /** What the page's URL names now. */
  get route(): Route {
    return parseRoute(location.pathname);
  }

  /** A conversation chosen in the list. */
  open(id: string): void {
    this.go(conversationPath(id));
    void this.client.openConversation(id);
  }

  /** A new chat: its address is `/` until its first send. */
  opened(): void {
    this.go('/');
  }

  /** Something was sent into conversation id: it has an address now. */
  sent(id: string): void {
    this.go(conversationPath(id));
  }

  /** After each view: the not-found state, and the URL of a switch the client made by itself. */
  sync(v: ConversationView): void {
    if (v.id === '') return; // before the client started
    const r = this.route;
    if (r.kind === 'conversation' && r.id !== v.id) history.replaceState(null, '', '/');
    else if (r.kind === 'home' && v.loaded && v.messages.length > 0 && !this.client.conversationMissing) {
      // `/` opened the stored conversation: name it, so F5 and Back keep it.
      history.replaceState(null, '', conversationPath(v.id));
    }
    const now = this.route;
    this.show(now.kind === 'unknown' || (now.kind === 'conversation' && now.id === v.id && this.client.conversationMissing));
  }

  /** Back or Forward: open what the entry names. */
  private follow(): void {
    const r = this.route;
    if (r.kind === 'conversation') void this.client.openConversation(r.id);
    else this.client.newConversation(); // `/`; or a path that names nothing: not found, over an empty chat
    this.sync(this.client.view());
  }

  private go(path: string): void {
    if (location.pathname !== path) history.pushState(null, '', path);
  }

  private show(on: boolean): void {
    if (on === this.shown) return;
    this.shown = on;
    this.notFound.hidden = !on;
    this.onNotFound(on);
  }

  get isNotFound(): boolean {
    return this.shown;
  }
}
