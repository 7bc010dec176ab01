package auth

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr returns the address of the client that sent r. It is the
// connection's peer, unless the peer is one of the trusted proxies: then
// X-Forwarded-For is read from the right (the entry the nearest proxy
// appended) and the first address that is not itself a trusted proxy is the
// client. Entries left of it were written by the client or by proxies the
// hub does not know and could say anything, so they are never read; a
// malformed entry ends the walk at the last address read. With no trusted
// proxies X-Forwarded-For is ignored, since any client can send it. The
// zero Addr means the peer address could not be read.
//
// gin's Context.ClientIP is not used: a gin engine trusts every proxy
// unless told otherwise, which lets any client choose its address.
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	addr := peer.Addr().Unmap().WithZone("")
	if !Trusted(addr, trusted) {
		return addr
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, ok := parseHop(hops[i])
		if !ok {
			break
		}
		addr = hop
		if !Trusted(addr, trusted) {
			break
		}
	}
	return addr
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a
// port ("192.0.2.1:4711", "[2001:db8::1]:4711").
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

// Trusted reports whether addr is inside one of the prefixes.
func Trusted(addr netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// AddrKey is the unit that counts as one client: an IPv4 address, or the
// /64 network of an IPv6 address, because a single IPv6 host usually holds
// a whole /64 and could otherwise pose as 2^64 clients. The zero Addr
// gives the zero Prefix, one shared key for every unreadable peer.
func AddrKey(addr netip.Addr) netip.Prefix {
	switch {
	case addr.Is4():
		return netip.PrefixFrom(addr, 32)
	case addr.Is6():
		p, _ := addr.Prefix(64)
		return p
	}
	return netip.Prefix{}
}

// ParseProxies reads a list of trusted proxies, each an address
// ("10.0.0.7") or a network ("10.0.0.0/8", "fd00::/8").
func ParseProxies(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a network such as 10.0.0.0/8", s)
		}
		a = a.Unmap().WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
