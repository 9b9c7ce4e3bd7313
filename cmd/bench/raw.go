package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"

	"github.com/tether-dev/tether/internal/profiling"
)

// The raw baselines: the least a WebSocket server on the same library does
// for the same work, in a process of its own so its CPU and memory are
// measured the same way as the gateway's.
//
//   - /broadcast?subject=S: the coder/websocket chat example fed by NATS: one
//     core subscription per subject, each message sent to every client's
//     channel and written by the client's goroutine, one frame per message,
//     with a per-write timeout; CloseRead keeps reading control frames.
//   - /idle: a bare read loop, one goroutine per connection.
//   - /hello: one small frame on connect (as a snapshot would be), then a
//     bare read loop: "connect + first frame".

// rawClientBuffer is each client's channel: large enough that a burst of
// the flat-out run is never dropped (the chat example's 16 would close
// every client at once).
const rawClientBuffer = 1 << 14

func serveRaw(natsURL, listen, pprofAddr string) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if pprofAddr != "" {
		prof, err := profiling.Start(pprofAddr, log)
		if err != nil {
			return err
		}
		defer prof.Close()
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return fmt.Errorf("raw: connect to NATS: %w", err)
	}
	defer nc.Close()
	h := &rawHub{nc: nc, topics: map[string]*rawTopic{}}

	mux := http.NewServeMux()
	mux.HandleFunc("/broadcast", h.serveBroadcast)
	mux.HandleFunc("/idle", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		readUntilClosed(r.Context(), c)
	})
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		wctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		err = c.Write(wctx, websocket.MessageText, []byte(`{"type":"hello"}`))
		cancel()
		if err != nil {
			return
		}
		readUntilClosed(r.Context(), c)
	})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("raw listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// readUntilClosed is the bare read loop.
func readUntilClosed(ctx context.Context, c *websocket.Conn) {
	for {
		_, r, err := c.Reader(ctx)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			return
		}
	}
}

type rawHub struct {
	nc     *nats.Conn
	mu     sync.Mutex
	topics map[string]*rawTopic
}

type rawTopic struct {
	sub     *nats.Subscription
	clients map[*rawClient]struct{}
}

type rawClient struct {
	msgs      chan []byte
	closeSlow func()
}

func (h *rawHub) serveBroadcast(w http.ResponseWriter, r *http.Request) {
	subject := r.URL.Query().Get("subject")
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	cl := &rawClient{msgs: make(chan []byte, rawClientBuffer), closeSlow: func() {
		c.Close(websocket.StatusPolicyViolation, "connection too slow to keep up with messages")
	}}
	if err := h.add(subject, cl); err != nil {
		return
	}
	defer h.remove(subject, cl)
	// Subscribed: say so, as Tether's snapshot does.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = c.Write(wctx, websocket.MessageText, []byte(`{"type":"ready"}`))
	cancel()
	if err != nil {
		return
	}
	for {
		select {
		case msg := <-cl.msgs:
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.Write(wctx, websocket.MessageText, msg)
			cancel()
			if err != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func (h *rawHub) add(subject string, cl *rawClient) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[subject]
	if t == nil {
		t = &rawTopic{clients: map[*rawClient]struct{}{}}
		sub, err := h.nc.Subscribe(subject, func(m *nats.Msg) { h.publish(subject, m.Data) })
		if err != nil {
			return err
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			return err
		}
		t.sub = sub
		h.topics[subject] = t
	}
	t.clients[cl] = struct{}{}
	return h.nc.Flush()
}

func (h *rawHub) remove(subject string, cl *rawClient) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[subject]
	if t == nil {
		return
	}
	delete(t.clients, cl)
	if len(t.clients) == 0 {
		_ = t.sub.Unsubscribe()
		delete(h.topics, subject)
	}
}

// publish is the chat example's: a non-blocking send to every client.
func (h *rawHub) publish(subject string, msg []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[subject]
	if t == nil {
		return
	}
	for cl := range t.clients {
		select {
		case cl.msgs <- msg:
		default:
			go cl.closeSlow()
		}
	}
}
