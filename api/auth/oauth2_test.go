package auth_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

type oauthEnv struct {
	t      *testing.T
	db     *bun.DB
	tokens *auth.Tokens
	url    string
}

func newOAuthEnv(t *testing.T, db *bun.DB) *oauthEnv {
	ctx := context.Background()
	require.NoError(t, models.EnsureAuthData(ctx, db))
	tokens, err := auth.NewTokens(ctx, db)
	require.NoError(t, err)
	users := []struct {
		name   string
		groups []string
		active bool
	}{
		{"writer", []string{models.GroupAdministrators}, true},
		{"reader", []string{models.GroupUsers}, true},
		{"nobody", []string{}, true},
		{"gone", []string{models.GroupUsers}, false},
	}
	for _, u := range users {
		m := &models.User{Username: u.name, IsActive: u.active}
		require.NoError(t, m.SetPassword("password-"+u.name))
		require.NoError(t, models.CreateUser(ctx, db, m, u.groups, 0))
	}
	srv := httptest.NewServer((&auth.OAuth2Server{DB: db, Tokens: tokens, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	t.Cleanup(srv.Close)
	return &oauthEnv{t: t, db: db, tokens: tokens, url: srv.URL}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func (e *oauthEnv) do(req *http.Request) answer {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return answer{resp.StatusCode, resp.Header, body}
}

func (e *oauthEnv) post(form url.Values, contentType string) answer {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/oauth2/token", strings.NewReader(form.Encode()))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", contentType)
	return e.do(req)
}

func (e *oauthEnv) token(user string) string {
	e.t.Helper()
	a := e.post(url.Values{"grant_type": {"password"}, "username": {user}, "password": {"password-" + user}}, "application/x-www-form-urlencoded")
	require.Equal(e.t, http.StatusOK, a.status, a.body)
	return a.body["access_token"].(string)
}

func TestOAuth2TokenErrors(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		e := newOAuthEnv(t, db)
		form := "application/x-www-form-urlencoded"
		cases := []struct {
			name   string
			form   url.Values
			ctype  string
			status int
			code   string
		}{
			{"good", url.Values{"grant_type": {"password"}, "username": {"writer"}, "password": {"password-writer"}}, form, http.StatusOK, ""},
			{"wrong password", url.Values{"grant_type": {"password"}, "username": {"writer"}, "password": {"nope"}}, form, http.StatusBadRequest, "invalid_grant"},
			{"unknown user", url.Values{"grant_type": {"password"}, "username": {"ghost"}, "password": {"x"}}, form, http.StatusBadRequest, "invalid_grant"},
			{"inactive user", url.Values{"grant_type": {"password"}, "username": {"gone"}, "password": {"password-gone"}}, form, http.StatusBadRequest, "invalid_grant"},
			{"client credentials", url.Values{"grant_type": {"client_credentials"}}, form, http.StatusBadRequest, "unsupported_grant_type"},
			{"no grant type", url.Values{"username": {"writer"}, "password": {"password-writer"}}, form, http.StatusBadRequest, "invalid_request"},
			{"no password", url.Values{"grant_type": {"password"}, "username": {"writer"}}, form, http.StatusBadRequest, "invalid_request"},
			{"no username", url.Values{"grant_type": {"password"}, "password": {"x"}}, form, http.StatusBadRequest, "invalid_request"},
			{"repeated", url.Values{"grant_type": {"password"}, "username": {"writer", "reader"}, "password": {"x"}}, form, http.StatusBadRequest, "invalid_request"},
			{"json body", url.Values{"grant_type": {"password"}}, "application/json", http.StatusBadRequest, "invalid_request"},
		}
		for _, tc := range cases {
			a := e.post(tc.form, tc.ctype)
			require.Equal(t, tc.status, a.status, "%s: %v", tc.name, a.body)
			require.Equal(t, "no-store", a.header.Get("Cache-Control"), tc.name)
			if tc.code != "" {
				require.Equal(t, tc.code, a.body["error"], tc.name)
				require.NotEmpty(t, a.body["error_description"], tc.name)
				continue
			}
			require.Equal(t, "Bearer", a.body["token_type"])
			require.Equal(t, float64(86400), a.body["expires_in"])
			require.NotEmpty(t, a.body["access_token"])
			require.Equal(t, "storage-admin storage-reader", a.body["scope"])
		}

		req, _ := http.NewRequest(http.MethodGet, e.url+"/oauth2/token", nil)
		a := e.do(req)
		require.Equal(t, http.StatusMethodNotAllowed, a.status)
		require.Equal(t, "POST", a.header.Get("Allow"))
	})
}

func TestOAuth2TokenInfo(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		e := newOAuthEnv(t, db)
		writer, reader, nobody := e.token("writer"), e.token("reader"), e.token("nobody")
		get := func(path string, set func(*http.Request)) answer {
			req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
			require.NoError(t, err)
			if set != nil {
				set(req)
			}
			return e.do(req)
		}
		basic := func(tok string) func(*http.Request) { return func(r *http.Request) { r.SetBasicAuth(tok, "") } }
		bearer := func(tok string) func(*http.Request) {
			return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
		}

		for _, tc := range []struct {
			name  string
			path  string
			set   func(*http.Request)
			roles []any
		}{
			{"writer basic", "/tokeninfo", basic(writer), []any{"storage-admin", "storage-reader"}},
			{"reader bearer", "/tokeninfo", bearer(reader), []any{"storage-reader"}},
			{"reader query", "/oauth2/token_info?access_token=" + reader, nil, []any{"storage-reader"}},
			{"no roles", "/tokeninfo", basic(nobody), []any{}},
		} {
			a := get(tc.path, tc.set)
			require.Equal(t, http.StatusOK, a.status, "%s: %v", tc.name, a.body)
			require.Equal(t, tc.roles, a.body["roles"], tc.name)
			require.Equal(t, true, a.body["active"], tc.name)
			require.InDelta(t, 86400, a.body["expires_in"], 5, tc.name)
		}

		// Missing, forged, hub access and expired tokens are refused.
		a := get("/tokeninfo", nil)
		require.Equal(t, http.StatusUnauthorized, a.status)
		require.Equal(t, "invalid_request", a.body["error"])
		require.Contains(t, a.header.Get("WWW-Authenticate"), "Bearer")
		a = get("/tokeninfo", basic(writer+"x"))
		require.Equal(t, http.StatusUnauthorized, a.status)
		require.Equal(t, "invalid_token", a.body["error"])
		u, err := models.GetUser(context.Background(), db, "writer")
		require.NoError(t, err)
		access, err := e.tokens.Issue(u, auth.TypeAccess)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, get("/tokeninfo", bearer(access)).status, "a hub access token is not a C+J token")
		old, err := e.tokens.WithClock(func() time.Time { return time.Now().Add(-25 * time.Hour) }).IssueCJ(u, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusUnauthorized, get("/tokeninfo", bearer(old)).status, "expired")

		// Roles follow the user's permissions now; deactivation ends the token.
		r, err := models.GetUser(context.Background(), db, "reader")
		require.NoError(t, err)
		require.NoError(t, models.SetUserGroups(context.Background(), db, r, []string{models.GroupAdministrators}))
		require.Equal(t, []any{"storage-admin", "storage-reader"}, get("/tokeninfo", basic(reader)).body["roles"])
		r.IsActive = false
		require.NoError(t, models.UpdateUser(context.Background(), db, r, nil, 0))
		require.Equal(t, http.StatusUnauthorized, get("/tokeninfo", basic(reader)).status)
	})
}

// TestOAuth2TokenRefusesTextNoCredentialHolds: a user name or password
// holding NUL or invalid UTF-8 is invalid_request (400), as the hub API
// refuses such text with 400. Before, the user name went to the database,
// which refused NUL, and the answer was 500 server_error.
func TestOAuth2TokenRefusesTextNoCredentialHolds(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		e := newOAuthEnv(t, db)
		for _, f := range []url.Values{
			{"username": {"wri\x00ter"}, "password": {"password-writer"}},
			{"username": {"\xff\xfe"}, "password": {"x"}},
			{"username": {"writer"}, "password": {"password-writer\x00"}},
			{"username": {"writer"}, "password": {"\xffpassword"}},
		} {
			f.Set("grant_type", "password")
			a := e.post(f, "application/x-www-form-urlencoded")
			require.Equal(t, http.StatusBadRequest, a.status, "%q: %v", f, a.body)
			require.Equal(t, "invalid_request", a.body["error"], "%q", f)
			require.Contains(t, a.body["error_description"], "null character", "%q", f)
		}
		e.token("writer")
	})
}
