package hub_test

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

func TestTokenObtainRefreshVerify(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		r := e.Do(http.MethodPost, "/api/auth/token/", "", map[string]string{"username": "admin", "password": apitest.AdminPassword})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		access, refresh := r.Map()["access"].(string), r.Map()["refresh"].(string)

		// The tokens carry the spec's lifetimes.
		for tok, life := range map[string]time.Duration{access: time.Hour, refresh: 24 * time.Hour} {
			claims := jwt.MapClaims{}
			_, _, err := jwt.NewParser().ParseUnverified(tok, claims)
			require.NoError(t, err)
			exp, _ := claims.GetExpirationTime()
			iat, _ := claims.GetIssuedAt()
			require.Equal(t, life, exp.Sub(iat.Time))
		}

		verify := func(token, typ string) int {
			return e.Do(http.MethodPost, "/api/auth/token/verify/", "", map[string]string{"token": token, "type": typ}).Status
		}
		require.Equal(t, http.StatusCreated, verify(access, "access"))
		require.Equal(t, http.StatusCreated, verify(refresh, "refresh"))
		require.Equal(t, http.StatusUnauthorized, verify(refresh, "access"), "a refresh token is not an access token")
		require.Equal(t, http.StatusUnauthorized, verify(access, "refresh"))
		require.Equal(t, http.StatusUnauthorized, verify(tamper(access), "access"))
		require.Equal(t, http.StatusBadRequest, verify(access, "other"))
		require.Equal(t, http.StatusBadRequest, verify("", "access"))

		r = e.Do(http.MethodPost, "/api/auth/token/refresh/", "", map[string]string{"refresh": refresh})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/my-permissions/", apitest.Bearer(r.Map()["access"].(string)), nil).Status)
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodPost, "/api/auth/token/refresh/", "", map[string]string{"refresh": access}).Status)
		require.Equal(t, http.StatusBadRequest, e.Do(http.MethodPost, "/api/auth/token/refresh/", "", map[string]string{}).Status)

		// A refresh token does not authenticate API calls; neither does a tampered token.
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/users/", apitest.Bearer(refresh), nil).Status)
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/users/", apitest.Bearer(tamper(access)), nil).Status)
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/users/", "", nil).Status)
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/users/", "Basic abc", nil).Status)

		// Wrong credentials and malformed input.
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodPost, "/api/auth/token/", "", map[string]string{"username": "admin", "password": "nope"}).Status)
		require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodPost, "/api/auth/token/", "", map[string]string{"username": "ghost", "password": "nope"}).Status)
		r = e.Do(http.MethodPost, "/api/auth/token/", "", map[string]string{})
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Contains(t, r.Map(), "username")
		require.Contains(t, r.Map(), "password")
		r = e.Do(http.MethodPost, "/api/auth/token/", "", `{"username": `)
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Contains(t, r.Map()["detail"], "JSON parse error")
		require.Equal(t, http.StatusBadRequest, e.Do(http.MethodPost, "/api/auth/token/", "", `{"username": 5, "password": "x"}`).Status)
	})
}

// tamper flips one character of the signature.
func tamper(tok string) string {
	i := strings.LastIndexByte(tok, '.') + 5
	c := byte('A')
	if tok[i] == 'A' {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}

func TestExpiredTokenAndPublicKey(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	r := e.Do(http.MethodGet, "/api/auth/token/publickey/", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
	block, _ := pem.Decode([]byte(r.Map()["public_key"].(string)))
	require.NotNil(t, block)
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	require.NoError(t, err)

	// The served key verifies the hub's tokens.
	_, err = jwt.Parse(e.Admin, func(*jwt.Token) (any, error) { return pub, nil })
	require.NoError(t, err)

	// A token signed with a foreign key is refused.
	_, foreign, _ := ed25519.GenerateKey(nil)
	claims := jwt.MapClaims{"iss": "hub", "sub": "1", "token_type": "access", "exp": time.Now().Add(time.Minute).Unix()}
	forged, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(foreign)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/users/", apitest.Bearer(forged), nil).Status)

	// Tokens minted by the hub's own key but already expired are refused.
	tokens, err := auth.NewTokens(context.Background(), e.DB)
	require.NoError(t, err)
	admin, err := models.GetUser(context.Background(), e.DB, "admin")
	require.NoError(t, err)
	past := tokens.WithClock(func() time.Time { return time.Now().Add(-25 * time.Hour) })
	for _, typ := range []string{auth.TypeAccess, auth.TypeRefresh} {
		tok, err := past.Issue(admin, typ)
		require.NoError(t, err)
		r := e.Do(http.MethodPost, "/api/auth/token/verify/", "", map[string]string{"token": tok, "type": typ})
		require.Equal(t, http.StatusUnauthorized, r.Status, typ)
	}
	tok, err := past.Issue(admin, auth.TypeAccess)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodGet, "/api/users/", apitest.Bearer(tok), nil).Status)
	tok, err = past.Issue(admin, auth.TypeRefresh)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, e.Do(http.MethodPost, "/api/auth/token/refresh/", "", map[string]string{"refresh": tok}).Status)
}
