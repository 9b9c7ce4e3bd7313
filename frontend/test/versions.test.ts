import { describe, expect, it } from 'vitest';
import { leafAndNewest, parentKeyOf, pickPath, ROOT, turnsOf, type TurnMessage } from '../src/lib/versions';

/** Two messages per turn, as history has them. */
function turns(...spec: Array<[string, string | null | undefined]>): TurnMessage[] {
  return spec.flatMap(([id, parent]) => [
    { role: 'user' as const, task_id: id, parent_task_id: parent },
    { role: 'assistant' as const, task_id: id, parent_task_id: parent },
  ]);
}

describe('versions', () => {
  // a -> b; b regenerated as c; a edited as d; e follows b.
  const msgs = turns(['a', null], ['b', 'a'], ['c', 'a'], ['d', null], ['e', 'b']);

  it('shows the newest version at each turn by default', () => {
    const { path, versions } = pickPath(msgs, new Map());
    expect(path).toEqual(['d']);
    expect(versions.get('d')).toEqual({ index: 2, count: 2, prev: 'a', next: null });
  });

  it('follows the versions chosen', () => {
    const chosen = new Map([[ROOT, 'a']]);
    expect(pickPath(msgs, chosen).path).toEqual(['a', 'c']);
    chosen.set('a', 'b');
    const { path, versions } = pickPath(msgs, chosen);
    expect(path).toEqual(['a', 'b', 'e']);
    expect(versions.get('b')).toEqual({ index: 1, count: 2, prev: null, next: 'c' });
    expect(versions.get('e')).toEqual({ index: 1, count: 1, prev: null, next: null });
    expect(leafAndNewest(msgs, chosen)).toEqual({ leaf: 'e', newest: 'e' });
    chosen.set('a', 'c');
    expect(leafAndNewest(msgs, chosen)).toEqual({ leaf: 'c', newest: 'e' });
  });

  it('a turn whose parent is not loaded starts the path; an older server says nothing and turns are a line', () => {
    expect(turnsOf(turns(['x', 'unloaded'], ['y', 'x'])).map((t) => t.parentKey)).toEqual([ROOT, 'x']);
    expect(pickPath(turns(['p', undefined], ['q', undefined], ['r', undefined]), new Map()).path).toEqual(['p', 'q', 'r']);
    expect(parentKeyOf(msgs, 'c')).toBe('a');
  });
});
