// Command smoke checks a running Tether end to end, the way a browser tab
// uses it: it submits a /stream task over WebSocket, drops the connection in
// the middle of the answer, reconnects, re-subscribes, and verifies that the
// final output is exact with no gap and no repeated seq. It prints the
// timings it saw (submit to first delta, reconnect to snapshot).
//
//	go run ./cmd/smoke -url http://localhost:8080
//
// With -token it authenticates with a JWT (TETHER_AUTH_SECRET mode);
// otherwise it takes an anonymous session cookie like a browser.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "smoke:", err)
		os.Exit(1)
	}
}

type options struct {
	base      string
	token     string
	n, ms     int
	dropAfter int
	timeout   time.Duration
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fs.StringVar(&o.base, "url", "http://localhost:8080", "gateway base URL")
	fs.StringVar(&o.token, "token", "", "JWT for TETHER_AUTH_SECRET mode (default: anonymous cookie)")
	fs.IntVar(&o.n, "n", 200, "deltas to stream")
	fs.IntVar(&o.ms, "ms", 10, "milliseconds between deltas")
	fs.IntVar(&o.dropAfter, "drop-after", 50, "drop the connection after this many deltas")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	header, err := credentials(ctx, o)
	if err != nil {
		return err
	}
	taskID, convID := uuid4(), uuid4()
	content := fmt.Sprintf("/stream %d %d", o.n, o.ms)

	// First connection: submit, read part of the answer, drop.
	c, err := dial(ctx, o.base, header)
	if err != nil {
		return err
	}
	submitted := time.Now()
	if err := send(ctx, c, map[string]any{"type": "submit", "req": "s1", "task_id": taskID, "conversation_id": convID, "content": content}); err != nil {
		return err
	}
	st := &state{taskID: taskID}
	var firstDelta time.Duration
	for st.deltas < o.dropAfter && !st.terminal {
		m, err := read(ctx, c)
		if err != nil {
			return err
		}
		if err := st.apply(m); err != nil {
			return err
		}
		if firstDelta == 0 && st.deltas > 0 {
			firstDelta = time.Since(submitted)
		}
	}
	_ = c.CloseNow()
	fmt.Fprintf(stdout, "submitted %s, dropped the connection after %d deltas (seq %d)\n", taskID, st.deltas, st.seq)

	// Second connection: re-subscribe and follow to the end.
	reconnect := time.Now()
	c, err = dial(ctx, o.base, header)
	if err != nil {
		return err
	}
	defer c.CloseNow()
	if err := send(ctx, c, map[string]any{"type": "subscribe", "req": "s2", "task_id": taskID}); err != nil {
		return err
	}
	var toSnapshot time.Duration
	st.snapshots = 0
	for !st.terminal {
		m, err := read(ctx, c)
		if err != nil {
			return err
		}
		if err := st.apply(m); err != nil {
			return err
		}
		if toSnapshot == 0 && st.snapshots > 0 {
			toSnapshot = time.Since(reconnect)
		}
	}
	want := expected(o.n)
	if st.output != want {
		return fmt.Errorf("output differs: got %d bytes, want %d (status %s)", len(st.output), len(want), st.status)
	}
	if st.status != "done" {
		return fmt.Errorf("task ended %s", st.status)
	}
	fmt.Fprintf(stdout, "ok: exact output (%d bytes, seq %d), no gap, no repeat\n", len(st.output), st.seq)
	fmt.Fprintf(stdout, "submit to first delta: %v\nreconnect to snapshot: %v\n", firstDelta.Round(time.Microsecond), toSnapshot.Round(time.Microsecond))
	return nil
}

// credentials returns the headers a tab would send: the bearer token, or an
// anonymous session cookie fetched like a browser's first page load.
func credentials(ctx context.Context, o options) (http.Header, error) {
	if o.token != "" {
		return http.Header{"Authorization": {"Bearer " + o.token}}, nil
	}
	req, err := http.NewRequestWithContext(ctx, "GET", o.base+"/healthz", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the gateway: %w", err)
	}
	resp.Body.Close()
	req, _ = http.NewRequestWithContext(ctx, "GET", o.base+"/", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("load the UI page: %w", err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "tether_session" {
			return http.Header{"Cookie": {c.Name + "=" + c.Value}, "Origin": {o.base}}, nil
		}
	}
	return nil, errors.New("the gateway set no tether_session cookie (is it in TETHER_AUTH_SECRET mode? pass -token)")
}

func dial(ctx context.Context, base string, h http.Header) (*websocket.Conn, error) {
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/ws"
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: HTTP %d: %w", url, resp.StatusCode, err)
		}
		return nil, fmt.Errorf("dial %s: %w", url, err)
	}
	c.SetReadLimit(64 << 20)
	return c, nil
}

func send(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, b)
}

// pending holds messages of a frame not yet handed out.
var pending [][]byte

func read(ctx context.Context, c *websocket.Conn) (map[string]any, error) {
	for len(pending) == 0 {
		_, data, err := c.Read(ctx)
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		pending = bytes.Split(data, []byte{'\n'})
	}
	line := pending[0]
	pending = pending[1:]
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("bad server message %q: %w", line, err)
	}
	return m, nil
}

// state applies snapshots and events as PROTOCOL.md section 4 says a client must.
type state struct {
	taskID    string
	seq       int64
	attempt   int
	output    string
	status    string
	deltas    int
	snapshots int
	terminal  bool
}

func (s *state) apply(m map[string]any) error {
	typ, _ := m["type"].(string)
	switch typ {
	case "error":
		return fmt.Errorf("server error: %v: %v", m["code"], m["message"])
	case "submitted", "snapshot":
		t, _ := m["task"].(map[string]any)
		if t == nil || t["id"] != s.taskID {
			return nil
		}
		s.snapshots++
		s.seq = int64(t["seq"].(float64))
		s.attempt = int(t["attempt"].(float64))
		s.output, _ = t["output"].(string)
		s.status, _ = t["status"].(string)
		s.terminal = terminal(s.status)
	case "delta", "progress", "status":
		if m["task_id"] != s.taskID {
			return nil
		}
		seq := int64(m["seq"].(float64))
		if seq <= s.seq {
			return fmt.Errorf("repeated seq %d after %d", seq, s.seq)
		}
		if seq != s.seq+1 {
			return fmt.Errorf("gap: seq %d after %d", seq, s.seq)
		}
		s.seq = seq
		switch typ {
		case "delta":
			text, _ := m["text"].(string)
			s.output += text
			s.deltas++
		case "status":
			if a := int(m["attempt"].(float64)); a > s.attempt {
				s.output, s.attempt = "", a
			}
			s.status, _ = m["status"].(string)
			s.terminal = terminal(s.status)
		}
	}
	return nil
}

func terminal(s string) bool { return s == "done" || s == "failed" || s == "cancelled" }

func expected(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString("t" + strconv.Itoa(i) + " ")
	}
	return b.String()
}

func uuid4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
