// Package auth authenticates hub API callers (JWT access/refresh tokens,
// API client keys, exchanged OIDC tokens), checks their permissions, and
// serves the token endpoints.
package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// Token types and lifetimes (spec: Authentication).
const (
	TypeAccess      = "access"
	TypeRefresh     = "refresh"
	AccessLifetime  = time.Hour
	RefreshLifetime = 24 * time.Hour
	issuerName      = "hub"
	signingKeyName  = "jwt_signing_key"
)

// C+J tokens are issued by the token server (oauth2.go) and accepted only
// by the C+J API.
const (
	TypeCJ     = "cj"
	CJLifetime = 24 * time.Hour
)

// ErrBadToken means a token failed verification for any reason.
var ErrBadToken = errors.New("invalid token")

// Claims are the hub token claims.
type Claims struct {
	jwt.RegisteredClaims
	Type     string `json:"token_type"`
	Username string `json:"username"`
	// Roles are the C+J auth roles at issue time, for the client's
	// information: the C+J API derives them again on every request.
	Roles []string `json:"roles,omitempty"`
}

// Tokens signs and verifies hub tokens with an Ed25519 key generated on first
// start and kept in the database, so every replica shares it.
type Tokens struct {
	// Throttle, when set, limits failed credential checks at every endpoint
	// that issues these tokens, the hub API's and the token server's, so
	// that a guesser cannot double its allowance by using both.
	Throttle *Throttle

	key ed25519.PrivateKey
	now func() time.Time
}

// NewTokens loads (or creates on first start) the signing key.
func NewTokens(ctx context.Context, db bun.IDB) (*Tokens, error) {
	seed, err := models.EnsureSecret(ctx, db, signingKeyName, func() ([]byte, error) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		return priv.Seed(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("load signing key: %w", err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("stored signing key has %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	return &Tokens{key: ed25519.NewKeyFromSeed(seed), now: time.Now}, nil
}

// Issue signs a token of the given type for u.
func (t *Tokens) Issue(u *models.User, typ string) (string, error) {
	return t.issue(u, typ, nil)
}

// IssueCJ signs a C+J token for u carrying its current roles.
func (t *Tokens) IssueCJ(u *models.User, roles []string) (string, error) {
	return t.issue(u, TypeCJ, roles)
}

func (t *Tokens) issue(u *models.User, typ string, roles []string) (string, error) {
	life := AccessLifetime
	switch typ {
	case TypeRefresh:
		life = RefreshLifetime
	case TypeCJ:
		life = CJLifetime
	}
	now := t.now()
	jti := make([]byte, 12)
	_, _ = rand.Read(jti)
	claims := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: issuerName, Subject: strconv.FormatInt(u.ID, 10), ID: fmt.Sprintf("%x", jti),
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(life)),
		},
		Type: typ, Username: u.Username, Roles: roles,
	}
	return jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(t.key)
}

// Pair issues an access and a refresh token.
func (t *Tokens) Pair(u *models.User) (access, refresh string, err error) {
	if access, err = t.Issue(u, TypeAccess); err != nil {
		return "", "", err
	}
	refresh, err = t.Issue(u, TypeRefresh)
	return access, refresh, err
}

// Parse verifies signature, expiry, issuer and type and returns the claims.
func (t *Tokens) Parse(token, typ string) (*Claims, error) {
	claims := new(Claims)
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return t.key.Public(), nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithIssuer(issuerName),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(t.now))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if claims.Type != typ {
		return nil, fmt.Errorf("%w: not an %s token", ErrBadToken, typ)
	}
	return claims, nil
}

// User verifies a token and returns its owner, who must exist and be active.
func (t *Tokens) User(ctx context.Context, db bun.IDB, token, typ string) (*models.User, error) {
	claims, err := t.Parse(token, typ)
	if err != nil {
		return nil, err
	}
	return owner(ctx, db, claims)
}

// owner is the user verified claims name, who must exist and be active.
func owner(ctx context.Context, db bun.IDB, claims *Claims) (*models.User, error) {
	id, err := strconv.ParseInt(claims.Subject, 10, 64)
	if err != nil {
		return nil, ErrBadToken
	}
	u, err := models.GetUserByID(ctx, db, id)
	if errors.Is(err, models.ErrNotFound) || (err == nil && !u.IsActive) {
		return nil, fmt.Errorf("%w: user missing or inactive", ErrBadToken)
	}
	if err == nil && issuedBefore(claims, u.PasswordChanged) {
		return nil, fmt.Errorf("%w: issued before the password changed", ErrBadToken)
	}
	return u, err
}

// issuedBefore tells whether the token was issued before changed. A
// token's time is in whole seconds: one issued in the very second of the
// change counts as after it (a login right after a change must work).
func issuedBefore(claims *Claims, changed *time.Time) bool {
	return changed != nil && (claims.IssuedAt == nil || claims.IssuedAt.Before(changed.Truncate(time.Second)))
}

// PublicKeyPEM returns the verification key as a PEM "PUBLIC KEY" block.
func (t *Tokens) PublicKeyPEM() string {
	der, err := x509.MarshalPKIXPublicKey(t.key.Public())
	if err != nil {
		panic(err) // an ed25519 public key always marshals
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// WithClock returns a copy of t that reads time from now; tests use it to
// mint tokens that are already expired.
func (t *Tokens) WithClock(now func() time.Time) *Tokens {
	c := *t
	c.now = now
	return &c
}
