import type { HLJSApi, LanguageFn } from 'highlight.js';

/**
 * Syntax highlighting of code blocks with highlight.js, loaded when the
 * first code block needs it: the core, then each language the first time a
 * block names it (a chunk of its own each), so a conversation pays only for
 * the languages it shows. Unknown languages stay plain.
 */
const languages: Record<string, () => Promise<{ default: LanguageFn }>> = {
  bash: () => import('highlight.js/lib/languages/bash'),
  c: () => import('highlight.js/lib/languages/c'),
  cpp: () => import('highlight.js/lib/languages/cpp'),
  csharp: () => import('highlight.js/lib/languages/csharp'),
  css: () => import('highlight.js/lib/languages/css'),
  diff: () => import('highlight.js/lib/languages/diff'),
  go: () => import('highlight.js/lib/languages/go'),
  java: () => import('highlight.js/lib/languages/java'),
  javascript: () => import('highlight.js/lib/languages/javascript'),
  json: () => import('highlight.js/lib/languages/json'),
  kotlin: () => import('highlight.js/lib/languages/kotlin'),
  markdown: () => import('highlight.js/lib/languages/markdown'),
  php: () => import('highlight.js/lib/languages/php'),
  python: () => import('highlight.js/lib/languages/python'),
  ruby: () => import('highlight.js/lib/languages/ruby'),
  rust: () => import('highlight.js/lib/languages/rust'),
  sql: () => import('highlight.js/lib/languages/sql'),
  swift: () => import('highlight.js/lib/languages/swift'),
  typescript: () => import('highlight.js/lib/languages/typescript'),
  xml: () => import('highlight.js/lib/languages/xml'),
  yaml: () => import('highlight.js/lib/languages/yaml'),
};

const aliases: Record<string, string> = {
  sh: 'bash', shell: 'bash', zsh: 'bash', console: 'bash', 'c++': 'cpp', cs: 'csharp', 'c#': 'csharp',
  golang: 'go', js: 'javascript', jsx: 'javascript', mjs: 'javascript', ts: 'typescript', tsx: 'typescript',
  py: 'python', rb: 'ruby', rs: 'rust', kt: 'kotlin', md: 'markdown', html: 'xml', svg: 'xml', yml: 'yaml',
};

/** The language a fence names, if highlight.js is given it here. */
export function languageOf(name: string): string | null {
  const n = name.toLowerCase();
  const lang = aliases[n] ?? n;
  return lang in languages ? lang : null;
}

let core: Promise<HLJSApi> | null = null;
const loaded = new Map<string, Promise<void>>();

function load(lang: string): Promise<HLJSApi> {
  core ??= import('highlight.js/lib/core').then((m) => m.default);
  core.catch(() => (core = null));
  return core.then(async (hljs) => {
    let p = loaded.get(lang);
    if (!p) {
      p = languages[lang]!().then((m) => hljs.registerLanguage(lang, m.default));
      p.catch(() => loaded.delete(lang));
      loaded.set(lang, p);
    }
    await p;
    return hljs;
  });
}

/**
 * Highlights a <code class="language-x"> element whose text is final. The
 * text it had when asked is what gets highlighted; if it changed meanwhile,
 * nothing is done (a later call handles the new text).
 */
export function highlight(code: HTMLElement, lang: string): void {
  const text = code.textContent ?? '';
  void load(lang).then(
    (hljs) => {
      if (!code.isConnected || code.textContent !== text) return;
      // highlight.js escapes the text it is given; its output is spans of its own classes.
      code.innerHTML = hljs.highlight(text, { language: lang, ignoreIllegals: true }).value;
      code.classList.add('hljs');
      code.dataset.highlighted = 'true';
    },
    () => undefined,
  );
}
