package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// Handler routes every endpoint of PROTOCOL.md sections 4 and 5 and serves
// the UI for everything else.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ws", s.serveWS)
	mux.HandleFunc("POST /v1/tasks", s.api(s.postTask))
	mux.HandleFunc("GET /v1/tasks/{id}", s.api(s.getTask))
	mux.HandleFunc("POST /v1/tasks/{id}/cancel", s.api(s.postCancel))
	mux.HandleFunc("GET /v1/tasks/{id}/events", s.serveSSE)
	mux.HandleFunc("GET /v1/conversations", s.api(s.getConversations))
	mux.HandleFunc("GET /v1/conversations/{id}/messages", s.api(s.getMessages))
	mux.HandleFunc("GET /v1/results/{ref}", s.api(s.getResult))
	mux.HandleFunc("DELETE /v1/conversations/{id}", s.api(s.deleteConversation))
	mux.HandleFunc("PATCH /v1/conversations/{id}", s.api(s.renameConversation))
	mux.HandleFunc("/v1/uploads", s.serveUploads)
	mux.HandleFunc("/v1/uploads/", s.serveUploads)
	for _, m := range s.mounts {
		mux.Handle(m.pattern, m.handler)
	}
	// The same paths with any other method: a JSON 405 rather than the
	// mux's plain-text one.
	for _, p := range []string{"/v1/ws", "/v1/tasks", "/v1/tasks/{id}", "/v1/tasks/{id}/cancel",
		"/v1/tasks/{id}/events", "/v1/conversations", "/v1/conversations/{id}/messages", "/v1/results/{ref}",
		"/v1/conversations/{id}"} {
		mux.HandleFunc(p, methodNotAllowed)
	}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, task.Errorf(task.CodeNotFound, "no such endpoint"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	mux.Handle("/", s.withSession(s.cfg.UI))
	return s.logRequests(s.cors(s.admit(mux)))
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusMethodNotAllowed, protocol.HTTPError(task.CodeInvalid, "method "+r.Method+" not allowed here"))
}

// withSession gives a browser its anonymous session cookie on its first
// page load, so its WebSocket and API calls act as one user.
func (s *Server) withSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth.anonymousMode() {
			if id := s.auth.anonymous(r); id.newCookie != nil {
				http.SetCookie(w, id.newCookie)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// logRequests logs each request by method and path only: query strings may
// hold tokens and are never logged.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		s.log.Debug("http", "method", r.Method, "path", r.URL.Path, "took", time.Since(start))
	})
}

// readyz answers 200 when Postgres and NATS both answer, else 503, with a
// body that says which is down: {"status":"ready"|"unavailable",
// "postgres":"ok"|"down","nats":"ok"|"down"}. The endpoint takes no auth,
// so why a dependency is down (addresses, server messages) goes to the log
// only.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var pgErr, natsErr error
	if s.cfg.Ready != nil {
		pgErr = s.cfg.Ready(ctx)
	}
	natsErr = s.bus.Ready(ctx)
	state := func(err error) string {
		if err != nil {
			return "down"
		}
		return "ok"
	}
	body := struct {
		Status   string `json:"status"`
		Postgres string `json:"postgres"`
		NATS     string `json:"nats"`
	}{"ready", state(pgErr), state(natsErr)}
	status := http.StatusOK
	if pgErr != nil || natsErr != nil {
		body.Status, status = "unavailable", http.StatusServiceUnavailable
		s.log.Warn("not ready", "postgres", errText(pgErr), "nats", errText(natsErr))
	}
	_ = writeValue(w, status, body)
}

// errText is err's text for a log line, "ok" for nil.
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// apiHandler is an authenticated, rate-limited JSON endpoint. Its request's
// context carries the request deadline (Config.RequestTimeout).
type apiHandler func(w http.ResponseWriter, r *http.Request, user string) error

func (s *Server) api(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := s.requestContext(r.Context())
		defer cancel()
		r = r.WithContext(ctx)
		user, err := s.Caller(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(requestTimeout))
		_ = rc.SetWriteDeadline(time.Now().Add(requestTimeout))
		if err := h(w, r, user); err != nil {
			s.logError("http "+r.Method+" "+r.Pattern, err)
			writeError(w, err)
		}
	}
}

