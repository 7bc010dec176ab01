package hub_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/hub"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

// throttledAPI serves the hub API with a login throttle that trusts
// loopback as a proxy, so that X-Forwarded-For can play clients at
// different addresses. The throttle is in memory: one database kind is enough.
type throttledAPI struct {
	t      *testing.T
	url    string
	tokens *auth.Tokens
}

func newThrottledAPI(t *testing.T, cfg auth.ThrottleConfig) *throttledAPI {
	ctx := context.Background()
	db := dbtest.Open(t, "sqlite")
	require.NoError(t, models.EnsureAuthData(ctx, db))
	_, err := models.EnsureAdmin(ctx, db, "admin", apitest.AdminPassword, false)
	require.NoError(t, err)
	bob := &models.User{Username: "bob", IsActive: true}
	require.NoError(t, bob.SetPassword("password-bob"))
	require.NoError(t, models.CreateUser(ctx, db, bob, []string{models.GroupUsers}, 0))
	tokens, err := auth.NewTokens(ctx, db)
	require.NoError(t, err)
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tokens.Throttle = auth.NewThrottle(cfg)
	api := &hub.Server{DB: db, Tokens: tokens, IDP: &auth.IDP{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &throttledAPI{t: t, url: srv.URL, tokens: tokens}
}

// post sends body as JSON to path on behalf of a client at address client.
func (a *throttledAPI) post(client, path string, body any) apitest.Response {
	a.t.Helper()
	data, err := json.Marshal(body)
	require.NoError(a.t, err)
	req, err := http.NewRequest(http.MethodPost, a.url+path, bytes.NewReader(data))
	require.NoError(a.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", client)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: out}
}

func (a *throttledAPI) login(client, user, password string) apitest.Response {
	a.t.Helper()
	return a.post(client, "/api/auth/token/", map[string]string{"username": user, "password": password})
}

// requireThrottled checks a 429 with a JSON detail and a Retry-After of at
// most maxWait seconds (less by the time the failures took: the allowance
// refills steadily).
func requireThrottled(t *testing.T, r apitest.Response, maxWait int) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Body))
	require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"))
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.True(t, secs > maxWait-60 && secs <= maxWait, "Retry-After %d, want about %d", secs, maxWait)
	require.Equal(t, fmt.Sprintf("Too many failed attempts. Try again in %d seconds.", secs), r.Map()["detail"])
}

func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	a := newThrottledAPI(t, auth.ThrottleConfig{AccountFailures: 3, AddrFailures: 5, Window: time.Hour, MaxEntries: 100})

	// Per account: three wrong passwords from three addresses, then even the
	// right one waits, from a fourth address.
	for i := range 3 {
		require.Equal(t, http.StatusUnauthorized, a.login(fmt.Sprintf("192.0.2.%d", i+1), "admin", "wrong").Status)
	}
	requireThrottled(t, a.login("192.0.2.50", "admin", apitest.AdminPassword), 1200)
	// Another account logs in from another address.
	require.Equal(t, http.StatusCreated, a.login("198.51.100.1", "bob", "password-bob").Status)

	// Per address: five failures, each for another name, then nobody logs in
	// from there; other addresses still do.
	for i := range 5 {
		require.Equal(t, http.StatusUnauthorized, a.login("203.0.113.9", fmt.Sprintf("ghost%d", i), "x").Status)
	}
	requireThrottled(t, a.login("203.0.113.9", "bob", "password-bob"), 720)
	bob := a.login("203.0.113.10", "bob", "password-bob")
	require.Equal(t, http.StatusCreated, bob.Status)

	// Malformed requests check no credentials and are not throttled.
	for range 10 {
		require.Equal(t, http.StatusBadRequest, a.post("192.0.2.77", "/api/auth/token/", map[string]string{}).Status)
	}
	require.Equal(t, http.StatusUnauthorized, a.login("192.0.2.77", "ghost", "x").Status)

	// Refresh tokens: wrong ones count against the address.
	refresh := bob.Map()["refresh"].(string)
	for range 5 {
		require.Equal(t, http.StatusUnauthorized, a.post("203.0.113.20", "/api/auth/token/refresh/", map[string]string{"refresh": tamper(refresh)}).Status)
	}
	requireThrottled(t, a.post("203.0.113.20", "/api/auth/token/refresh/", map[string]string{"refresh": refresh}), 720)
	require.Equal(t, http.StatusCreated, a.post("203.0.113.21", "/api/auth/token/refresh/", map[string]string{"refresh": refresh}).Status)

	// Without an identity provider the exchange checks nothing and counts nothing.
	for range 10 {
		require.Equal(t, http.StatusNotFound, a.post("192.0.2.88", "/api/auth/idp/token/", map[string]string{"token": "x"}).Status)
	}
	require.Equal(t, http.StatusCreated, a.login("192.0.2.88", "bob", "password-bob").Status)
}

func TestLoginThrottleRecovers(t *testing.T) {
	t.Parallel()
	a := newThrottledAPI(t, auth.ThrottleConfig{AccountFailures: 1, AddrFailures: 1, Window: 2 * time.Second, MaxEntries: 100})
	require.Equal(t, http.StatusUnauthorized, a.login("192.0.2.1", "admin", "wrong").Status)
	requireThrottled(t, a.login("192.0.2.1", "admin", apitest.AdminPassword), 2)
	require.Eventually(t, func() bool {
		return a.login("192.0.2.1", "admin", apitest.AdminPassword).Status == http.StatusCreated
	}, 10*time.Second, 100*time.Millisecond)
}

// TestChangePasswordIsThrottled: POST /api/users/change_password/ checks
// old_password as a login checks a password, under the same per-account
// throttle. Before, a stolen token or client key went on guessing there,
// and a right guess changed the password, while the account's logins
// answered 429.
func TestChangePasswordIsThrottled(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	e.API.Tokens.Throttle = auth.NewThrottle(auth.ThrottleConfig{AccountFailures: 3, AddrFailures: 1000, Window: time.Hour, MaxEntries: 100})
	change := func(bearer, old string) apitest.Response {
		return e.Do(http.MethodPost, "/api/users/change_password/", bearer, map[string]string{"old_password": old, "new_password": "new-password-1"})
	}
	login := func(user, password string) apitest.Response {
		return e.Do(http.MethodPost, "/api/auth/token/", "", map[string]string{"username": user, "password": password})
	}

	// Wrong old passwords count as failed logins of the account ...
	frank := apitest.Bearer(e.CreateUser("frank"))
	for i := range 3 {
		require.Equal(t, http.StatusBadRequest, change(frank, fmt.Sprintf("guess-%d", i)).Status)
	}
	requireThrottled(t, change(frank, "password-frank"), 1200)
	requireThrottled(t, login("frank", "password-frank"), 1200)

	// ... and failed logins throttle the old password's check.
	gina := apitest.Bearer(e.CreateUser("gina"))
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, login("gina", "wrong").Status)
	}
	requireThrottled(t, change(gina, "password-gina"), 1200)
	u, err := models.GetUser(context.Background(), e.DB, "gina")
	require.NoError(t, err)
	require.True(t, u.CheckPassword("password-gina"), "the password is unchanged")

	// Other accounts are not held up; malformed requests count nothing.
	hank := apitest.Bearer(e.CreateUser("hank"))
	for range 5 {
		require.Equal(t, http.StatusBadRequest, change(hank, "").Status)
	}
	require.Equal(t, http.StatusCreated, change(hank, "password-hank").Status)
}
