// Package profiling serves Go's profiler (net/http/pprof) on an address of
// its own, for the gateway and the runner when TETHER_PPROF_ADDR is set. It
// never shares the gateway's public listener: profiles show memory and
// stacks, so the address is meant to be private (127.0.0.1, or a network
// only operators reach). The runner, which has no other listener, serves its
// Prometheus series there too (Handle).
package profiling

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Server is a running profiler endpoint.
type Server struct {
	mux  *http.ServeMux
	srv  *http.Server
	addr net.Addr
	done chan struct{}
}

// Start listens on addr (port 0 picks a free one) and serves /debug/pprof/
// until Close. It logs the address it listens on.
func Start(addr string, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	s := &Server{
		mux:  mux,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		addr: ln.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
	log.Info("pprof listening", "addr", s.addr.String())
	return s, nil
}

// Handle serves h at pattern on the profiler's address as well; it may be
// called while the server runs.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Addr is the address the profiler listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Close stops the server and waits for its goroutine; a profile being
// taken is cut short.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}
