// Package compat speaks the APIs that AI apps are already written against
// (PROTOCOL.md section 11): OpenAI Responses with background resume, OpenAI
// Chat Completions, and the AI SDK's UI message stream for useChat({resume}).
// Each request is a Tether task; each stream is an encoding of that task's
// snapshot and the events after it, as the gateway's follower delivers them
// (gateway.Watch), so these endpoints get the resume rule, idempotent
// submits and continued answers of the WebSocket and SSE paths without a
// second implementation of any of them.
package compat

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/tether-dev/tether/internal/gateway"
	"github.com/tether-dev/tether/internal/task"
)

// Core is what these endpoints need of the gateway; *gateway.Server has it.
type Core interface {
	Caller(w http.ResponseWriter, r *http.Request) (string, error)
	Submit(ctx context.Context, user string, req task.SubmitRequest) (task.SubmitResult, error)
	Task(ctx context.Context, user, taskID string) (task.Task, error)
	Cancel(ctx context.Context, user, taskID string) (task.Task, error)
	History(ctx context.Context, user, conversationID string, p task.Page) ([]task.Message, string, error)
	Watch(ctx context.Context, user, taskID string, replay bool) (*gateway.Watch, error)
	LogError(what string, err error)
	Mount(pattern string, h http.Handler)
}

var _ Core = (*gateway.Server)(nil)

// Config tunes the endpoints. The zero value works.
type Config struct {
	// KeepAlive is the period of SSE comment lines. Default 15s.
	KeepAlive time.Duration
	// WriteTimeout bounds one write to a client. Default 10s.
	WriteTimeout time.Duration
	// DefaultModel is the model a response names when the request named
	// none. Default "tether".
	DefaultModel string
}

func (c Config) withDefaults() Config {
	c.KeepAlive = cmp.Or(c.KeepAlive, 15*time.Second)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 10*time.Second)
	c.DefaultModel = cmp.Or(c.DefaultModel, "tether")
	return c
}

// api holds what every endpoint shares.
type api struct {
	core Core
	cfg  Config
}

// Mount adds the endpoints of section 11 to a gateway.
func Mount(core Core, cfg Config) {
	a := &api{core: core, cfg: cfg.withDefaults()}
	routes := []struct {
		pattern string
		h       handlerFunc
	}{
		{"POST /v1/responses", a.createResponse},
		{"GET /v1/responses/{id}", a.getResponse},
		{"POST /v1/responses/{id}/cancel", a.cancelResponse},
		{"POST /v1/chat/completions", a.createChatCompletion},
		{"POST /v1/chat", a.postChat},
		{"GET /v1/chat/{chatId}/stream", a.resumeChat},
		{"GET /v1/chat/{chatId}/messages", a.chatMessages},
		{"POST /v1/chat/{chatId}/cancel", a.cancelChat},
	}
	for _, rt := range routes {
		core.Mount(rt.pattern, a.handle(rt.h))
	}
	// Any other method on these paths: a 405 in the OpenAI shape.
	for _, p := range []string{"/v1/responses", "/v1/responses/{id}", "/v1/responses/{id}/cancel",
		"/v1/chat/completions", "/v1/chat", "/v1/chat/{chatId}/stream", "/v1/chat/{chatId}/messages",
		"/v1/chat/{chatId}/cancel"} {
		core.Mount(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeStatusError(w, http.StatusMethodNotAllowed, task.CodeInvalid, "method "+r.Method+" not allowed here", "")
		}))
	}
}

// handlerFunc is an authenticated endpoint; an error it returns before it
// wrote anything is answered in the OpenAI error shape.
type handlerFunc func(w http.ResponseWriter, r *http.Request, user string) error

func (a *api) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, err := a.core.Caller(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		if err := h(w, r, user); err != nil {
			a.core.LogError("http "+r.Method+" "+r.Pattern, err)
			writeError(w, err)
		}
	})
}
