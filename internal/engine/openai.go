package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// OpenAI is the engine for any server that speaks OpenAI's streaming chat
// completions API (OpenAI, vLLM, Ollama, llama.cpp's server, LiteLLM).
//
// One Run sends the conversation (see buildMessages), with the task's
// instructions after the configured system prompt and its sampling options
// where the request has a field for them (samplingFor), to
// {BaseURL}/chat/completions with stream: true and writes the content
// deltas to the Output as they arrive, coalesced into slightly larger
// pieces. Failures before the first token (connection refused, 429, 5xx, a
// stream cut before any text) are retried with exponential backoff for up
// to ConnectRetry, since nothing has been shown yet; after the first token
// a failure ends the attempt with a Failure, and the runner decides what
// happens next. An Input with a Prefix is continued by assistant prefill
// or refused with ErrCannotContinue (ContinueMode). docs/engines.md
// describes the behaviour for deployers.
type OpenAI struct {
	cfg      OpenAIConfig
	endpoint string
	log      *slog.Logger
	// newBackOff returns the retry policy of one Run; tests shorten it.
	newBackOff func() backoff.BackOff
	// flushEvery and flushBytes bound how long and how much text waits
	// before it is written to the Output.
	flushEvery time.Duration
	flushBytes int
}

// NewOpenAI returns the engine for cfg, with defaults filled in, or an error
// saying what is wrong with cfg. It does not contact the server.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("openai engine: invalid config: %w", err)
	}
	retry := cfg.ConnectRetry
	return &OpenAI{
		cfg:      cfg,
		endpoint: cfg.BaseURL + "/chat/completions",
		log:      cfg.Logger.With("engine", "openai", "model", cfg.Model),
		newBackOff: func() backoff.BackOff {
			return backoff.NewExponentialBackOff(
				backoff.WithInitialInterval(openAIRetryInitialInterval),
				backoff.WithMaxInterval(openAIRetryMaxInterval),
				backoff.WithMaxElapsedTime(retry))
		},
		flushEvery: 30 * time.Millisecond,
		flushBytes: 64,
	}, nil
}

// Config returns the engine's configuration with its defaults filled in.
func (o *OpenAI) Config() OpenAIConfig { return o.cfg }

// chatRequest is the body of POST /chat/completions.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	sampling
	prefillFields
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Run implements Engine.
func (o *OpenAI) Run(ctx context.Context, in Input, out Output) error {
	continuing := in.Prefix != ""
	if continuing && o.cfg.Continue == ContinueRestart {
		o.log.Info("engine configured to restart; starting the answer over",
			"task_id", in.TaskID, "prefix_bytes", len(in.Prefix))
		return fmt.Errorf("continue mode %s: %w", ContinueRestart, ErrCannotContinue)
	}
	params := o.samplingFor(in.Options)
	body, err := json.Marshal(chatRequest{
		Model: o.cfg.Model,
		Messages: buildMessages(systemPrompt(o.cfg.SystemPrompt, in.Instructions), in.History,
			in.TaskID, in.Content, in.Prefix, o.cfg.ContextBudget, in.Attachments),
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		sampling:      params,
		prefillFields: prefill(in.Prefix),
	})
	if err != nil {
		return fmt.Errorf("encode chat request: %w", err)
	}
	runCtx, cancel := context.WithTimeoutCause(ctx, o.cfg.RequestTimeout, errRequestTimeout)
	defer cancel()

	s := &streamState{out: out, maxTokens: params.MaxTokens, lastProgress: -1}
	if continuing {
		// Nothing may reach the Output before the server has accepted the
		// prefill (ErrCannotContinue comes before any write), so the
		// "connecting" 0 is left out: the runner would drop it anyway, as
		// its progress is never below 0.
		o.log.Info("continuing the answer after the kept prefix",
			"task_id", in.TaskID, "prefix_bytes", len(in.Prefix))
	} else if err := s.setProgress(0, stageConnecting); err != nil {
		return o.result(ctx, runCtx, in.TaskID, err)
	}
	tries := 0
	op := func() error {
		tries++
		s.reset()
		err := o.try(runCtx, body, s)
		var ue *upstreamError
		if err == nil || (errors.As(err, &ue) && ue.retryable && !s.started) {
			return err
		}
		return backoff.Permanent(err)
	}
	notify := func(err error, wait time.Duration) {
		o.log.Warn("model request failed before the first token; retrying",
			"task_id", in.TaskID, "try", tries, "err", err, "retry_in", wait)
	}
	err = backoff.RetryNotify(op, backoff.WithContext(o.newBackOff(), runCtx), notify)
	if ue, ok := refusedPrefill(err); continuing && ok && !s.started {
		o.log.Warn("model server refused to continue the kept prefix; starting the answer over "+
			"(set TETHER_OPENAI_CONTINUE=restart if it never can)",
			"task_id", in.TaskID, "prefix_bytes", len(in.Prefix), "detail", ue.detail)
		return fmt.Errorf("continue after %d bytes: model server refused the prefill (HTTP %d): %w",
			len(in.Prefix), ue.status, ErrCannotContinue)
	}
	return o.result(ctx, runCtx, in.TaskID, err)
}

