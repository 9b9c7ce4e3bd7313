import { placement } from './storage';
import type { Submits } from './submits';
import type { Subscriptions } from './subscription';
import type { SyncMessage } from './tabsync';
import type { TaskStates } from './tasks';

/**
 * What another tab of this browser did (tabsync.ts carries it), shown here
 * at once rather than after the server's round trip, or at all while this
 * tab is disconnected: a submit or a retry shows its messages and is
 * followed; a cancel shows as stopping.
 */
export class OtherTabs {
  constructor(
    private readonly tasks: TaskStates,
    private readonly submits: Submits,
    private readonly subscriptions: Subscriptions,
  ) {}

  receive(m: SyncMessage): void {
    if (m.kind === 'cancel') {
      const s = this.tasks.get(m.task_id);
      if (s) {
        s.cancelling = true;
        this.tasks.changed(s);
      }
      return;
    }
    const s = this.tasks.of(m.task_id, m.conversation_id);
    s.content = m.content;
    s.localError = undefined;
    if (m.kind === 'retry') s.task = undefined;
    if (!s.task) s.sending = true;
    this.submits.show({ task_id: m.task_id, conversation_id: m.conversation_id, content: m.content, ...(m.attachments?.length ? { attachments: m.attachments } : {}), ...placement(m) }, true);
    // Subscribe; if it has not reached the server yet, the shared pending record makes
    // this tab send the same submit (same id), which the server deduplicates.
    if (this.subscriptions.get(m.task_id)) this.subscriptions.resubscribe(m.task_id, 'other tab');
    else this.subscriptions.follow(m.task_id);
  }
}
