package faults

import (
	"net"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP relay between one runner and Postgres that can be paused:
// while paused it forwards nothing in either direction but keeps every
// connection open, holding what it has read. To the runner, Postgres has
// gone silent (a partition), not away (a refused or reset connection), and
// the runner still reaches NATS.
type proxy struct {
	ln       net.Listener
	upstream string

	mu       sync.Mutex
	paused   bool
	resumed  chan struct{} // closed on resume; replaced on pause
	conns    map[net.Conn]struct{}
	closed   bool
	accepted int
	// held counts chunks that waited for a resume, to show the pause bit.
	held int
	wg   sync.WaitGroup
}

// startProxy listens on a free 127.0.0.1 port and relays to upstream
// (host:port). It is closed when the test ends.
func startProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: listen: %v", err)
	}
	p := &proxy{ln: ln, upstream: upstream, resumed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.resumed)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// addr is where clients connect instead of upstream.
func (p *proxy) addr() string { return p.ln.Addr().String() }

// pause stops forwarding from now on, in both directions.
func (p *proxy) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resumed = make(chan struct{})
	}
}

// resume forwards again, starting with what was held.
func (p *proxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resumed)
	}
}

// stats reports how many connections the proxy accepted and how many
// chunks it held back during pauses.
func (p *proxy) stats() (accepted, held int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.held
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	if p.paused {
		p.paused = false
		close(p.resumed)
	}
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(1)
		go p.relay(client)
	}
}

// relay connects a client to upstream and copies both ways until either
// side closes, then closes both.
func (p *proxy) relay(client net.Conn) {
	defer p.wg.Done()
	if !p.track(client) {
		_ = client.Close()
		return
	}
	defer p.untrack(client)
	defer client.Close()
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(server) {
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	defer server.Close()

	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
	// One side ended: end the other too, so its pipe returns.
	_ = client.Close()
	_ = server.Close()
	<-done
}

// pipe copies src to dst, holding each chunk while the proxy is paused.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed connection: relay closes both sides
		}
	}
}

// gate waits while the proxy is paused; false when it was closed meanwhile.
func (p *proxy) gate() bool {
	p.mu.Lock()
	resumed, paused := p.resumed, p.paused
	if paused {
		p.held++
	}
	p.mu.Unlock()
	<-resumed
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.closed
}
