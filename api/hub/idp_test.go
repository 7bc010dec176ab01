package hub_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// issuer is an OpenID Connect provider started inside the test: its own
// discovery document and JWKS, and a signing key.
type issuer struct {
	srv      *httptest.Server
	key      *rsa.PrivateKey
	jwksHits atomic.Int32
	audience string
}

func newIssuer(t *testing.T) *issuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	iss := &issuer{key: key, audience: "hub-client"}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss.srv.URL, "jwks_uri": iss.srv.URL + "/jwks",
			"authorization_endpoint": iss.srv.URL + "/auth", "token_endpoint": iss.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		iss.jwksHits.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	iss.srv = httptest.NewServer(mux)
	t.Cleanup(iss.srv.Close)
	return iss
}

// token signs an ID token; edit adjusts the claims, key overrides the signer.
func (iss *issuer) token(t *testing.T, sub string, edit func(jwt.MapClaims), key *rsa.PrivateKey) string {
	claims := jwt.MapClaims{"iss": iss.srv.URL, "sub": sub, "aud": iss.audience,
		"iat": time.Now().Unix(), "exp": time.Now().Add(5 * time.Minute).Unix(),
		"preferred_username": sub, "email": sub + "@example.org", "given_name": "Ida"}
	if edit != nil {
		edit(claims)
	}
	if key == nil {
		key = iss.key
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func TestIDPTokenExchange(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		exchange := func(tok string) apitest.Response {
			return e.Do(http.MethodPost, "/api/auth/idp/token/", "", map[string]string{"token": tok})
		}
		// Without a configured issuer the endpoint says so.
		require.Equal(t, http.StatusNotFound, exchange("x").Status)

		iss := newIssuer(t)
		e.API.IDP = &auth.IDP{Issuer: iss.srv.URL, ClientID: "hub-client"}

		r := exchange(iss.token(t, "ida", nil, nil))
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		m := r.Map()
		user := m["user"].(map[string]any)
		require.Equal(t, "ida", user["username"])
		require.Equal(t, "ida@example.org", user["email"])
		require.Equal(t, "Users", user["groups"].([]any)[0].(map[string]any)["name"])
		// The hub tokens work.
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/my-permissions/", apitest.Bearer(m["access"].(string)), nil).Status)
		require.Equal(t, http.StatusCreated, e.Do(http.MethodPost, "/api/auth/token/refresh/", "", map[string]string{"refresh": m["refresh"].(string)}).Status)

		// The same identity maps to the same user, even if its username claim changes.
		r = exchange(iss.token(t, "ida", func(c jwt.MapClaims) { c["preferred_username"] = "ida2" }, nil))
		require.Equal(t, http.StatusCreated, r.Status)
		require.Equal(t, user["id"], r.Map()["user"].(map[string]any)["id"])
		require.Equal(t, int32(1), iss.jwksHits.Load(), "JWKS is cached within idp_jwks_timeout")

		// An existing local user with the same username is linked, not
		// duplicated, once the provider vouches for the account's email;
		// a superuser never. (A username claim is often the user's own
		// choice at the provider: the bootstrap admin was taken over.)
		e.CreateUser("henry")
		verified := func(c jwt.MapClaims) { c["email_verified"] = true }
		for name, tok := range map[string]string{
			"no email on the account": iss.token(t, "henry", verified, nil),
			"superuser":               iss.token(t, "admin", verified, nil),
			"admin by email":          iss.token(t, "x", func(c jwt.MapClaims) { c["preferred_username"] = ""; c["email"] = "admin" }, nil),
		} {
			r := exchange(tok)
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s: %s", name, r.Body)
			require.Contains(t, r.Map()["detail"], "belongs to a local account", name)
		}
		r = e.AsAdmin(http.MethodPatch, "/api/users/henry/", map[string]any{"email": "Henry@example.org"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = exchange(iss.token(t, "henry", nil, nil))
		require.Equal(t, http.StatusUnauthorized, r.Status, "email not verified: %s", r.Body)
		r = exchange(iss.token(t, "henry", func(c jwt.MapClaims) { c["email_verified"] = "true" }, nil))
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.Equal(t, "henry", r.Map()["user"].(map[string]any)["username"])

		// Wrong audience, expired, foreign signature, other issuer, garbage.
		foreign, err := rsa.GenerateKey(rand.Reader, 2048)
		require.NoError(t, err)
		bad := map[string]string{
			"wrong audience":    iss.token(t, "ida", func(c jwt.MapClaims) { c["aud"] = "someone-else" }, nil),
			"expired":           iss.token(t, "ida", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() }, nil),
			"foreign signature": iss.token(t, "ida", nil, foreign),
			"other issuer":      iss.token(t, "ida", func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }, nil),
			"garbage":           "not-a-jwt",
		}
		for name, tok := range bad {
			r := exchange(tok)
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s: %s", name, r.Body)
			require.Contains(t, r.Map(), "detail")
		}
		require.Equal(t, http.StatusBadRequest, e.Do(http.MethodPost, "/api/auth/idp/token/", "", map[string]string{}).Status)

		// A deactivated linked user cannot exchange.
		require.Equal(t, http.StatusCreated, e.AsAdmin(http.MethodPost, "/api/users/ida/deactivate/", nil).Status)
		require.Equal(t, http.StatusUnauthorized, exchange(iss.token(t, "ida", nil, nil)).Status)

		// idp_jwks_timeout 0 disables the cache: every exchange refetches.
		conf, err := models.GetConfiguration(context.Background(), e.DB)
		require.NoError(t, err)
		conf.IDPJWKSTimeout = 0
		require.NoError(t, models.SaveConfiguration(context.Background(), e.DB, conf))
		before := iss.jwksHits.Load()
		require.Equal(t, http.StatusCreated, exchange(iss.token(t, "henry", nil, nil)).Status)
		require.Equal(t, http.StatusCreated, exchange(iss.token(t, "henry", nil, nil)).Status)
		require.Equal(t, before+2, iss.jwksHits.Load())
	})
}

// TestIDPClaimsHoldingNullAreRefused: an ID token whose claims hold NUL,
// which no database stores in text, is refused (401) as the hub API
// refuses such text with a 4xx. Before, the lookup of the subject failed
// and the answer was 500.
func TestIDPClaimsHoldingNullAreRefused(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		iss := newIssuer(t)
		e.API.IDP = &auth.IDP{Issuer: iss.srv.URL, ClientID: "hub-client"}
		for _, claim := range []string{"sub", "email", "given_name", "family_name"} {
			tok := iss.token(t, "nul", func(c jwt.MapClaims) { c[claim] = "a\x00b" }, nil)
			r := e.Do(http.MethodPost, "/api/auth/idp/token/", "", map[string]string{"token": tok})
			require.Equal(t, http.StatusUnauthorized, r.Status, "%s: %s", claim, r.Body)
			require.Contains(t, r.Map()["detail"], "null character", claim)
		}
		r := e.Do(http.MethodPost, "/api/auth/idp/token/", "", map[string]string{"token": iss.token(t, "nul", nil, nil)})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	})
}
