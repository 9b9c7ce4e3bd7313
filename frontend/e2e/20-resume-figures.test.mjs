// Scenario 20: resume exactness at many random cut points for the two
// section 11 APIs whose resume is not starting_after (scenario 19 covers
// Responses): Chat Completions, whose resume is the SDK's repeated POST with
// the same Idempotency-Key, and the AI SDK's UI message stream, whose resume
// is DefaultChatTransport.reconnectToStream (GET /v1/chat/{id}/stream) and a
// repeated sendMessages of the same message. Official clients only: the
// `openai` package and the `ai` package's DefaultChatTransport (from the
// example app's packages), in Node, no browser.
//
// Each cut: a stream read to a random point and aborted, then a new stream
// read to the end, which must give exactly the demo answer; one task per
// turn. It prints FIGURES lines: cut points exact, and the first-event
// latency of the resumed streams. 20b: regenerate makes a version that
// /messages follows, and the cancel endpoint stops a running answer.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import OpenAI from 'openai';
import { root, startSystem, streamText } from './harness.mjs';
import { pct, seeded } from './openai-helpers.mjs';

const { DefaultChatTransport } = await import(pathToFileURL(path.join(root, 'examples/ai-sdk-chat/node_modules/ai/dist/index.mjs')).href);

const { seed, randInt } = seeded();

const N = 150;
const want = streamText(N);
const ROUNDS = 5;
const CUTS = 11; // per round: 55 per API

/** Reads a UI chunk stream; stops after `limit` text deltas (then cancels) or at its end; first is the time from t0 to the first text. */
async function readUI(stream, limit = Infinity, t0 = performance.now()) {
  const reader = stream.getReader();
  const chunks = [];
  let deltas = 0;
  let first = null;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      chunks.push(value);
      if (value.type === 'text-delta') {
        first ??= performance.now() - t0;
        if (++deltas >= limit) break;
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return { chunks, text: chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta).join(''), first };
}

