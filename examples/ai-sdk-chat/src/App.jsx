// A chat page on the AI SDK's useChat, with Tether as its backend: the answer
// runs on the server, so F5, a second tab or a killed runner only reconnect.
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';
import { useEffect, useRef, useState } from 'react';

// The gateway: ?gateway=... wins, else VITE_TETHER_URL at build time.
const params = new URLSearchParams(location.search);
const GATEWAY = (params.get('gateway') || import.meta.env.VITE_TETHER_URL || 'http://localhost:8080').replace(/\/+$/, '');
const chatURL = (chatId, what) => `${GATEWAY}/v1/chat/${encodeURIComponent(chatId)}/${what}`;

// crypto.randomUUID exists only on https and localhost pages.
const uuid = () =>
  crypto.randomUUID?.() ??
  '10000000-1000-4000-8000-100000000000'.replace(/[018]/g, (c) => (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16));

// The chat id lives in the URL, so F5 and a second tab open the same chat.
function chatIdFromURL() {
  const id = params.get('chat') || uuid();
  const url = new URL(location.href);
  url.searchParams.set('chat', id);
  history.replaceState(null, '', url);
  return id;
}

// The history as the server has it. A trailing answer that is still being
// written is left out: the resumed stream replays it from its start.
async function loadHistory(chatId) {
  const res = await fetch(chatURL(chatId, 'messages'), { credentials: 'include' });
  if (!res.ok) throw new Error(`GET /messages: ${res.status} ${await res.text()}`);
  const messages = await res.json();
  const last = messages.at(-1);
  const running = last?.role === 'assistant' && last.metadata?.status === 'generating';
  return { messages: running ? messages.slice(0, -1) : messages, running };
}

// GET .../stream answers 204 when nothing runs; onIdle hears of it.
class TetherChatTransport extends DefaultChatTransport {
  constructor({ onIdle, ...options }) {
    super(options);
    this.onIdle = onIdle;
  }
  async reconnectToStream(options) {
    const stream = await super.reconnectToStream(options);
    if (stream === null) this.onIdle();
    return stream;
  }
}

export default function App() {
  const [chatId] = useState(chatIdFromURL);
  const [history, setHistory] = useState(null);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    loadHistory(chatId).then(setHistory, setHistory);
  }, [chatId, attempt]);

  if (history === null) return <Frame chatId={chatId}><p className="hint">Loading…</p></Frame>;
  if (history instanceof Error)
    return (
      <Frame chatId={chatId}>
        <p className="hint" data-testid="status" data-status="error">Cannot reach the gateway at {GATEWAY}: {history.message}</p>
        <button onClick={() => (setHistory(null), setAttempt((n) => n + 1))}>Try again</button>
      </Frame>
    );
  return <Chat chatId={chatId} initial={history.messages} answerWasRunning={history.running} />;
}

function Chat({ chatId, initial, answerWasRunning }) {
  const idle = useRef(() => undefined);
  const [transport] = useState(() => new TetherChatTransport({ api: `${GATEWAY}/v1/chat`, credentials: 'include', onIdle: () => idle.current() }));
  const { messages, setMessages, sendMessage, status, error, stop, resumeStream } = useChat({
    id: chatId,
    messages: initial,
    resume: true, // on mount: GET {api}/{chatId}/stream
    transport,
    generateId: uuid, // a user message's id is its task id on the server
  });
  const [input, setInput] = useState('');
  const [stopped, setStopped] = useState(() => new Set());
  const busy = status === 'submitted' || status === 'streaming';

  // /messages showed an answer running, but /stream found none: it ended in
  // between. Take the finished history, unless the user has sent since.
  useEffect(() => {
    idle.current = () => {
      idle.current = () => undefined;
      if (answerWasRunning) loadHistory(chatId).then((h) => setMessages((now) => (now.length === initial.length ? h.messages : now)));
    };
  }, [chatId, answerWasRunning, initial, setMessages]);

  // Keep the newest text in view while the reader is at the bottom.
  const stick = useRef(true);
  useEffect(() => {
    const onScroll = () => (stick.current = innerHeight + scrollY >= document.documentElement.scrollHeight - 80);
    addEventListener('scroll', onScroll, { passive: true });
    return () => removeEventListener('scroll', onScroll);
  }, []);
  useEffect(() => {
    if (stick.current) scrollTo(0, document.documentElement.scrollHeight);
  }, [messages]);

  function onSubmit(e) {
    e.preventDefault();
    if (!input.trim() || busy) return;
    sendMessage({ text: input });
    setInput('');
  }

  // stop() only closes this page's fetch; the cancel ends the task on the server.
  async function onStop() {
    const last = messages.at(-1);
    if (last?.role === 'assistant') setStopped((s) => new Set(s).add(last.id));
    const cancel = fetch(chatURL(chatId, 'cancel'), { method: 'POST', credentials: 'include' }).then((r) => r.json()); // {cancelled: [task ids]}
    await Promise.all([stop(), cancel.catch(() => undefined)]);
  }

  return (
    <Frame chatId={chatId}>
      <ol className="messages">
        {messages.length === 0 && (
          <li className="hint">
            Try <code>/stream 300 30</code>, then press F5 while it streams, or open this page in a second tab.
          </li>
        )}
        {messages.map((m) => (
          <Message key={m.id} message={m} stopped={stopped.has(m.id)} />
        ))}
      </ol>
      <form className="composer" onSubmit={onSubmit}>
        <p className="status" data-testid="status" data-status={status} role="status">
          {status === 'error' ? `Error: ${error?.message}` : { ready: 'Ready', submitted: 'Waiting for the answer…', streaming: 'Answering…' }[status]}
          {status === 'error' && (
            <button type="button" className="link" onClick={() => resumeStream()}>
              Reconnect
            </button>
          )}
        </p>
        <div className="row">
          <input data-testid="input" value={input} onChange={(e) => setInput(e.target.value)} placeholder="Message" aria-label="Message" autoFocus />
          <button data-testid="send" disabled={busy || !input.trim()}>
            Send
          </button>
          <button type="button" data-testid="stop" className="secondary" disabled={!busy} onClick={onStop}>
            Stop
          </button>
        </div>
      </form>
    </Frame>
  );
}

function Message({ message, stopped }) {
  const text = message.parts.map((p) => (p.type === 'text' ? p.text : '')).join('');
  const state = message.metadata?.status;
  const note = stopped || state === 'cancelled' ? 'Stopped' : state === 'failed' ? 'Failed' : null;
  return (
    <li className={`message ${message.role}`} data-testid="message" data-role={message.role} data-message-id={message.id}>
      <div className="who">{message.role === 'user' ? 'You' : 'Assistant'}</div>
      <div className="text" data-testid="message-text">
        {text}
      </div>
      {note && <div className="note">{note}</div>}
    </li>
  );
}

function Frame({ chatId, children }) {
  return (
    <main>
      <header>
        <h1>
          AI SDK chat <span>on Tether</span>
        </h1>
        <p>
          chat <code>{chatId.slice(0, 8)}</code> ·{' '}
          <a href={location.href} target="_blank" rel="noreferrer">
            open in another tab
          </a>
        </p>
      </header>
      {children}
    </main>
  );
}
