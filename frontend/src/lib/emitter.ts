/** A minimal typed event emitter: the library's only observer mechanism. */
export class Emitter<Events extends Record<string, unknown>> {
  private readonly handlers = new Map<keyof Events, Set<(payload: never) => void>>();

  /** Adds a handler; the returned function removes it. */
  on<K extends keyof Events>(event: K, handler: (payload: Events[K]) => void): () => void {
    let set = this.handlers.get(event);
    if (!set) {
      set = new Set();
      this.handlers.set(event, set);
    }
    set.add(handler as (payload: never) => void);
    return () => set.delete(handler as (payload: never) => void);
  }

  /**
   * Calls every handler synchronously, in the order they were added. A handler
   * that throws is reported and does not stop the others: one broken view must
   * not stall the stream for the rest.
   */
  emit<K extends keyof Events>(event: K, payload: Events[K]): void {
    const set = this.handlers.get(event);
    if (!set) return;
    for (const h of [...set]) {
      try {
        (h as (p: Events[K]) => void)(payload);
      } catch (err) {
        console.error(`tether: ${String(event)} handler failed`, err);
      }
    }
  }
}
