import { applyConversationEvent } from './conversations';
import { Emitter } from './emitter';
import { describeError } from './errortext';
import { TetherError } from './errors';
import { errText } from './notice';
import type { Conversation, ConversationChangedEvent } from './protocol';
import type { Transport } from './transport';

/** A search of the user's conversations, as the sidebar shows it. */
export interface SearchState {
  q: string;
  results: Conversation[];
  loading: boolean;
  /** More results remain on the server. */
  hasMore: boolean;
  error: string | null;
}

export interface SearchEvents extends Record<string, unknown> {
  change: SearchState;
}

/**
 * A search of the user's conversations by title and message text, paged.
 * A newer query makes the answers of older ones moot (each query has a
 * generation; an answer of an older one is dropped), and renames and
 * deletes apply to the results as to the list.
 */
export class ConversationSearch {
  readonly events = new Emitter<SearchEvents>();
  private s: SearchState = { q: '', results: [], loading: false, hasMore: false, error: null };
  private cursor: string | null = null;
  private gen = 0;

  constructor(
    private readonly conn: Pick<Transport, 'request'>,
    private readonly pageSize: number,
  ) {}

  get state(): SearchState {
    return this.s;
  }

  /** Searches for q; '' ends the search. */
  async search(q: string): Promise<void> {
    const gen = ++this.gen;
    this.cursor = null;
    if (q.trim() === '') {
      this.set({ q: '', results: [], loading: false, hasMore: false, error: null });
      return;
    }
    this.set({ ...this.s, q, loading: true, error: null });
    await this.fetch(gen, q, undefined);
  }

  /** The next page of the current search's results. */
  async more(): Promise<void> {
    const { q, loading } = this.s;
    if (!q || loading || this.cursor === null) return;
    this.set({ ...this.s, loading: true });
    await this.fetch(this.gen, q, this.cursor);
  }

  /** A conversation was renamed or deleted. */
  apply(ev: ConversationChangedEvent): void {
    const results = applyConversationEvent(this.s.results, ev);
    if (results !== this.s.results) this.set({ ...this.s, results });
  }

  private async fetch(gen: number, q: string, before: string | undefined): Promise<void> {
    try {
      const r = await this.conn.request({ type: 'conversations', q, limit: this.pageSize, ...(before ? { before } : {}) }, { wait: true });
      if (gen !== this.gen || r.type !== 'conversations') return;
      this.cursor = r.next;
      const results = before ? [...this.s.results, ...r.conversations.filter((c) => !this.s.results.some((x) => x.id === c.id))] : r.conversations;
      this.set({ q, results, loading: false, hasMore: r.next !== null, error: null });
    } catch (err) {
      if (gen !== this.gen) return;
      const msg = err instanceof TetherError ? describeError(err.code, err.message).text : errText(err);
      this.set({ ...this.s, loading: false, error: msg });
    }
  }

  private set(s: SearchState): void {
    this.s = s;
    this.events.emit('change', s);
  }
}
