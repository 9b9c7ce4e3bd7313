package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/eventually"
)

func TestOpenAIErrorStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status   int
		typ      string
		want     string
		requests int32 // 1 + retries for the retryable ones (2 retries allowed)
	}{
		{401, "invalid_request_error", "model server rejected the API key", 1},
		{403, "permission_error", "model server rejected the API key", 1},
		{404, "invalid_request_error", "model not found", 1},
		{400, "invalid_request_error", "model server rejected the request (HTTP 400)", 1},
		{429, "rate_limit_exceeded", "model server rate limit", 3},
		{500, "server_error", "model server error (HTTP 500)", 3},
		{503, "server_error", "model server error (HTTP 503)", 3},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				// Echo the Authorization header, as a careless proxy might.
				fmt.Fprint(w, errorBody("failed for "+r.Header.Get("Authorization"), tc.typ))
			})
			o, logs := newTestOpenAI(t, f, 2, nil)
			out := &output{}
			err := o.Run(context.Background(), Input{TaskID: "t-err", Content: "x"}, out)
			if got := failureOf(t, err); got != tc.want {
				t.Fatalf("failure %q, want %q", got, tc.want)
			}
			if n := f.requests.Load(); n != tc.requests {
				t.Fatalf("%d requests, want %d", n, tc.requests)
			}
			if out.text() != "" {
				t.Fatalf("output %q from an error", out.text())
			}
			// The operator learns the status from the log (which must not
			// hold the key: newTestOpenAI checks that at cleanup).
			if l := logs.String(); !strings.Contains(l, fmt.Sprintf("HTTP %d", tc.status)) || !strings.Contains(l, "t-err") {
				t.Fatalf("log lacks the status or task:\n%s", l)
			}
		})
	}
}

func TestOpenAI404WithoutErrorBodyHintsAtTheBaseURL(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int, http.ResponseWriter, *http.Request) {})
	o, logs := newTestOpenAI(t, f, 0, func(c *OpenAIConfig) { c.BaseURL = f.srv.URL }) // no /v1
	err := o.Run(context.Background(), Input{Content: "x"}, &output{})
	if got := failureOf(t, err); got != "model not found" {
		t.Fatalf("failure %q", got)
	}
	if !strings.Contains(logs.String(), "TETHER_OPENAI_BASE_URL") {
		t.Fatalf("log gives no hint:\n%s", logs)
	}
}

func TestOpenAIRetriesBeforeTheFirstToken(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1, 2:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, errorBody("overloaded", "server_error"))
		case 3:
			startSSE(w)
			sse(w, roleChunk) // a role chunk is not a token: still retryable
			// a clean end without [DONE]
		default:
			streamOf(roleChunk, textChunk("at"), textChunk(" last"), usageChunk(3, 2))(w, r)
		}
	})
	o, logs := newTestOpenAI(t, f, 5, nil)
	out := &output{}
	if err := o.Run(context.Background(), Input{Content: "x"}, out); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := out.text(); got != "at last" {
		t.Fatalf("output %q", got)
	}
	if n := f.requests.Load(); n != 4 {
		t.Fatalf("%d requests, want 4", n)
	}
	if c := strings.Count(logs.String(), "retrying"); c != 3 {
		t.Fatalf("%d retry log lines, want 3:\n%s", c, logs)
	}
	out.checkProgress(t)
}

func TestOpenAIRetriesAConnectionFailure(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(int, http.ResponseWriter, *http.Request) {})
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // nothing listens here any more
	o, logs := newTestOpenAI(t, f, 2, func(c *OpenAIConfig) { c.BaseURL = dead.URL + "/v1" })
	err := o.Run(context.Background(), Input{Content: "x"}, &output{})
	if got := failureOf(t, err); got != "model server unreachable" {
		t.Fatalf("failure %q", got)
	}
	if c := strings.Count(logs.String(), "retrying"); c != 2 {
		t.Fatalf("%d retries logged, want 2:\n%s", c, logs)
	}
}

func TestOpenAINoRetryAfterTheFirstToken(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"connection cut", "clean end without [DONE]"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				startSSE(w)
				sse(w, roleChunk, textChunk("Partial"), textChunk(" answer"))
				if how == "connection cut" {
					cut(t, w)
				}
			})
			o, _ := newTestOpenAI(t, f, 5, nil)
			out := &output{}
			err := o.Run(context.Background(), Input{Content: "x"}, out)
			if got := failureOf(t, err); got != "model stream ended early" {
				t.Fatalf("failure %q", got)
			}
			if n := f.requests.Load(); n != 1 {
				t.Fatalf("%d requests: no retry after the first token", n)
			}
			// What came before the cut is kept, exactly once.
			if got := out.text(); got != "Partial answer" {
				t.Fatalf("output %q", got)
			}
		})
	}
}

