import { Emitter } from './emitter';
import type { Platform, TimerHandle } from './platform';
import type { TaskStates } from './tasks';
import type { Thread } from './thread';
import { buildMessages, keepUnchanged, showPath, type ViewMessage } from './view';

/** The open conversation, ready to render. */
export interface ConversationView {
  id: string;
  /**
   * The messages of the path shown. A message that did not change since the
   * previous view is the same object as in it, so a renderer can skip it.
   */
  messages: ViewMessage[];
  /** The newest page has arrived (or the conversation is known to be empty). */
  loaded: boolean;
  /** Older pages remain on the server. */
  hasOlder: boolean;
  loadingOlder: boolean;
  /** A task in it is pending or running: the UI must not offer to send. */
  busy: boolean;
  /** Why history could not be loaded, if it could not. */
  error: string | null;
}

export interface ViewModelEvents extends Record<string, unknown> {
  view: ConversationView;
}

/**
 * The open conversation as the UI shows it, built from the thread and the
 * tasks' states, and emitted at most once a frame: a WebSocket frame of 200
 * deltas changes the answer 200 times and the page paints it once, so it is
 * built and rendered once. Whatever changes asks for a view (invalidate);
 * the frame emits the state as it is then, so the last change is never lost,
 * only the ones a newer state already holds.
 */
export class ViewModel {
  readonly events = new Emitter<ViewModelEvents>();
  private frame: TimerHandle | null = null;
  /** The messages of the last view built, by key, to hand unchanged ones on as they were. */
  private readonly previous = new Map<string, ViewMessage>();
  private previousId = '';

  constructor(
    private readonly thread: Thread,
    private readonly tasks: TaskStates,
    private readonly platform: Platform,
  ) {}

  /** The view as it is now. */
  build(): ConversationView {
    const t = this.thread;
    if (t.id !== this.previousId) {
      this.previous.clear();
      this.previousId = t.id;
    }
    const all = buildMessages(t.messages, this.tasks.all);
    return {
      id: t.id,
      messages: keepUnchanged(this.previous, showPath(all, t.versions.map)),
      loaded: t.loaded,
      hasOlder: t.hasOlder,
      loadingOlder: t.loadingOlder,
      // Any answer in progress, on the path shown or on another version's.
      busy: all.some((m) => m.status === 'generating'),
      error: t.error,
    };
  }

  /** Something the view shows changed: a view goes out on the next frame, one however many changes come first. */
  invalidate(): void {
    if (this.frame !== null) return;
    this.frame = this.platform.requestFrame(() => {
      this.frame = null;
      this.events.emit('view', this.build());
    });
  }

  /** Whether a view waits for its frame. */
  get pending(): boolean {
    return this.frame !== null;
  }

  /** Drops the view waiting for its frame (the client stops). */
  stop(): void {
    if (this.frame !== null) this.platform.cancelFrame(this.frame);
    this.frame = null;
  }
}
