package gateway

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// peerAddr is the address of the connection's other end.
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		a, _ := netip.ParseAddr(host)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

func trusted(a netip.Addr, proxies []netip.Prefix) bool {
	for _, p := range proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP is the client's address: the peer's, or, when the peer is a
// trusted proxy, the right-most X-Forwarded-For entry that is not a trusted
// proxy itself (entries to its left could be made up by the client).
func clientIP(r *http.Request, proxies []netip.Prefix) netip.Addr {
	peer := peerAddr(r)
	if !trusted(peer, proxies) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer
		}
		if a = a.Unmap(); !trusted(a, proxies) {
			return a
		}
	}
	return peer
}

// viaTLS reports whether the client used TLS: this connection is TLS, or a
// trusted proxy says so in X-Forwarded-Proto. Its last value is the one our
// proxy set (one that appends rather than replaces leaves the client's own
// claims to the left).
func viaTLS(r *http.Request, proxies []netip.Prefix) bool {
	if r.TLS != nil {
		return true
	}
	if !trusted(peerAddr(r), proxies) {
		return false
	}
	vals := strings.Split(strings.Join(r.Header.Values("X-Forwarded-Proto"), ","), ",")
	return strings.EqualFold(strings.TrimSpace(vals[len(vals)-1]), "https")
}
