package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The readers of the compat scenario: one task's answer read over Tether's
// SSE path (PROTOCOL.md section 5) or over an encoder of section 11, each
// stream parsed as its SDK would see it (events, and the answer's text put
// back together from them) and checked against the answer the demo engine
// gives. As in clients.go, fields are found with byte scans, not
// encoding/json: the readers share two cores with the servers they measure.

// The ways of reading a task's answer.
const (
	pathSSE       = "sse"        // GET /v1/tasks/{id}/events: a snapshot, then the events
	pathSSEEvents = "sse-events" // the same with Last-Event-ID: 0, every event from the first
	pathResponses = "responses"  // GET /v1/responses/{id}?stream=true
	pathChat      = "chat"       // POST /v1/chat/completions again, with the same Idempotency-Key
	pathUI        = "ui"         // GET /v1/chat/{chatId}/stream (only while the answer runs)
)

// pathNames are what the report calls the paths.
var pathNames = map[string]string{
	pathSSE:       "SSE",
	pathSSEEvents: "SSE from Last-Event-ID 0",
	pathResponses: "Responses",
	pathChat:      "Chat Completions",
	pathUI:        "UI message stream",
}

// compatTask is an answer the readers read.
type compatTask struct {
	id, conv string
	body     []byte // the Chat Completions request that made it, sent again by its readers
	want     string // the whole answer
}

// compatClient makes the requests, as one user.
type compatClient struct {
	base, tok string
	hc        *http.Client
}

func newCompatClient(base, tok string) *compatClient {
	// Enough idle connections that readers reading again and again reuse
	// theirs rather than dialling each time.
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute,
		DisableCompression: true}
	return &compatClient{base: base, tok: tok, hc: &http.Client{Transport: tr}}
}

func (c *compatClient) close() { c.hc.CloseIdleConnections() }

// streamAnswer is the output of the demo engine's /stream n.
func streamAnswer(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteByte('t')
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(' ')
	}
	return b.String()
}

// create makes a task of content /stream n ms through Chat Completions,
// keyed by its own id and in a conversation of its own, so that every path
// can read it: a repeated POST replays it, the UI stream finds it by the
// conversation. With follow it reads that first stream to the end (and
// checks it); without, it returns once the stream has started and drops
// it, which leaves the task running (section 11: a dropped connection never
// cancels).
func (c *compatClient) create(ctx context.Context, n, ms int, follow bool) (compatTask, error) {
	k := compatTask{id: newID(), conv: newID(), want: streamAnswer(n)}
	k.body, _ = json.Marshal(map[string]any{"model": "bench", "stream": true,
		"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("/stream %d %d", n, ms)}},
		"metadata": map[string]string{"conversation_id": k.conv}})
	if follow {
		_, _, err := c.read(ctx, pathChat, k)
		return k, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.open(ctx, pathChat, k, "")
	if err != nil {
		return k, err
	}
	return k, resp.Body.Close()
}

// request is the request of path for k; query is added to its URL.
func (c *compatClient) request(ctx context.Context, path string, k compatTask, query string) (*http.Request, error) {
	method, url := http.MethodGet, ""
	var body io.Reader
	switch path {
	case pathSSE, pathSSEEvents:
		url = c.base + "/v1/tasks/" + k.id + "/events"
	case pathResponses:
		url = c.base + "/v1/responses/" + k.id + "?stream=true"
	case pathChat:
		method, url, body = http.MethodPost, c.base+"/v1/chat/completions", bytes.NewReader(k.body)
	case pathUI:
		url = c.base + "/v1/chat/" + k.conv + "/stream"
	default:
		return nil, fmt.Errorf("no path %q", path)
	}
	if query != "" {
		url += "&" + query
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.tok)
	req.Header.Set("Accept", "text/event-stream")
	switch path {
	case pathSSEEvents:
		req.Header.Set("Last-Event-ID", "0")
	case pathChat:
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", k.id)
	}
	return req, nil
}

// open sends the request of path and returns the stream once it answered 200.
func (c *compatClient) open(ctx context.Context, path string, k compatTask, query string) (*http.Response, error) {
	req, err := c.request(ctx, path, k, query)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	return resp, nil
}

// read reads k's answer over path to the end of the stream and checks that
// the text it carried is the whole answer. It returns the stream's events
// and bytes.
func (c *compatClient) read(ctx context.Context, path string, k compatTask) (events, n int64, err error) {
	resp, err := c.open(ctx, path, k, "")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var got strings.Builder
	n, err = readSSE(resp.Body, func(name string, data []byte) error {
		events++
		text, whole, err := answerText(path, name, data)
		if whole {
			got.Reset()
		}
		got.WriteString(text)
		return err
	})
	if err != nil {
		return events, n, fmt.Errorf("%s: %w", path, err)
	}
	if got.String() != k.want {
		return events, n, fmt.Errorf("%s: the stream carried %d bytes of answer that are not the %d of the answer", path, got.Len(), len(k.want))
	}
	return events, n, nil
}

// answerText is the text of the answer an event of path carries, and
// whether it is the whole answer so far (a snapshot) rather than what
// follows it. An event that reports a failure is an error.
func answerText(path, name string, data []byte) (text string, whole bool, err error) {
	switch path {
	case pathSSE, pathSSEEvents:
		switch name {
		case "snapshot":
			return strField(data, "output"), true, nil
		case "delta":
			return strField(data, "text"), false, nil
		case "error":
			return "", false, fmt.Errorf("error event %s", data)
		}
	case pathResponses:
		switch name {
		case "response.output_text.delta":
			return strField(data, "delta"), false, nil
		case "error", "response.failed", "response.incomplete":
			return "", false, fmt.Errorf("%s event %.200s", name, data)
		}
	case pathChat:
		if bytes.HasPrefix(data, []byte(`{"error"`)) {
			return "", false, fmt.Errorf("error chunk %s", data)
		}
		return strField(data, "content"), false, nil
	case pathUI:
		switch msgType(data) {
		case "text-delta":
			return strField(data, "delta"), false, nil
		case "error", "abort":
			return "", false, fmt.Errorf("chunk %s", data)
		}
	}
	return "", false, nil
}

// errStop ends readSSE early without an error.
var errStop = errors.New("stop")

// readSSE reads an event stream to its end, calling fn with each event's
// name ("" when it has none) and data, and returns the bytes it read. fn's
// data is valid only during the call; fn returning errStop ends the read.
func readSSE(r io.Reader, fn func(name string, data []byte) error) (int64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		n       int64
		name    string
		data    []byte
		hasData bool
		long    []byte
	)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: a snapshot, a whole Response.
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		n += int64(len(line))
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if hasData {
				if err := fn(name, data); err != nil {
					if errors.Is(err, errStop) {
						return n, nil
					}
					return n, err
				}
			}
			name, data, hasData = "", data[:0], false
		case line[0] == ':': // a comment: keep-alive
		case bytes.HasPrefix(line, []byte("event: ")):
			name = string(line[len("event: "):])
		case bytes.HasPrefix(line, []byte("data: ")):
			if hasData {
				data = append(data, '\n')
			}
			data, hasData = append(data, line[len("data: "):]...), true
		}
	}
}