func (s *Server) postTask(w http.ResponseWriter, r *http.Request, user string) error {
	req, err := decodeBody(r, "submit")
	if err != nil {
		return err
	}
	res, err := s.submit(r.Context(), user, task.SubmitRequest{TaskID: req.TaskID,
		ConversationID: req.ConversationID, Content: req.Content, Attachments: req.Attachments,
		ParentTaskID: req.ParentTaskID, VersionOf: req.VersionOf})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, protocol.TaskBody(res.Task))
	return nil
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request, user string) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	t, err := s.store.Get(r.Context(), user, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.TaskBody(t))
	return nil
}

func (s *Server) postCancel(w http.ResponseWriter, r *http.Request, user string) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	t, err := s.cancelTask(r.Context(), user, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.TaskBody(t))
	return nil
}

func (s *Server) getConversations(w http.ResponseWriter, r *http.Request, user string) error {
	p, err := pageQuery(r)
	if err != nil {
		return err
	}
	var (
		cs   []task.Conversation
		next string
	)
	if q := r.URL.Query().Get("q"); q != "" {
		cs, next, err = s.store.SearchConversations(r.Context(), user, q, p)
	} else {
		cs, next, err = s.store.Conversations(r.Context(), user, p)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.ConversationsPage(cs, next))
	return nil
}

func (s *Server) getMessages(w http.ResponseWriter, r *http.Request, user string) error {
	id, err := pathUUID(r, "id")
	if err != nil {
		return err
	}
	p, err := pageQuery(r)
	if err != nil {
		return err
	}
	msgs, next, err := s.store.History(r.Context(), user, id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.MessagesPage(msgs, next))
	return nil
}

// getResult serves an output too large for its task (result_ref).
func (s *Server) getResult(w http.ResponseWriter, r *http.Request, user string) error {
	res, err := s.store.Result(r.Context(), user, r.PathValue("ref"))
	if err != nil {
		return err
	}
	return writeValue(w, http.StatusOK, res)
}

// decodeBody reads a JSON request body and validates it exactly as the
// WebSocket message of the same type.
func decodeBody(r *http.Request, typ string) (protocol.Request, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, protocol.MaxFrameBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return protocol.Request{}, task.Errorf(task.CodeTooLarge, "request body over %d bytes", protocol.MaxFrameBytes)
		}
		return protocol.Request{}, task.Errorf(task.CodeInvalid, "unreadable body")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return protocol.Request{}, task.Errorf(task.CodeInvalid, "body must be a JSON object")
	}
	fields["type"], _ = json.Marshal(typ)
	delete(fields, "req")
	framed, err := json.Marshal(fields)
	if err != nil {
		return protocol.Request{}, task.Errorf(task.CodeInvalid, "body must be a JSON object")
	}
	return protocol.DecodeRequest(framed)
}

// pathUUID validates a UUID path parameter by the same rules as the wire.
func pathUUID(r *http.Request, name string) (string, error) {
	id, ok := protocol.NormalizeUUID(r.PathValue(name))
	if !ok {
		return "", task.Errorf(task.CodeInvalid, "%s is not a UUID", name)
	}
	return id, nil
}

func pageQuery(r *http.Request) (task.Page, error) {
	q := r.URL.Query()
	p := task.Page{Before: q.Get("before")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > task.MaxLimit {
			return p, task.Errorf(task.CodeInvalid, "limit must be 1..%d", task.MaxLimit)
		}
		p.Limit = n
	}
	return p, nil
}

func writeValue(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	writeJSON(w, status, b)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeError maps an error's code to its HTTP status; internal detail never
// reaches the client. An unavailable answer says when to try again.
func writeError(w http.ResponseWriter, err error) {
	code := task.ErrorCode(err)
	protocol.SetRetryAfter(w.Header(), code)
	writeJSON(w, protocol.HTTPStatus(code), protocol.HTTPError(code, task.ErrorMessage(err)))
}