// result turns the outcome of the tries into Run's error: the Output's own
// error as it is, the context's when the runner stopped the run, and a
// *Failure for everything upstream (logged here with its detail).
func (o *OpenAI) result(ctx, runCtx context.Context, taskID string, err error) error {
	if err == nil {
		return nil
	}
	var oe *outputError
	if errors.As(err, &oe) {
		return oe.err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ue *upstreamError
	switch {
	case errors.As(err, &ue):
	case errors.Is(context.Cause(runCtx), errRequestTimeout):
		ue = &upstreamError{failure: FailureTimeout, detail: "no answer within the request timeout"}
	default:
		return err
	}
	o.log.Warn("model request failed", "task_id", taskID, "failure", ue.failure, "detail", ue.detail)
	return &Failure{Message: ue.failure}
}

// try sends one request and streams its answer into s. It returns nil once
// the stream's [DONE] is read and everything is written to the Output.
func (o *OpenAI) try(ctx context.Context, body []byte, s *streamState) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	firstToken := time.AfterFunc(o.cfg.FirstTokenTimeout, func() { cancel(errFirstTokenTimeout) })
	defer firstToken.Stop()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build chat request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if o.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.cfg.APIKey)
	}
	resp, err := o.cfg.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return stoppedError(ctx)
		}
		return &upstreamError{failure: FailureUnreachable, retryable: true,
			detail: redact(err.Error(), o.cfg.APIKey)}
	}
	defer resp.Body.Close()
	if err := o.checkResponse(resp); err != nil {
		return err
	}

	return o.stream(ctx, resp.Body, s, func() { firstToken.Stop() })
}

// stream reads one response's events into s until [DONE], an error or the
// end of ctx, writing text to the Output as it goes: the first text at
// once, then whenever flushBytes are pending or flushEvery has passed since
// the first pending byte. gotToken runs when the model has generated
// something. Closing body (the caller's deferred close) ends the reader.
func (o *OpenAI) stream(ctx context.Context, body io.ReadCloser, s *streamState, gotToken func()) error {
	// The reader goroutine belongs to this call: it stops when stop is
	// closed or the body ends, and the deferred wait outlives it.
	items := make(chan sseItem, 16)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		readEvents(newSSEReader(body), items, stop)
	}()
	defer func() {
		close(stop)
		body.Close() // unblocks a Read in progress
		wg.Wait()
	}()

	flush := time.NewTimer(o.flushEvery)
	flush.Stop()
	defer flush.Stop()
	var flushC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return s.fail(stoppedError(ctx))
		case <-flushC:
			flushC = nil
			if err := s.flush(); err != nil {
				return err
			}
		case it := <-items:
			if it.err != nil {
				if ctx.Err() != nil {
					return s.fail(stoppedError(ctx))
				}
				return s.fail(streamReadError(it.err, s.started, o.cfg.APIKey))
			}
			done, err := s.handle(it.data, o.cfg.APIKey)
			if err != nil {
				return s.fail(err)
			}
			if s.alive {
				gotToken()
			}
			if done {
				if s.finish == "length" {
					o.log.Info("answer cut at the max tokens limit", "max_tokens", s.maxTokens)
				}
				return s.complete()
			}
			switch {
			case !s.started && s.pending.Len() > 0, s.pending.Len() >= o.flushBytes:
				flush.Stop()
				flushC = nil
				if err := s.flush(); err != nil {
					return err
				}
			case s.pending.Len() > 0 && flushC == nil:
				flush.Reset(o.flushEvery)
				flushC = flush.C
			}
		}
	}
}

// checkResponse turns a response that is not a stream into an error.
func (o *OpenAI) checkResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if mt != "application/json" {
			return nil
		}
		// A 200 with a JSON body: an error, or a server that ignored
		// stream: true. Neither is a stream to read.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if desc, ok := describeAPIError(body, o.cfg.APIKey); ok {
			return &upstreamError{failure: FailureServerError, detail: "HTTP 200 error body: " + desc}
		}
		return &upstreamError{failure: FailureBadResponse, detail: "HTTP 200 with a JSON body instead of an event stream"}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	code := resp.StatusCode
	desc, ok := describeAPIError(body, o.cfg.APIKey)
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// OpenAI echoes part of a rejected key: log none of it.
		desc = "check TETHER_OPENAI_API_KEY"
	case !ok && code == http.StatusNotFound:
		desc = "no error object in the body: check that TETHER_OPENAI_BASE_URL ends in /v1 or the server's equivalent"
	case !ok:
		desc = "no error object in the body"
	}
	return &upstreamError{failure: failureForStatus(code), retryable: retryableStatus(code),
		detail: fmt.Sprintf("HTTP %d: %s", code, desc), status: code}
}

// stoppedError is the error of a try whose context ended: a timeout of the
// engine's own, or the runner's stop, returned as it is.
func stoppedError(ctx context.Context) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, errFirstTokenTimeout) || errors.Is(cause, errRequestTimeout) {
		return &upstreamError{failure: FailureTimeout, detail: cause.Error()}
	}
	return cause
}

// streamReadError is the error of a stream that ended before [DONE]. Before
// the first token another request may well succeed.
func streamReadError(err error, started bool, key string) error {
	if errors.Is(err, io.EOF) {
		return &upstreamError{failure: FailureStreamEnded, retryable: !started,
			detail: "stream closed without [DONE]"}
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return &upstreamError{failure: FailureBadResponse, detail: "event stream line over 1 MiB"}
	}
	return &upstreamError{failure: FailureStreamEnded, retryable: !started,
		detail: "stream cut: " + redact(err.Error(), key)}
}

// sseItem is one event's data or the error that ended the stream.
type sseItem struct {
	data []byte
	err  error
}

// readEvents sends the stream's events to items until an error (io.EOF at
// the end) has been sent or stop is closed.
func readEvents(r *sseReader, items chan<- sseItem, stop <-chan struct{}) {
	for {
		data, err := r.Next()
		select {
		case items <- sseItem{data, err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}
