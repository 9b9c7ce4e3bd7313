package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// The clients: real WebSocket connections from this process, reading every
// frame and splitting it into the newline-separated messages of PROTOCOL.md
// section 4. Parsing is a few byte scans, not encoding/json: on two cores the
// clients share the machine with the servers they measure.

// token makes a JWT for user, as a client of the gateway in JWT mode would.
func token(secret, user string) string {
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": user, "exp": time.Now().Add(24 * time.Hour).Unix()})
	s, err := t.SignedString([]byte(secret))
	if err != nil {
		panic(err)
	}
	return s
}

// dial opens a WebSocket to url with a bearer token ("" for none).
func dial(ctx context.Context, url, tok string) (*websocket.Conn, error) {
	var h http.Header
	if tok != "" {
		h = http.Header{"Authorization": {"Bearer " + tok}}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(-1)
	return c, nil
}

// readFrames calls fn with each message of each frame, in order, until the
// connection ends or fn returns false, counting the frames in frames (if
// not nil).
func readFrames(ctx context.Context, c *websocket.Conn, frames *atomic.Int64, fn func(msg []byte) bool) {
	var buf bytes.Buffer
	for {
		_, r, err := c.Reader(ctx)
		if err != nil {
			return
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return
		}
		if frames != nil {
			frames.Add(1)
		}
		data := buf.Bytes()
		for len(data) > 0 {
			var line []byte
			line, data, _ = bytes.Cut(data, []byte{'\n'})
			if !fn(line) {
				return
			}
		}
	}
}

// strField is the string value of "key":"…" in msg (no escapes expected).
func strField(msg []byte, key string) string {
	k := `"` + key + `":"`
	i := bytes.Index(msg, []byte(k))
	if i < 0 {
		return ""
	}
	rest := msg[i+len(k):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// intField is the integer value of "key":N in msg, -1 when absent.
func intField(msg []byte, key string) int64 {
	k := `"` + key + `":`
	i := bytes.Index(msg, []byte(k))
	if i < 0 {
		return -1
	}
	var n int64
	j := i + len(k)
	for ; j < len(msg) && msg[j] >= '0' && msg[j] <= '9'; j++ {
		n = n*10 + int64(msg[j]-'0')
	}
	if j == i+len(k) {
		return -1
	}
	return n
}

// msgType is the message's "type", which every message starts with.
func msgType(msg []byte) string {
	const k = `{"type":"`
	if !bytes.HasPrefix(msg, []byte(k)) {
		return strField(msg, "type")
	}
	rest := msg[len(k):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

// send writes one JSON request.
func send(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.Write(ctx, websocket.MessageText, b)
}

func newID() string { return uuid.NewString() }

// postTask creates a task over HTTP and returns its id.
func postTask(ctx context.Context, base, tok, conv, content string) (string, error) {
	return postTaskWith(ctx, base, tok, newID(), conv, content)
}

// postTaskWith creates the task id over HTTP and returns its id.
func postTaskWith(ctx context.Context, base, tok, id, conv, content string) (string, error) {
	body, _ := json.Marshal(map[string]any{"task_id": id, "conversation_id": conv, "content": content})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/tasks", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("POST /v1/tasks: %s: %s", resp.Status, b)
	}
	return id, nil
}

// getTask reads a task's status and seq over HTTP.
func getTask(ctx context.Context, base, tok, id string) (status string, seq int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/tasks/"+id, nil)
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("GET task: %s: %s", resp.Status, b)
	}
	return strField(b, "status"), intField(b, "seq"), nil
}

// wsURL turns a host:port into the gateway's WebSocket URL.
func wsURL(hostport, path string) string {
	return "ws://" + strings.TrimPrefix(hostport, "http://") + path
}

// stamp is the text of a bench delta: when it was sent, so a client
// measures the latency of each event.
func stamp(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) + " " }

// sentAt reads a stamp back from a delta message.
func sentAt(msg []byte) (time.Time, bool) {
	s := strField(msg, "text")
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}
