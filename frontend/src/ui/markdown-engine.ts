import DOMPurify from 'dompurify';
import MarkdownIt from 'markdown-it';

/**
 * The Markdown chunk, loaded the first time an answer is rendered:
 * markdown-it (CommonMark, with GFM tables, strikethrough, autolinks and,
 * below, task lists) and DOMPurify. HTML in an answer is allowed through
 * markdown-it and then sanitised; links open in a new tab with
 * rel="noopener noreferrer"; only http(s), mailto and relative URLs survive.
 * Images are shown as links (an image in an answer would load a URL the
 * model chose, a classic way to leak a conversation).
 */
const md = new MarkdownIt({ html: true, linkify: true, typographer: false });

// Task lists ("- [ ] todo", "- [x] done"): a checkbox at the start of the item.
md.core.ruler.after('inline', 'task-lists', (state) => {
  const tokens = state.tokens;
  for (let i = 2; i < tokens.length; i++) {
    const inline = tokens[i]!;
    if (inline.type !== 'inline' || tokens[i - 1]!.type !== 'paragraph_open' || tokens[i - 2]!.type !== 'list_item_open') continue;
    const first = inline.children?.[0];
    const m = first?.type === 'text' ? /^\[([ xX])\]\s/.exec(first.content) : null;
    if (!first || !m) continue;
    first.content = first.content.slice(m[0].length);
    const box = new state.Token('html_inline', '', 0);
    box.content = `<input type="checkbox" disabled${m[1] === ' ' ? '' : ' checked'}> `;
    inline.children!.unshift(box);
    tokens[i - 2]!.attrJoin('class', 'task-item');
  }
});

md.renderer.rules.image = (tokens, idx) => {
  const t = tokens[idx]!;
  const src = String(t.attrGet('src') ?? '');
  const label = md.utils.escapeHtml(t.content || src);
  return `<a href="${md.utils.escapeHtml(src)}">${label}</a>`;
};

// Fences carry their language for the highlighter (class language-x, as CommonMark suggests).
md.options.highlight = null;

const allowedTags = [
  'a', 'abbr', 'b', 'blockquote', 'br', 'code', 'del', 'details', 'div', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
  'hr', 'i', 'input', 'kbd', 'li', 'mark', 'ol', 'p', 'pre', 's', 'span', 'strong', 'sub', 'summary', 'sup',
  'table', 'tbody', 'td', 'tfoot', 'th', 'thead', 'tr', 'u', 'ul',
];
const allowedAttrs = ['href', 'title', 'class', 'type', 'checked', 'disabled', 'start', 'align', 'colspan', 'rowspan', 'open'];
const safeUrl = /^(?:https?:|mailto:|#|\/(?!\/)|\.{0,2}\/|[^:/?#]*(?:[/?#]|$))/i;

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.nodeName === 'A') {
    const href = node.getAttribute('href');
    if (href !== null && !safeUrl.test(href.trim())) node.removeAttribute('href');
    node.setAttribute('target', '_blank');
    node.setAttribute('rel', 'noopener noreferrer');
  } else if (node.nodeName === 'INPUT') {
    if (node.getAttribute('type') !== 'checkbox') node.remove();
    else node.setAttribute('disabled', '');
  }
  // Classes are ours only: a language on code, the task-list marker.
  const cls = node.getAttribute('class');
  if (cls !== null) {
    const kept = cls.split(/\s+/).filter((c) => /^language-[\w+#.-]+$/.test(c) || c === 'task-item');
    if (kept.length) node.setAttribute('class', kept.join(' '));
    else node.removeAttribute('class');
  }
});

/** The HTML of each top-level block of source, in order (not yet sanitised). */
export function renderBlocks(source: string): string[] {
  const env = {};
  const tokens = md.parse(source, env);
  const out: string[] = [];
  let start = 0;
  let depth = 0;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    depth += t.nesting;
    if (depth === 0) {
      // Without the line break markdown-it ends a block with: a block's text is its words.
      out.push(md.renderer.render(tokens.slice(start, i + 1), md.options, env).trimEnd());
      start = i + 1;
    }
  }
  return out;
}

/** Sanitised DOM of one block's HTML. */
export function sanitize(html: string): DocumentFragment {
  return DOMPurify.sanitize(html, {
    ALLOWED_TAGS: allowedTags,
    ALLOWED_ATTR: allowedAttrs,
    ALLOW_DATA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  });
}
