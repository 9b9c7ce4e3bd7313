// Scenario 12: an answer is rendered Markdown while it streams (issue 11,
// item 1). The demo's /markdown answer arrives in chunks of a few bytes,
// split inside "**", inside a fence and inside a character; the page shows
// a heading, emphasis, inline code, a safe link, lists, a highlighted Go
// block with a copy button, and a table, and it renders incrementally: the
// heading's element, made while the answer had just begun, is the same one
// at the end. Copy buttons copy the code and the whole answer. HTML and
// javascript: links in an answer are neutralised.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { T, answerText, demoMarkdown, openApp, scenario, sel, send, sendShown, threeShots, waitStatus } from './harness.mjs';

test('Markdown answers: rendered while streaming, incrementally, highlighted, copyable and safe', { timeout: 180_000 }, async (t) => {
  await scenario('12-markdown', {}, async ({ sys, newContext, shoot }) => {
    const context = await newContext();
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: sys.base });
    const page = await context.newPage();
    shoot(page);
    await openApp(page, sys.base);
    const expected = demoMarkdown();

    // Count every block the page puts into answers, to see that it does not redo them all per chunk.
    await page.evaluate(() => {
      window.__blocks = 0;
      new MutationObserver((muts) => {
        for (const m of muts) for (const n of m.addedNodes) if (n.nodeType === 1 && n.classList.contains('md-block')) window.__blocks++;
      }).observe(document.querySelector('[data-testid="message-list"]'), { subtree: true, childList: true });
    });

    const id = await send(page, '/markdown');
    const answer = `${sel.assistant}[data-task-id="${id}"]`;
    // Early in the stream: the heading is rendered (as a heading, not "## Heading").
    await page.waitForFunction((s) => document.querySelector(s)?.textContent === 'Heading', `${answer} [data-testid="message-content"] h2`, { timeout: T.long });
    const early = await page.$(`${answer} [data-testid="message-content"] h2`);
    await page.evaluate((h2) => (window.__heading = h2), early);
    const statusEarly = await page.getAttribute(answer, 'data-status');
    assert.equal(statusEarly, 'generating', 'the heading was rendered while the answer streamed');
    // Mid-stream the bold text is rendered as soon as its closing ** is in.
    await page.waitForSelector(`${answer} strong`, { timeout: T.long });

    await waitStatus(page, id, 'done');
    assert.equal(await answerText(page, id), expected, 'the exact Markdown source');
    const content = `${answer} [data-testid="message-content"]`;
    assert.equal(await page.textContent(`${content} h2`), 'Heading');
    assert.ok(await page.evaluate(() => window.__heading.isConnected && window.__heading === document.querySelector('[data-role="assistant"] [data-testid="message-content"] h2')), 'the heading element made early is still the one shown: blocks are not re-rendered');
    const blocks = await page.evaluate(() => window.__blocks);
    const chunks = await sys.sql(`SELECT seq FROM tasks WHERE id = '${id}'`);
    t.diagnostic(`${blocks} block renders for an answer of ${await page.locator(`${content} .md-block`).count()} blocks and ${chunks} events`);
    assert.ok(blocks < Number(chunks), `fewer block renders (${blocks}) than events (${chunks})`);

    assert.equal(await page.textContent(`${content} strong`), 'bold');
    assert.equal(await page.textContent(`${content} em`), 'italic');
    assert.equal(await page.textContent(`${content} p code`), 'inline code');
    const link = await page.$eval(`${content} a`, (a) => ({ href: a.getAttribute('href'), rel: a.getAttribute('rel'), target: a.getAttribute('target'), text: a.textContent }));
    assert.deepEqual(link, { href: 'https://example.com/tether', rel: 'noopener noreferrer', target: '_blank', text: 'Tether' });
    assert.match(await page.textContent(`${content} p`), /café, naïve, 👩‍💻 and 🇫🇷\./u, 'characters split between chunks are whole');
    assert.deepEqual(await page.$$eval(`${content} ul > li`, (els) => els.map((e) => e.textContent)), ['First item', 'Second item', 'Third item']);
    assert.deepEqual(await page.$$eval(`${content} ol > li`, (els) => els.map((e) => e.textContent)), ['One', 'Two']);
    assert.deepEqual(await page.$$eval(`${content} th`, (els) => els.map((e) => e.textContent)), ['Name', 'Value']);
    assert.deepEqual(await page.$$eval(`${content} tbody tr`, (rows) => rows.map((r) => [...r.children].map((c) => c.textContent))), [['alpha', '1'], ['beta', '2']]);
    assert.equal(await page.$eval(`${content} .md-block:last-child`, (b) => b.textContent.trim()), 'done.');

    // The Go block: its language, highlighted (the chunk for Go loads on demand), and a copy button.
    const code = `${content} [data-testid="code-block"][data-lang="go"] pre code`;
    await page.waitForSelector(`${code}[data-highlighted="true"] .hljs-keyword`, { timeout: T.short });
    const goSource = 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello, tether")\n}\n';
    assert.equal(await page.textContent(code), goSource);
    await page.click(`${content} [data-testid="copy-code"]`);
    await page.waitForSelector(`${content} [data-testid="copy-code"][data-copied="true"]`, { timeout: T.short });
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), goSource, 'the code block copied');
    await page.click(`${answer} [data-testid="copy-message"]`);
    await page.waitForSelector(`${answer} [data-testid="copy-message"][data-copied="true"]`, { timeout: T.short });
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), expected, 'the whole answer copied, as Markdown');

    await threeShots(page, '12-markdown', (p) => p.$eval(`${content} [data-testid="code-block"]`, (el) => el.scrollIntoView({ block: 'center' })));

    // Untrusted HTML and javascript: links in an answer do nothing. The demo quotes what it is sent.
    const evil = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> [click](javascript:window.__xss=3) <a href="javascript:window.__xss=4">a</a> <b onclick="window.__xss=5">b</b>';
    const bad = await sendShown(page, evil);
    await waitStatus(page, bad, 'done');
    const badContent = `${sel.assistant}[data-task-id="${bad}"] [data-testid="message-content"]`;
    await page.waitForSelector(`${badContent} .md-block`, { timeout: T.short });
    const found = await page.$eval(badContent, (el) => ({
      img: el.querySelectorAll('img').length,
      script: el.querySelectorAll('script').length,
      handlers: [...el.querySelectorAll('*')].filter((e) => [...e.attributes].some((a) => a.name.startsWith('on'))).length,
      js: [...el.querySelectorAll('a')].filter((a) => /^\s*javascript:/i.test(a.getAttribute('href') ?? '')).length,
    }));
    assert.deepEqual(found, { img: 0, script: 0, handlers: 0, js: 0 }, 'no image, script, handler or javascript: link survives');
    assert.equal(await page.evaluate(() => window.__xss ?? null), null, 'nothing ran');
    assert.equal(await page.textContent(`${sel.user}[data-task-id="${bad}"] [data-testid="message-content"]`), evil, 'the user message shows what was typed, as text');
  });
});
