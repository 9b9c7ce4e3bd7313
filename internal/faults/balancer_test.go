package faults

import (
	"net"
	"sync"
	"testing"
	"time"
)

// balancer is the load balancer of docs/deploy.md in miniature: one
// 127.0.0.1 address in front of the gateways. Each new TCP connection goes
// to the next gateway in turn (round robin, no stickiness); when that one
// refuses (a killed gateway), to the one after it, as a TCP balancer with
// health checks or a retried connect would. Bytes are relayed as they are;
// when either side closes, both do, so a tab on a killed gateway sees its
// connection drop and reconnects through the balancer.
type balancer struct {
	ln       net.Listener
	backends []backend

	mu     sync.Mutex
	next   int
	routed map[string]string // client address -> backend name
	counts map[string]int    // connections per backend
	open   map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

type backend struct{ name, addr string }

// startBalancer listens on a free 127.0.0.1 port in front of backends. It
// never restarts, so a port from :0 is fine. It is closed when t ends.
func startBalancer(t testing.TB, backends []backend) *balancer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("balancer: listen: %v", err)
	}
	b := &balancer{ln: ln, backends: backends, routed: map[string]string{}, counts: map[string]int{}, open: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	t.Cleanup(b.close)
	return b
}

func (b *balancer) addr() string { return b.ln.Addr().String() }

// backendOf names the gateway the connection from client (the tab's local
// address) was sent to; "" if the balancer never saw it.
func (b *balancer) backendOf(client string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.routed[client]
}

// stats is the number of connections sent to each gateway.
func (b *balancer) stats() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int, len(b.counts))
	for k, v := range b.counts {
		out[k] = v
	}
	return out
}

func (b *balancer) close() {
	b.mu.Lock()
	b.closed = true
	conns := make([]net.Conn, 0, len(b.open))
	for c := range b.open {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	_ = b.ln.Close()
	for _, c := range conns {
		_ = c.Close()
	}
	b.wg.Wait()
}

func (b *balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.open[c] = struct{}{}
	return true
}

func (b *balancer) untrack(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, c)
}

func (b *balancer) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go b.serve(c)
	}
}

// serve sends one client connection to the next gateway that accepts it.
func (b *balancer) serve(client net.Conn) {
	defer b.wg.Done()
	if !b.track(client) {
		_ = client.Close()
		return
	}
	defer b.untrack(client)
	defer client.Close()

	b.mu.Lock()
	first := b.next
	b.next = (b.next + 1) % len(b.backends)
	b.mu.Unlock()
	var server net.Conn
	var to backend
	for i := range b.backends {
		to = b.backends[(first+i)%len(b.backends)]
		c, err := net.DialTimeout("tcp", to.addr, 2*time.Second)
		if err == nil {
			server = c
			break
		}
	}
	if server == nil {
		return // every gateway refused: the client sees its connection close
	}
	if !b.track(server) {
		_ = server.Close()
		return
	}
	defer b.untrack(server)
	defer server.Close()
	b.mu.Lock()
	b.routed[client.RemoteAddr().String()] = to.name
	b.counts[to.name]++
	b.mu.Unlock()

	done := make(chan struct{}, 2)
	go func() { relay(server, client); done <- struct{}{} }()
	go func() { relay(client, server); done <- struct{}{} }()
	<-done
	// One side ended: end the other too, so its relay returns.
	_ = client.Close()
	_ = server.Close()
	<-done
}

// relay copies src to dst until either fails.
func relay(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
