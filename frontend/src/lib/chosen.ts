import { leafAndNewest, parentKeyOf, type TurnMessage } from './versions';

/** Where a new turn goes (docs/protocol.md, "Versions"); empty: after the newest turn, the server's default. */
export interface Placement {
  version_of?: string;
  parent_task_id?: string;
}

/**
 * The versions the open conversation shows: at each turn the one chosen in
 * this tab (by the parent key of the turn it follows), else the newest
 * (versions.ts has the pure functions over the turns). A new version
 * becomes the one shown; a new message follows the turn shown last, which
 * is not the newest written when an older version is on screen.
 */
export class ChosenVersions {
  private chosen = new Map<string, string>();

  get map(): ReadonlyMap<string, string> {
    return this.chosen;
  }

  clear(): void {
    this.chosen = new Map();
  }

  /** Shows the version taskId of its turn. */
  show(messages: readonly TurnMessage[], taskId: string): void {
    this.chosen.set(parentKeyOf(messages, taskId), taskId);
  }

  /**
   * Where the new turn id goes: as another version of versionOf (and shown
   * in its place), else after the last turn shown when that is not the
   * newest one written.
   */
  place(messages: readonly TurnMessage[], id: string, versionOf: string | undefined): Placement {
    if (versionOf) {
      this.chosen.set(parentKeyOf(messages, versionOf), id);
      return { version_of: versionOf };
    }
    const { leaf, newest } = leafAndNewest(messages, this.chosen);
    return leaf && leaf !== newest ? { parent_task_id: leaf } : {};
  }
}
