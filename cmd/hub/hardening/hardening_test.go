package hardening

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serve runs l's server with a handler that reads the whole body and
// answers 200, and returns its address.
func serve(t *testing.T, l Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := l.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, "body not read", http.StatusRequestTimeout)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	go func() { _ = srv.Serve(l.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedBy reads c until the server closes it and reports whether that
// happened before deadline.
func closedBy(c net.Conn, deadline time.Time) bool {
	_ = c.SetReadDeadline(deadline)
	_, err := io.Copy(io.Discard, c) // nil at EOF; a reset is an error too
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// dribble writes first, then one byte every interval until the connection
// fails or stop is closed.
func dribble(c net.Conn, first string, interval time.Duration, stop <-chan struct{}) {
	if _, err := io.WriteString(c, first); err != nil {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
		}
	}
}

// TestSlowClientsAreCutOff opens many connections that send nothing, or a
// header or a body a byte at a time (never pausing long enough for a
// per-read timeout), and checks the server closes each once its
// header or request deadline has passed.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	l := Limits{ReadHeaderTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: 2 * time.Second,
		IdleTimeout: 500 * time.Millisecond, MaxHeaderBytes: 4096, MaxConns: 1000}
	addr := serve(t, l)
	stop := make(chan struct{})
	defer close(stop)

	kinds := []struct {
		name  string
		first string // sent at once; then a byte every 20 ms, unless empty
		limit time.Duration
	}{
		{"silent", "", l.ReadHeaderTimeout},
		{"slow header", "POST / HTTP/1.1\r\nHost: hub\r\nX-Slow: ", l.ReadHeaderTimeout},
		{"slow body", "POST / HTTP/1.1\r\nHost: hub\r\nContent-Length: 8388608\r\n\r\n", l.ReadTimeout},
	}
	const perKind = 40
	var wg sync.WaitGroup
	errs := make(chan error, len(kinds)*perKind)
	for _, k := range kinds {
		for range perKind {
			c := dial(t, addr)
			start := time.Now()
			if k.first != "" {
				go dribble(c, k.first, 20*time.Millisecond, stop)
			}
			wg.Go(func() {
				if !closedBy(c, start.Add(k.limit+5*time.Second)) {
					errs <- fmt.Errorf("%s: still open %s after its %s limit", k.name, 5*time.Second, k.limit)
				} else if took := time.Since(start); took < k.limit*9/10 {
					errs <- fmt.Errorf("%s: closed after %s, before its %s limit", k.name, took, k.limit)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// A client that is slow but within the limits is served.
	c := dial(t, addr)
	body := strings.Repeat("x", 10)
	_, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: hub\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	for i := range body {
		time.Sleep(20 * time.Millisecond)
		_, err := c.Write([]byte{body[i]})
		require.NoError(t, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// Kept alive, it is then closed when idle.
	require.True(t, closedBy(c, time.Now().Add(l.IdleTimeout+5*time.Second)), "idle connection still open")
}

func TestHeaderLimit(t *testing.T) {
	t.Parallel()
	l := Defaults()
	l.MaxHeaderBytes = 4096
	addr := serve(t, l)
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("a", 16<<10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	req.Header.Set("X-Big", strings.Repeat("a", 1<<10))
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// get sends a request on c and reports whether an answer came by deadline.
func get(c net.Conn, deadline time.Time) bool {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: hub\r\n\r\n"); err != nil {
		return false
	}
	_ = c.SetReadDeadline(deadline)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func TestConnectionsPerAddress(t *testing.T) {
	t.Parallel()
	l := Defaults()
	l.MaxConnsPerAddr = 5
	addr := serve(t, l)
	var held []net.Conn
	for range 5 {
		c := dial(t, addr)
		require.True(t, get(c, time.Now().Add(5*time.Second)))
		held = append(held, c)
	}
	// A sixth connection from the same address is closed at once.
	extra := dial(t, addr)
	require.True(t, closedBy(extra, time.Now().Add(5*time.Second)))
	// Closing one makes room.
	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool {
		c := dial(t, addr)
		defer c.Close()
		return get(c, time.Now().Add(time.Second))
	}, 5*time.Second, 20*time.Millisecond)

	// A trusted proxy is not bound: all its clients share its address.
	l.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	addr = serve(t, l)
	for range 10 {
		require.True(t, get(dial(t, addr), time.Now().Add(5*time.Second)))
	}
}

func TestConnectionsOverall(t *testing.T) {
	t.Parallel()
	l := Defaults()
	l.MaxConns = 2
	addr := serve(t, l)
	a, b := dial(t, addr), dial(t, addr)
	require.True(t, get(a, time.Now().Add(5*time.Second)))
	require.True(t, get(b, time.Now().Add(5*time.Second)))
	// A third waits, unanswered, until one of the two closes.
	c := dial(t, addr)
	require.False(t, get(c, time.Now().Add(300*time.Millisecond)))
	require.NoError(t, a.Close())
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestRequestContextEndsWithWriteTimeout: a handler's context has the
// server's write timeout as its deadline (and none without one), so a
// database statement it runs cannot outlive the answer it is for.
func TestRequestContextEndsWithWriteTimeout(t *testing.T) {
	for _, timeout := range []time.Duration{0, 3 * time.Second} {
		deadline := make(chan time.Duration, 1)
		srv := Limits{WriteTimeout: timeout}.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, ok := r.Context().Deadline()
			if !ok {
				deadline <- 0
				return
			}
			deadline <- time.Until(d)
		}))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = srv.Serve(ln) }()
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		require.NoError(t, err)
		resp.Body.Close()
		got := <-deadline
		require.NoError(t, srv.Close())
		if timeout == 0 {
			require.Zero(t, got)
			continue
		}
		require.Greater(t, got, timeout-time.Second)
		require.LessOrEqual(t, got, timeout)
	}
}
