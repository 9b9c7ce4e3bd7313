import type { KeyValue } from './storage';
import { StorageKeys } from './storage';

/**
 * The colour theme the user chose: the system's (the default), or light or
 * dark whatever the system says. Kept in localStorage and applied as
 * `data-theme` on <html> before the UI draws (main.ts); the stylesheet's
 * colours follow `color-scheme`, which that attribute sets.
 */
export type Theme = 'system' | 'light' | 'dark';

export const themes: readonly Theme[] = ['system', 'light', 'dark'];

/** The choice after this one, as the theme button cycles: System → Light → Dark → System. */
export function nextTheme(t: Theme): Theme {
  return themes[(themes.indexOf(t) + 1) % themes.length]!;
}

/** What a stored value means; anything unknown (or nothing) is the system's theme. */
export function parseTheme(v: string | null | undefined): Theme {
  return themes.includes(v as Theme) ? (v as Theme) : 'system';
}

/** The stored choice; storage that cannot be read means the system's. */
export function readTheme(kv: KeyValue | null): Theme {
  try {
    return parseTheme(kv?.getItem(StorageKeys.theme));
  } catch {
    return 'system';
  }
}

/** Keeps the choice; the system's is kept as no entry at all. Storage that refuses is ignored. */
export function saveTheme(kv: KeyValue | null, t: Theme): void {
  try {
    if (t === 'system') kv?.removeItem(StorageKeys.theme);
    else kv?.setItem(StorageKeys.theme, t);
  } catch {
    /* the choice lasts until the page closes */
  }
}

/** The button's words: what the theme is now, and what a press does. */
export function themeLabel(t: Theme): { name: string; now: string } {
  const now = t === 'system' ? 'Theme: system' : t === 'light' ? 'Theme: light' : 'Theme: dark';
  const next = nextTheme(t);
  return { now, name: `${now}. Switch to ${next === 'system' ? 'the system theme' : next}` };
}
