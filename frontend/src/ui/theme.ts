import { nextTheme, parseTheme, readTheme, saveTheme, StorageKeys, themeLabel, type KeyValue, type Theme } from '../lib';
import { h } from './dom';
import { icon } from './icons';

/** The browser bar's colour for each theme (index.html has the system's pair). */
const barColour = { light: '#f7f7f5', dark: '#17181a' } as const;

/**
 * Applies a theme to the page: `data-theme` on <html> (the stylesheet's
 * colours follow it), and the browser bar's colour. The system's theme is
 * no attribute at all, so the stylesheet follows prefers-color-scheme.
 */
export function applyTheme(t: Theme, doc: Document = document): void {
  const root = doc.documentElement;
  if (t === 'system') delete root.dataset.theme;
  else root.dataset.theme = t;
  for (const m of doc.querySelectorAll<HTMLMetaElement>('meta[name="theme-color"]')) {
    const own = m.media.includes('dark') ? barColour.dark : barColour.light;
    m.content = t === 'system' ? own : barColour[t];
  }
}

const themeIcon = { system: 'monitor', light: 'sun', dark: 'moon' } as const;

/**
 * The header's theme button: each press goes System → Light → Dark →
 * System, kept in storage; its name says the theme now and what a press
 * does, and a live region says the new theme after a press. A choice made
 * in another tab applies here too.
 */
export class ThemeButton {
  readonly el: HTMLElement;
  private readonly button: HTMLButtonElement;
  private readonly said: HTMLElement;
  private theme: Theme;

  constructor(private readonly kv: KeyValue | null) {
    this.theme = readTheme(kv);
    this.button = h('button', { type: 'button', class: 'top-button theme-button', 'data-testid': 'theme-button' });
    this.said = h('span', { class: 'sr-only', role: 'status', 'data-testid': 'theme-announcer' });
    this.el = h('span', { class: 'theme' }, this.button, this.said);
    this.button.addEventListener('click', () => {
      this.theme = nextTheme(this.theme);
      saveTheme(this.kv, this.theme);
      applyTheme(this.theme);
      this.draw();
      this.said.textContent = themeLabel(this.theme).now;
    });
    window.addEventListener('storage', (ev) => {
      if (ev.key !== StorageKeys.theme && ev.key !== null) return;
      this.theme = ev.key === null ? 'system' : parseTheme(ev.newValue);
      applyTheme(this.theme);
      this.draw();
    });
    this.draw();
  }

  private draw(): void {
    const l = themeLabel(this.theme);
    this.button.dataset.theme = this.theme;
    this.button.setAttribute('aria-label', l.name);
    this.button.title = l.name;
    this.button.replaceChildren(icon(themeIcon[this.theme]));
  }
}
