package auth_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/models/dbtest"
)

// loopback is trusted as a proxy in the throttle tests, so that
// X-Forwarded-For can play clients at different addresses.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

func TestOAuth2TokenThrottle(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, dbtest.Open(t, "sqlite"))
	e.tokens.Throttle = auth.NewThrottle(auth.ThrottleConfig{AccountFailures: 3, AddrFailures: 5, Window: time.Hour,
		MaxEntries: 100, TrustedProxies: loopback})
	login := func(client, user, password string) answer {
		t.Helper()
		form := url.Values{"grant_type": {"password"}, "username": {user}, "password": {password}}
		req, err := http.NewRequest(http.MethodPost, e.url+"/oauth2/token", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-For", client)
		return e.do(req)
	}
	// throttled checks a 429 whose Retry-After is at most maxWait seconds
	// (less by the time the failures took: the allowance refills steadily).
	throttled := func(a answer, maxWait int) {
		t.Helper()
		require.Equal(t, http.StatusTooManyRequests, a.status, a.body)
		require.Equal(t, "slow_down", a.body["error"])
		secs, err := strconv.Atoi(a.header.Get("Retry-After"))
		require.NoError(t, err)
		require.True(t, secs > maxWait-60 && secs <= maxWait, "Retry-After %d, want about %d", secs, maxWait)
		require.Contains(t, a.body["error_description"], fmt.Sprintf("Try again in %d seconds", secs))
		require.Equal(t, "no-store", a.header.Get("Cache-Control"))
	}

	// Per account: three wrong passwords from three addresses, then even the
	// right one waits, from a fourth address.
	for i := range 3 {
		a := login(fmt.Sprintf("192.0.2.%d", i+1), "writer", "wrong")
		require.Equal(t, http.StatusBadRequest, a.status, a.body)
		require.Equal(t, "invalid_grant", a.body["error"])
	}
	throttled(login("192.0.2.50", "writer", "password-writer"), 1200)
	// Another account from another address logs in.
	require.Equal(t, http.StatusOK, login("198.51.100.1", "reader", "password-reader").status)

	// Per address: five failures, each for another name, then nobody logs in
	// from there; other addresses still do.
	for i := range 5 {
		require.Equal(t, http.StatusBadRequest, login("203.0.113.9", fmt.Sprintf("ghost%d", i), "x").status)
	}
	throttled(login("203.0.113.9", "reader", "password-reader"), 720)
	require.Equal(t, http.StatusOK, login("203.0.113.10", "reader", "password-reader").status)

	// Requests that are not credential checks are never throttled.
	require.Equal(t, http.StatusBadRequest, e.post(url.Values{"grant_type": {"client_credentials"}}, "application/x-www-form-urlencoded").status)

	// The allowance comes back: with a short window the right password is
	// accepted again soon after.
	e.tokens.Throttle = auth.NewThrottle(auth.ThrottleConfig{AccountFailures: 1, AddrFailures: 1, Window: 2 * time.Second,
		MaxEntries: 100, TrustedProxies: loopback})
	require.Equal(t, http.StatusBadRequest, login("192.0.2.1", "writer", "wrong").status)
	throttled(login("192.0.2.1", "writer", "password-writer"), 2)
	require.Eventually(t, func() bool {
		return login("192.0.2.1", "writer", "password-writer").status == http.StatusOK
	}, 10*time.Second, 100*time.Millisecond)
}