func TestOpenAICutInsideALine(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		sse(w, textChunk("ok"))
		fmt.Fprint(w, `data: {"choices":[{"delta":{"content":"tr`)
	})
	o, _ := newTestOpenAI(t, f, 5, nil)
	out := &output{}
	err := o.Run(context.Background(), Input{Content: "x"}, out)
	if got := failureOf(t, err); got != "model stream ended early" {
		t.Fatalf("failure %q", got)
	}
	if out.text() != "ok" {
		t.Fatalf("output %q", out.text())
	}
}

func TestOpenAIErrorInsideTheStream(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		sse(w, roleChunk, textChunk("Begin"), errorBody("backend crashed", "server_error"))
		sse(w, textChunk("never"), "[DONE]")
	})
	o, logs := newTestOpenAI(t, f, 5, nil)
	out := &output{}
	err := o.Run(context.Background(), Input{Content: "x"}, out)
	if got := failureOf(t, err); got != "model server error" {
		t.Fatalf("failure %q", got)
	}
	if out.text() != "Begin" {
		t.Fatalf("output %q", out.text())
	}
	if f.requests.Load() != 1 {
		t.Fatalf("retried an in-stream error")
	}
	if !strings.Contains(logs.String(), "backend crashed") || !strings.Contains(logs.String(), "[redacted]") {
		t.Fatalf("log lacks the redacted upstream message:\n%s", logs)
	}
}

func TestOpenAIJSONInsteadOfAStream(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprint(w, errorBody("model is loading", "server_error"))
	})
	o, _ := newTestOpenAI(t, f, 5, nil)
	if got := failureOf(t, o.Run(context.Background(), Input{Content: "x"}, &output{})); got != "model server error" {
		t.Fatalf("failure %q", got)
	}
}

func TestOpenAIFirstTokenTimeout(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"no answer", "role chunk only"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			closed := make(chan struct{}, 1)
			f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				if how == "role chunk only" {
					startSSE(w)
					sse(w, roleChunk)
				}
				<-r.Context().Done()
				closed <- struct{}{}
			})
			o, _ := newTestOpenAI(t, f, 5, func(c *OpenAIConfig) { c.FirstTokenTimeout = 50 * time.Millisecond })
			out := &output{}
			err := o.Run(context.Background(), Input{Content: "x"}, out)
			if got := failureOf(t, err); got != "model server timed out" {
				t.Fatalf("failure %q", got)
			}
			eventually.Receive(t, closed, "the hung request to be closed")
			if n := f.requests.Load(); n != 1 {
				t.Fatalf("%d requests: a timeout is not retried", n)
			}
		})
	}
}

func TestOpenAIRequestTimeoutAfterTheFirstToken(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{})
	f := newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		startSSE(w)
		sse(w, roleChunk, textChunk("slow"))
		<-r.Context().Done()
		close(closed)
	})
	o, _ := newTestOpenAI(t, f, 5, func(c *OpenAIConfig) {
		c.RequestTimeout = 100 * time.Millisecond
		c.FirstTokenTimeout = time.Hour
	})
	out := &output{}
	err := o.Run(context.Background(), Input{Content: "x"}, out)
	if got := failureOf(t, err); got != "model server timed out" {
		t.Fatalf("failure %q", got)
	}
	eventually.Receive(t, closed, "the request to be closed")
	if out.text() != "slow" {
		t.Fatalf("output %q", out.text())
	}
}

func TestFailureForStatus(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]string{
		401: FailureKeyRejected, 403: FailureKeyRejected, 404: FailureModelNotFound,
		429: FailureRateLimit, 408: FailureTimeout, 504: FailureTimeout,
		500: "model server error (HTTP 500)", 502: "model server error (HTTP 502)",
		422: "model server rejected the request (HTTP 422)",
	} {
		if got := failureForStatus(code); got != want {
			t.Errorf("failureForStatus(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestDescribeAPIErrorRedactsAndBounds(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 400)
	desc, ok := describeAPIError([]byte(`{"error":{"message":"bad key `+testKey+` `+long+`","type":"x","code":"invalid_api_key"}}`), testKey)
	if !ok || strings.Contains(desc, testKey) || !strings.Contains(desc, "[redacted]") || len(desc) > 3*maxErrorDetail+100 {
		t.Fatalf("desc = %q, ok = %v", desc, ok)
	}
	if desc, ok := describeAPIError([]byte(`{"error":"plain `+testKey+`"}`), testKey); !ok || strings.Contains(desc, testKey) {
		t.Fatalf("string error: %q %v", desc, ok)
	}
	for _, body := range []string{``, `404 page not found`, `{"error":null}`, `{"detail":"x"}`} {
		if _, ok := describeAPIError([]byte(body), testKey); ok {
			t.Fatalf("%q described as an API error", body)
		}
	}
}
