package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// ErrIDPDisabled means no identity provider is configured.
var ErrIDPDisabled = errors.New("no identity provider is configured")

// IDP verifies ID tokens of one external OpenID Connect issuer and maps them
// to local users.
type IDP struct {
	Issuer   string // issuer URL; discovery is at Issuer/.well-known/openid-configuration
	ClientID string // expected audience
	Client   *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	built    time.Time
}

// IDClaims are the identity claims the hub uses.
type IDClaims struct {
	Issuer            string   `json:"iss"`
	Subject           string   `json:"sub"`
	Email             string   `json:"email"`
	EmailVerified     flexBool `json:"email_verified"`
	PreferredUsername string   `json:"preferred_username"`
	GivenName         string   `json:"given_name"`
	FamilyName        string   `json:"family_name"`
}

// flexBool is a boolean claim that some providers send as a string
// ("true"), as Amazon Cognito does email_verified.
type flexBool bool

func (b *flexBool) UnmarshalJSON(data []byte) error {
	*b = flexBool(string(data) == "true" || string(data) == `"true"`)
	return nil
}

// verifierFor returns a verifier whose discovery document and key set are
// at most ttl old: go-oidc caches the JWKS and refetches it only for unknown
// key ids, so a rebuild after idp_jwks_timeout bounds how long a rotated-out
// key stays trusted while avoiding a JWKS request per exchange.
func (i *IDP) verifierFor(ttl time.Duration) (*oidc.IDTokenVerifier, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.verifier != nil && time.Since(i.built) < ttl {
		return i.verifier, nil
	}
	client := i.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	// The key set keeps this context for later fetches, so it must outlive
	// the request that triggered discovery.
	ctx := oidc.ClientContext(context.Background(), client)
	p, err := oidc.NewProvider(ctx, i.Issuer)
	if err != nil {
		return nil, fmt.Errorf("identity provider discovery: %w", err)
	}
	i.verifier = p.Verifier(&oidc.Config{ClientID: i.ClientID})
	i.built = time.Now()
	return i.verifier, nil
}

// Verify checks signature, issuer, audience and expiry of an ID token.
func (i *IDP) Verify(ctx context.Context, raw string, ttl time.Duration) (*IDClaims, error) {
	if i == nil || i.Issuer == "" {
		return nil, ErrIDPDisabled
	}
	v, err := i.verifierFor(ttl)
	if err != nil {
		return nil, err
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	claims := new(IDClaims)
	if err := tok.Claims(claims); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	claims.Issuer, claims.Subject = tok.Issuer, tok.Subject
	return claims, nil
}

var usernameJunk = regexp.MustCompile(`[^\w.@+-]`)

// LinkUser returns the local user for verified claims: the user already
// linked to (issuer, subject); else an unlinked user whose username equals
// the preferred username or email, which is then linked; else a new active
// user in the Users group without a usable password.
func LinkUser(ctx context.Context, db *bun.DB, c *IDClaims) (*models.User, error) {
	// No database stores NUL in text: a claim holding one would fail the
	// lookup with a server error.
	for _, claim := range []string{c.Subject, c.Email, c.GivenName, c.FamilyName} {
		if strings.IndexByte(claim, 0) >= 0 {
			return nil, fmt.Errorf("%w: a claim of the token holds a null character", ErrBadToken)
		}
	}
	name := c.PreferredUsername
	if name == "" {
		name = c.Email
	}
	if name == "" {
		name = c.Subject
	}
	name = usernameJunk.ReplaceAllString(name, "_")
	if len(name) > 150 {
		name = name[:150]
	}
	u, err := models.LinkIdentity(ctx, db, models.Identity{Issuer: c.Issuer, Subject: c.Subject, Username: name,
		Email: c.Email, EmailVerified: bool(c.EmailVerified), FirstName: c.GivenName, LastName: c.FamilyName})
	switch {
	case errors.Is(err, models.ErrIdentityTaken):
		return nil, fmt.Errorf("%w: username %q is linked to another identity", ErrBadToken, name)
	case errors.Is(err, models.ErrIdentityUnproven):
		return nil, fmt.Errorf("%w: username %q: %w", ErrBadToken, name, err)
	}
	if err != nil {
		return nil, err
	}
	if !u.IsActive {
		return nil, fmt.Errorf("%w: user is inactive", ErrBadToken)
	}
	return models.GetUserByID(ctx, db, u.ID)
}
