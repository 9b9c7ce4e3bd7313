package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// DefaultListen is the embedded server's client address by default
// (TETHER_NATS_LISTEN), and where a runner looks for NATS (NATS_URL).
const DefaultListen = "127.0.0.1:4222"

// ServerConfig configures the embedded NATS server.
type ServerConfig struct {
	// Listen is the client address, DefaultListen by default; port 0 (or
	// -1) picks a free port, which srv.ClientURL() then reports.
	Listen string
	// StoreDir holds JetStream's files, under StoreDir/nats. Required.
	StoreDir string
	// Logger receives the server's warnings and errors; nil discards them.
	// Notices go at debug level: they are routine.
	Logger *slog.Logger
}

// readyTimeout bounds how long StartServer waits for the listener and JetStream.
const readyTimeout = 10 * time.Second

// StartServer starts an embedded nats-server with JetStream and waits until it
// accepts connections. The caller owns it: srv.Shutdown() then
// srv.WaitForShutdown().
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("start NATS: no store directory")
	}
	listen := cfg.Listen
	if listen == "" {
		listen = DefaultListen
	}
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("start NATS: listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < -1 || port > 65535 {
		return nil, fmt.Errorf("start NATS: listen address %q: bad port", listen)
	}
	if port == 0 {
		// nats-server reads 0 as "the default port"; 0 means "any" to us.
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "tether",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(cfg.StoreDir, "nats"),
		NoSigs:     true,
		// No HTTP monitor, no cluster: the embedded server serves this process
		// and the runners of one machine.
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start NATS: %w", err)
	}
	log := &serverLog{log: cfg.Logger}
	srv.SetLoggerV2(log, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) || !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		if fatal := log.fatal(); fatal != "" {
			return nil, fmt.Errorf("start NATS on %s: %s", listen, fatal)
		}
		return nil, fmt.Errorf("start NATS on %s: not ready within %s", listen, readyTimeout)
	}
	return srv, nil
}

// serverLog routes nats-server's log to slog and remembers the last fatal
// message, which is the only explanation a failed start gives.
type serverLog struct {
	log *slog.Logger

	mu        sync.Mutex
	lastFatal string
}

func (l *serverLog) emit(level slog.Level, format string, v []any) {
	if l.log != nil {
		l.log.Log(context.Background(), level, "nats-server: "+fmt.Sprintf(format, v...))
	}
}

func (l *serverLog) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastFatal
}

func (l *serverLog) Noticef(format string, v ...any) { l.emit(slog.LevelDebug, format, v) }
func (l *serverLog) Warnf(format string, v ...any)   { l.emit(slog.LevelWarn, format, v) }
func (l *serverLog) Errorf(format string, v ...any)  { l.emit(slog.LevelError, format, v) }
func (l *serverLog) Debugf(format string, v ...any)  {}
func (l *serverLog) Tracef(format string, v ...any)  {}

// Fatalf records the message instead of exiting: the caller decides.
func (l *serverLog) Fatalf(format string, v ...any) {
	l.mu.Lock()
	l.lastFatal = fmt.Sprintf(format, v...)
	l.mu.Unlock()
	l.emit(slog.LevelError, format, v)
}
