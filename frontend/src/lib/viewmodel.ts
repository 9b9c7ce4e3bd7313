import { Emitter } from './emitter';
import type { TaskStates } from './tasks';
import type { Thread } from './thread';
import { buildMessages, showPath, type ViewMessage } from './view';

/** The open conversation, ready to render. */
export interface ConversationView {
  id: string;
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

/** The open conversation as the UI shows it, built from the thread and the tasks' states. */
export class ViewModel {
  readonly events = new Emitter<ViewModelEvents>();

  constructor(
    private readonly thread: Thread,
    private readonly tasks: TaskStates,
  ) {}

  /** The view as it is now. */
  build(): ConversationView {
    const t = this.thread;
    const all = buildMessages(t.messages, this.tasks.all);
    return {
      id: t.id,
      messages: showPath(all, t.versions.map),
      loaded: t.loaded,
      hasOlder: t.hasOlder,
      loadingOlder: t.loadingOlder,
      // Any answer in progress, on the path shown or on another version's.
      busy: all.some((m) => m.status === 'generating'),
      error: t.error,
    };
  }

  /** Something the view shows changed: a view goes out. */
  invalidate(): void {
    this.events.emit('view', this.build());
  }

  stop(): void {}
}
