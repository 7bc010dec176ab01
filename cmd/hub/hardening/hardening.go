// Package hardening gives the hub's HTTP servers the limits that keep slow
// or hostile clients from exhausting them: timeouts, a cap on header size,
// and caps on open connections, overall and per client address. See
// docs/server-hardening.md for the reasoning behind each default.
package hardening

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/time/rate"

	"github.com/thehub/hub/api/auth"
)

// Limits are the limits of one HTTP server.
type Limits struct {
	// ReadHeaderTimeout bounds the time a client has to send the request
	// line and headers, from the connection's first byte (or the end of
	// its previous request).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the time to send a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the headers to the end of
	// the response: reading the body, handling, and writing the answer. It
	// must therefore be longer than ReadTimeout.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a kept-alive connection may wait for its
	// next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers; beyond, the
	// server answers 431.
	MaxHeaderBytes int
	// MaxConns bounds the connections the server holds open at once; more
	// clients wait in the kernel's listen backlog until one closes.
	MaxConns int
	// MaxConnsPerAddr bounds the connections open at once from one client
	// address (an IPv4 address or an IPv6 /64, see auth.AddrKey); one more
	// is closed as soon as it is accepted. 0 means no bound. Trusted proxies
	// are exempt: every client behind them shares their address.
	MaxConnsPerAddr int
	// TrustedProxies are the reverse proxies in front of the hub.
	TrustedProxies []netip.Prefix
	// Log, when set, receives the server's own errors and, at most once a
	// minute, a warning that connections were refused.
	Log *slog.Logger
}

// Defaults are the limits of a hub whose configuration says nothing. A
// request may take 5 minutes, so an 8 MiB job request still arrives over a
// link of about 30 KB/s; headers must come within 10 seconds; a client
// holds at most 128 of a server's 1024 connections.
func Defaults() Limits {
	return Limits{
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute,
		WriteTimeout:      6 * time.Minute,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		MaxConns:          1024,
		MaxConnsPerAddr:   128,
	}
}

// Server returns an HTTP server for h with l's timeouts and header limit.
// Serve it on l.Listener(ln) for the connection caps. A request's context
// ends with its WriteTimeout, after which no answer could be written: the
// database statements it runs stop then instead of waiting on a database
// that no longer answers (the hub sets no other limit on them).
func (l Limits) Server(h http.Handler) *http.Server {
	if l.WriteTimeout > 0 {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), l.WriteTimeout)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
	if l.Log != nil {
		srv.ErrorLog = slog.NewLogLogger(l.Log.Handler(), slog.LevelWarn)
	}
	return srv
}

// Listener wraps ln with l's connection caps.
func (l Limits) Listener(ln net.Listener) net.Listener {
	if l.MaxConnsPerAddr > 0 {
		ln = &perAddrListener{Listener: ln, max: l.MaxConnsPerAddr, trusted: l.TrustedProxies, log: l.Log,
			open: map[netip.Prefix]int{}, warn: rate.NewLimiter(rate.Every(time.Minute), 1)}
	}
	if l.MaxConns > 0 {
		ln = netutil.LimitListener(ln, l.MaxConns)
	}
	return ln
}

// perAddrListener closes connections beyond max open ones per client.
type perAddrListener struct {
	net.Listener
	max     int
	trusted []netip.Prefix
	log     *slog.Logger
	warn    *rate.Limiter // of warnings about refused connections

	mu      sync.Mutex
	open    map[netip.Prefix]int // only keys with open connections
	refused int                  // since the last warning
}

func (l *perAddrListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		addr := peer.Addr().Unmap()
		if auth.Trusted(addr, l.trusted) {
			return c, nil
		}
		key := auth.AddrKey(addr)
		if l.acquire(key) {
			return &addrConn{Conn: c, release: func() { l.release(key) }}, nil
		}
		_ = c.Close()
	}
}

func (l *perAddrListener) acquire(key netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] < l.max {
		l.open[key]++
		return true
	}
	l.refused++
	if l.log != nil && l.warn.Allow() {
		l.log.Warn("refused connections from clients that already hold the most allowed",
			"listener", l.Addr().String(), "limit", l.max, "refused", l.refused, "last_client", key.String())
		l.refused = 0
	}
	return false
}

func (l *perAddrListener) release(key netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// addrConn gives its place back once, when closed.
type addrConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *addrConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