test('20. resume exactness: Chat Completions re-posted and the AI SDK transport reconnecting, at random cut points', { timeout: 240_000 }, async () => {
  const sys = await startSystem('20-resume-figures');
  try {
    const key = `key-${crypto.randomUUID()}`;
    const client = new OpenAI({ baseURL: `${sys.base}/v1`, apiKey: key, maxRetries: 0 });
    const figures = { chat: { cuts: 0, exact: 0, first: [] }, ui: { cuts: 0, exact: 0, first: [] } };

    // Chat Completions: every cut is a stream aborted after k chunks, then
    // the same POST with the same key read to the end.
    for (let round = 0; round < ROUNDS; round++) {
      const idem = `cc-${crypto.randomUUID()}`;
      const body = { model: 'demo', messages: [{ role: 'user', content: `/stream ${N} 8` }], stream: true };
      // openai 6.49 sends no Idempotency-Key of its own (its idempotencyKey option is unused by this client): a header it is.
      const opts = { headers: { 'Idempotency-Key': idem } };
      await Promise.all(
        Array.from({ length: CUTS }, async () => {
          const k = randInt(1, N);
          const first = await client.chat.completions.create(body, opts);
          let got = '';
          let n = 0;
          for await (const c of first) {
            got += c.choices[0]?.delta?.content ?? '';
            if (++n >= k) break; // breaking out of the loop aborts the request
          }
          const t0 = performance.now();
          const again = await client.chat.completions.create(body, opts);
          let text = '';
          let firstAt = null;
          let finish = null;
          for await (const c of again) {
            if (c.choices[0]?.delta?.content) firstAt ??= performance.now() - t0;
            text += c.choices[0]?.delta?.content ?? '';
            finish = c.choices[0]?.finish_reason ?? finish;
          }
          figures.chat.cuts++;
          if (firstAt != null) figures.chat.first.push(firstAt);
          assert.ok(want.startsWith(got), `the cut stream's text is a prefix of the answer`);
          assert.equal(text, want, `re-posted after ${k} chunks: the whole answer`);
          assert.equal(finish, 'stop');
          figures.chat.exact++;
        }),
      );
      // One task per key, whatever the cuts.
      const [[n]] = await sys.rows(`SELECT count(*) FROM tasks WHERE preamble->>'api' = 'chat.completions'`);
      assert.equal(Number(n), round + 1, `one task per key after round ${round + 1}`);
    }

    // The UI message stream: sendMessages starts the answer; each cut is a
    // reconnect read to a random point and aborted, then a reconnect (or a
    // repeated sendMessages of the same message) read to the end.
    const transport = new DefaultChatTransport({ api: `${sys.base}/v1/chat`, headers: { Authorization: `Bearer ${key}` } });
    for (let round = 0; round < ROUNDS; round++) {
      const chatId = crypto.randomUUID();
      const message = { id: `m-${crypto.randomUUID().slice(0, 8)}`, role: 'user', parts: [{ type: 'text', text: `/stream ${N} 8` }] };
      const send = (signal) => transport.sendMessages({ chatId, messages: [message], trigger: 'submit-message', messageId: undefined, abortSignal: signal });
      const started = await readUI(await send(undefined), 3);
      assert.deepEqual(started.chunks.slice(0, 3).map((c) => c.type), ['start', 'start-step', 'text-start']);
      const messageId = started.chunks[0].messageId;
      await Promise.all(
        Array.from({ length: CUTS }, async (_, i) => {
          const k = randInt(1, N);
          const cut = await transport.reconnectToStream({ chatId });
          const partial = cut ? await readUI(cut, k) : { text: want };
          assert.ok(want.startsWith(partial.text), 'a cut replay is a prefix of the answer');
          const t0 = performance.now();
          // Alternate the two resumes the SDK makes: reconnect after F5,
          // and the same message sent again.
          const resumed = i % 2 === 0 ? await transport.reconnectToStream({ chatId }) : await send(undefined);
          figures.ui.cuts++;
          if (resumed === null) {
            // Finished meanwhile (204): the answer is in the history.
            const msgs = await (await fetch(`${sys.base}/v1/chat/${chatId}/messages`, { headers: { Authorization: `Bearer ${key}` } })).json();
            assert.equal(msgs.at(-1).parts[0].text, want);
            figures.ui.exact++;
            return;
          }
          const full = await readUI(resumed, Infinity, t0);
          if (full.first != null) figures.ui.first.push(full.first);
          assert.equal(full.chunks[0].type, 'start');
          assert.equal(full.chunks[0].messageId, messageId, 'the replay names the same assistant message');
          assert.equal(full.text, want, `resumed after ${k} deltas: the whole answer`);
          assert.deepEqual(full.chunks.slice(-3).map((c) => c.type), ['text-end', 'finish-step', 'finish']);
          figures.ui.exact++;
        }),
      );
      assert.equal(await transport.reconnectToStream({ chatId }), null, 'GET …/stream is 204 once the answer ended');
      const [[n]] = await sys.rows(`SELECT count(*) FROM tasks WHERE conversation_id = '${chatId}'`);
      assert.equal(Number(n), 1, 'one task for the turn, however often it was resumed or sent again');
    }

    for (const [api, f] of Object.entries(figures)) {
      console.log(
        `FIGURES resume-exactness ${api}: ${f.exact}/${f.cuts} cut points exact (seed ${seed}); ` +
          `resumed stream to first text: p50 ${pct(f.first, 50)?.toFixed(1)} ms, p99 ${pct(f.first, 99)?.toFixed(1)} ms over ${f.first.length}`,
      );
      assert.ok(f.cuts >= 50, `${api}: at least 50 cut points`);
      assert.equal(f.exact, f.cuts);
    }
  } finally {
    await sys.stop();
  }
});

