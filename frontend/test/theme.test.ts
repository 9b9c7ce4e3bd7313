import { describe, expect, it } from 'vitest';
import { StorageKeys, type KeyValue } from '../src/lib/storage';
import { nextTheme, parseTheme, readTheme, saveTheme, themeLabel } from '../src/lib/theme';

function memory(): KeyValue & { map: Map<string, string> } {
  const map = new Map<string, string>();
  return { map, getItem: (k) => map.get(k) ?? null, setItem: (k, v) => void map.set(k, v), removeItem: (k) => void map.delete(k) };
}

describe('theme', () => {
  it('cycles System, Light, Dark', () => {
    expect(nextTheme('system')).toBe('light');
    expect(nextTheme('light')).toBe('dark');
    expect(nextTheme('dark')).toBe('system');
  });

  it('reads anything unknown as the system theme', () => {
    expect(parseTheme(null)).toBe('system');
    expect(parseTheme('purple')).toBe('system');
    expect(parseTheme('dark')).toBe('dark');
  });

  it('keeps a choice and forgets it for the system theme', () => {
    const kv = memory();
    expect(readTheme(kv)).toBe('system');
    saveTheme(kv, 'dark');
    expect(kv.map.get(StorageKeys.theme)).toBe('dark');
    expect(readTheme(kv)).toBe('dark');
    saveTheme(kv, 'light');
    expect(readTheme(kv)).toBe('light');
    saveTheme(kv, 'system');
    expect(kv.map.has(StorageKeys.theme)).toBe(false);
    expect(readTheme(kv)).toBe('system');
  });

  it('survives storage that throws or is missing', () => {
    const broken: KeyValue = {
      getItem: () => {
        throw new Error('denied');
      },
      setItem: () => {
        throw new Error('full');
      },
      removeItem: () => {
        throw new Error('denied');
      },
    };
    expect(readTheme(broken)).toBe('system');
    expect(() => saveTheme(broken, 'dark')).not.toThrow();
    expect(readTheme(null)).toBe('system');
    expect(() => saveTheme(null, 'dark')).not.toThrow();
  });

  it('names the button by the choice and what a press does', () => {
    expect(themeLabel('system')).toEqual({ now: 'Theme: system', name: 'Theme: system. Switch to light' });
    expect(themeLabel('dark').name).toBe('Theme: dark. Switch to the system theme');
  });
});
