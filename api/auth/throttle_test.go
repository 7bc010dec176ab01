package auth

import (
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a settable clock for throttles under test.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestThrottle(cfg ThrottleConfig) (*Throttle, *fakeClock) {
	clock := &fakeClock{t: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	t := NewThrottle(cfg)
	t.now = clock.now
	return t, clock
}

// from is a request whose peer is addr.
func from(addr string) *http.Request {
	return &http.Request{RemoteAddr: netip.AddrPortFrom(netip.MustParseAddr(addr), 4711).String(), Header: http.Header{}}
}

// try makes one attempt and reports it done with failed; it returns the
// wait when the throttle refused the attempt.
func try(th *Throttle, r *http.Request, account string, failed bool) time.Duration {
	done, wait := th.Allow(r, account)
	if wait > 0 {
		return wait
	}
	done(failed)
	return 0
}

func TestThrottlePerAccount(t *testing.T) {
	t.Parallel()
	th, clock := newTestThrottle(ThrottleConfig{AccountFailures: 3, AddrFailures: 100, Window: time.Minute, MaxEntries: 100})
	for i := range 3 {
		require.Zero(t, try(th, from(fmt.Sprintf("192.0.2.%d", i+1)), "alice", true), "failure %d", i+1)
	}
	// A fourth try, from yet another address and with the right password, waits
	// for one failure to come back: a minute / 3.
	require.Equal(t, 20*time.Second, try(th, from("192.0.2.9"), "alice", false))
	// Other accounts are not affected, from any address.
	require.Zero(t, try(th, from("192.0.2.1"), "bob", false))
	require.Zero(t, try(th, from("198.51.100.1"), "bob", false))

	// One failure comes back after Window/3, all of them after Window.
	clock.advance(20 * time.Second)
	require.Zero(t, try(th, from("192.0.2.9"), "alice", true))
	require.Equal(t, 20*time.Second, try(th, from("192.0.2.9"), "alice", false))
	clock.advance(time.Minute)
	for i := range 3 {
		require.Zero(t, try(th, from("192.0.2.9"), "alice", true), "failure %d after the window", i+1)
	}
	require.Positive(t, try(th, from("192.0.2.9"), "alice", false))
}

func TestThrottlePerAddress(t *testing.T) {
	t.Parallel()
	th, clock := newTestThrottle(ThrottleConfig{AccountFailures: 100, AddrFailures: 4, Window: time.Minute, MaxEntries: 100})
	for i := range 4 {
		require.Zero(t, try(th, from("192.0.2.1"), fmt.Sprintf("user%d", i), true))
	}
	require.Equal(t, 15*time.Second, try(th, from("192.0.2.1"), "someone-else", false))
	require.Equal(t, 15*time.Second, try(th, from("192.0.2.1"), "", false), "token exchanges name no account")
	require.Zero(t, try(th, from("192.0.2.2"), "someone-else", false), "another address")

	// An IPv6 client is its /64: changing the low bits does not help.
	for i := range 4 {
		require.Zero(t, try(th, from(fmt.Sprintf("2001:db8:1:2::%x", i+1)), "", true))
	}
	require.Positive(t, try(th, from("2001:db8:1:2:ffff::1"), "", false))
	require.Zero(t, try(th, from("2001:db8:1:3::1"), "", false))

	clock.advance(time.Minute)
	require.Zero(t, try(th, from("192.0.2.1"), "someone-else", false), "recovered after the window")
}

func TestThrottleSuccessesAreFree(t *testing.T) {
	t.Parallel()
	th, _ := newTestThrottle(ThrottleConfig{AccountFailures: 2, AddrFailures: 2, Window: time.Hour, MaxEntries: 100})
	for range 50 {
		require.Zero(t, try(th, from("192.0.2.1"), "alice", false))
	}
	require.Empty(t, th.accounts.byKey, "successful checks leave nothing behind")
	require.Empty(t, th.addrs.byKey)
}

func TestThrottleAttemptsInProgressCount(t *testing.T) {
	t.Parallel()
	th, _ := newTestThrottle(ThrottleConfig{AccountFailures: 3, AddrFailures: 100, Window: time.Minute, MaxEntries: 100})
	var dones []func(bool)
	for range 3 {
		done, wait := th.Allow(from("192.0.2.1"), "alice")
		require.Zero(t, wait)
		dones = append(dones, done)
	}
	// Three checks in flight hold the whole allowance: a parallel fourth waits.
	_, wait := th.Allow(from("192.0.2.2"), "alice")
	require.Positive(t, wait)
	dones[0](false)
	dones[0](true) // a second call is ignored
	done, wait := th.Allow(from("192.0.2.2"), "alice")
	require.Zero(t, wait, "a successful check gives its place back")
	done(true)
	dones[1](true)
	dones[2](true)
	_, wait = th.Allow(from("192.0.2.2"), "alice")
	require.Equal(t, 20*time.Second, wait)
}

func TestThrottleBoundedState(t *testing.T) {
	t.Parallel()
	th, _ := newTestThrottle(ThrottleConfig{AccountFailures: 5, AddrFailures: 5, Window: time.Hour, MaxEntries: 50})
	for i := range 5000 {
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
		try(th, from(addr), fmt.Sprintf("random-%d-%s", i, string(make([]byte, 1000))), true)
		require.LessOrEqual(t, len(th.accounts.byKey), 50)
		require.LessOrEqual(t, th.accounts.lru.Len(), 50)
		require.LessOrEqual(t, len(th.addrs.byKey), 50)
	}
	// The account under attack now keeps its count: each failure makes it
	// the most recently failed, and only the least recently failed are forgotten.
	for round := range 5 {
		require.Zero(t, try(th, from("192.0.2.1"), "victim", true))
		for i := range 20 {
			try(th, from(fmt.Sprintf("198.51.100.%d", i)), fmt.Sprintf("noise-%d-%d", round, i), true)
		}
	}
	require.Positive(t, try(th, from("192.0.2.2"), "victim", false))
}

func TestNilThrottleAllowsEverything(t *testing.T) {
	t.Parallel()
	var th *Throttle
	for range 100 {
		require.Zero(t, try(th, from("192.0.2.1"), "alice", true))
	}
}

func TestClientAddr(t *testing.T) {
	t.Parallel()
	proxies, err := ParseProxies([]string{"10.0.0.0/8", " 192.0.2.7 ", "", "fd00::/8"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		peer    string
		xff     []string
		trusted []netip.Prefix
		want    string
	}{
		{"no proxies: X-Forwarded-For ignored", "203.0.113.5", []string{"198.51.100.1"}, nil, "203.0.113.5"},
		{"untrusted peer: ignored", "203.0.113.5", []string{"198.51.100.1"}, proxies, "203.0.113.5"},
		{"trusted peer", "10.1.2.3", []string{"198.51.100.1"}, proxies, "198.51.100.1"},
		{"spoofed entries left of the real client", "10.1.2.3", []string{"1.1.1.1, 198.51.100.1"}, proxies, "198.51.100.1"},
		{"chain of trusted proxies", "10.1.2.3", []string{"198.51.100.1, 10.9.9.9", "192.0.2.7"}, proxies, "198.51.100.1"},
		{"entry with a port", "192.0.2.7", []string{"198.51.100.1:5555"}, proxies, "198.51.100.1"},
		{"IPv6 entry with a port", "192.0.2.7", []string{"[2001:db8::1]:5555"}, proxies, "2001:db8::1"},
		{"malformed entry stops the walk", "10.1.2.3", []string{"198.51.100.1, garbage, 10.0.0.1"}, proxies, "10.0.0.1"},
		{"trusted peer without header", "10.1.2.3", nil, proxies, "10.1.2.3"},
		{"IPv6 proxy", "fd00::1", []string{"2001:db8::5"}, proxies, "2001:db8::5"},
		{"IPv4-mapped peer", "::ffff:203.0.113.5", nil, proxies, "203.0.113.5"},
	} {
		r := from(tc.peer)
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		require.Equal(t, tc.want, ClientAddr(r, tc.trusted).String(), tc.name)
	}
	require.False(t, ClientAddr(&http.Request{RemoteAddr: "@"}, proxies).IsValid())

	_, err = ParseProxies([]string{"proxy.example.com"})
	require.Error(t, err)
	require.Equal(t, "2001:db8:1:2::/64", AddrKey(netip.MustParseAddr("2001:db8:1:2:3:4:5:6")).String())
	require.Equal(t, "192.0.2.1/32", AddrKey(netip.MustParseAddr("192.0.2.1")).String())
}