test('20b. the AI SDK transport: regenerate makes a version, /messages follows it, stop is the cancel endpoint', { timeout: 120_000 }, async () => {
  const sys = await startSystem('20b-regenerate');
  try {
    const key = `key-${crypto.randomUUID()}`;
    const auth = { Authorization: `Bearer ${key}` };
    const transport = new DefaultChatTransport({ api: `${sys.base}/v1/chat`, headers: auth });
    const chatId = `chat-${crypto.randomUUID().slice(0, 8)}`; // not a UUID: the server derives one
    const user = { id: 'u1', role: 'user', parts: [{ type: 'text', text: '/stream 20 2' }] };
    const first = await readUI(await transport.sendMessages({ chatId, messages: [user], trigger: 'submit-message', messageId: undefined }));
    assert.equal(first.text, streamText(20));
    const answerId = first.chunks[0].messageId;

    // The SDK's regenerate: the messages up to the user message, and the
    // id of the answer it replaces.
    const again = await readUI(
      await transport.sendMessages({ chatId, messages: [user], trigger: 'regenerate-message', messageId: answerId }),
    );
    assert.equal(again.text, streamText(20));
    assert.notEqual(again.chunks[0].messageId, answerId, 'the new version is another answer');
    const msgs = await (await fetch(`${sys.base}/v1/chat/${chatId}/messages`, { headers: auth })).json();
    assert.deepEqual(
      msgs.map((m) => [m.role, m.parts[0].text]),
      [['user', '/stream 20 2'], ['assistant', streamText(20)]],
      'the current path: one turn, its newest version',
    );
    assert.equal(msgs[1].id, again.chunks[0].messageId, '/messages names the answer as its stream did');
    const rows = await sys.rows(`SELECT count(*), count(DISTINCT conversation_id) FROM tasks`);
    assert.deepEqual(rows, [['2', '1']], 'two versions, one conversation');

    // A running answer: /messages has it with its text so far and its status;
    // cancel ends it (the SDK's stop() alone only closes the fetch).
    const next = { id: 'u2', role: 'user', parts: [{ type: 'text', text: '/stream 400 20' }] };
    const running = await transport.sendMessages({ chatId, messages: [user, msgs[1], next], trigger: 'submit-message', messageId: undefined });
    const partial = await readUI(running, 5);
    const live = await (await fetch(`${sys.base}/v1/chat/${chatId}/messages`, { headers: auth })).json();
    const dump = async () => JSON.stringify(await sys.rows(`SELECT role, task_id, parent_task_id, created_at FROM messages ORDER BY created_at, id`));
    assert.deepEqual(live.map((m) => m.id).slice(0, 2), [msgs[0].id, msgs[1].id], `the new turn follows the newest version: ${await dump()}`);
    assert.equal(live.at(-1).metadata.status, 'generating');
    assert.ok(streamText(400).startsWith(live.at(-1).parts[0].text), 'the running answer has its text so far');
    assert.ok(partial.text.length > 0);
    const cancel = await fetch(`${sys.base}/v1/chat/${chatId}/cancel`, { method: 'POST', headers: auth });
    assert.equal(cancel.status, 200);
    assert.equal((await cancel.json()).cancelled.length, 1);
    const [[status]] = await sys.rows(`SELECT status FROM tasks WHERE input = '/stream 400 20'`);
    assert.equal(status, 'cancelled');
    assert.equal(await transport.reconnectToStream({ chatId }), null, 'nothing runs: 204');

    // A chat the server does not have yet, sent with earlier messages (an
    // app moving to Tether mid-conversation): they become the task's
    // context; in a chat the server has, its own history is.
    const fresh = crypto.randomUUID();
    const earlier = [
      { id: 'e1', role: 'user', parts: [{ type: 'text', text: 'earlier question' }] },
      { id: 'e2', role: 'assistant', parts: [{ type: 'text', text: 'earlier answer' }] },
    ];
    const now = { id: 'e3', role: 'user', parts: [{ type: 'text', text: '/stream 2 0' }] };
    const moved = await readUI(await transport.sendMessages({ chatId: fresh, messages: [...earlier, now], trigger: 'submit-message', messageId: undefined }));
    assert.equal(moved.text, streamText(2));
    assert.deepEqual(
      await sys.rows(`SELECT preamble->'items'->0->>'text', preamble->'items'->1->>'role', jsonb_array_length(preamble->'items') FROM tasks WHERE conversation_id = '${fresh}'`),
      [['earlier question', 'assistant', '2']],
    );
  } finally {
    await sys.stop();
  }
});
