package hub_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
	"golang.org/x/oauth2"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/hub/apitest"
)

// TestIDPExchangeWithZitadel exchanges an ID token issued by a real OpenID
// provider (zitadel/oidc's op package, tools/oidcserver) after a real
// authorization-code login, as a browser and a client application would
// do it, and checks that the hub accepts it and rejects a tampered copy.
func TestIDPExchangeWithZitadel(t *testing.T) {
	t.Parallel()
	const clientID, clientSecret, user, password = "hub-client", "hub-client-secret", "ida", "ida-password-1"
	// The redirect URI points at a closed loopback port: the "browser"
	// stops at it and reads the code from the URL.
	redirectURI := "http://" + closedLoopbackAddr(t) + "/callback"
	op := startOIDCServer(t, "-client-id", clientID, "-client-secret", clientSecret,
		"-redirect-uri", redirectURI, "-user", user, "-password", password)
	conf := &oauth2.Config{ClientID: clientID, ClientSecret: clientSecret, RedirectURL: redirectURI,
		Scopes:   []string{"openid", "profile", "email"},
		Endpoint: oauth2.Endpoint{AuthURL: op.AuthorizationEndpoint, TokenURL: op.TokenEndpoint, AuthStyle: oauth2.AuthStyleInHeader}}

	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		exchange := func(tok string) apitest.Response {
			return e.Do(http.MethodPost, "/api/auth/idp/token/", "", map[string]string{"token": tok})
		}
		e.API.IDP = &auth.IDP{Issuer: op.Issuer, ClientID: clientID}

		idToken := loginForIDToken(t, conf, op.Issuer, user, password)
		r := exchange(idToken)
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		m := r.Map()
		u := m["user"].(map[string]any)
		require.Equal(t, user, u["username"])
		require.Equal(t, user+"@example.org", u["email"])
		require.Equal(t, "Users", u["groups"].([]any)[0].(map[string]any)["name"])
		require.Equal(t, http.StatusOK, e.Do(http.MethodGet, "/api/my-permissions/", apitest.Bearer(m["access"].(string)), nil).Status)

		// One changed character in the signature: refused.
		r = exchange(tamperSignature(t, idToken))
		require.Equal(t, http.StatusUnauthorized, r.Status, string(r.Body))
		require.Contains(t, r.Map(), "detail")

		// A second login of the same identity maps to the same hub user.
		r = exchange(loginForIDToken(t, conf, op.Issuer, user, password))
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.Equal(t, u["id"], r.Map()["user"].(map[string]any)["id"])
	})
}

// oidcServer is a running tools/oidcserver: the fields of its discovery
// document the test uses.
type oidcServer struct {
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	JWKSURI               string `json:"jwks_uri"`
}

// startOIDCServer builds (once per source version) and starts
// tools/oidcserver on a free loopback port until the test ends, and returns
// its discovery document.
func startOIDCServer(t *testing.T, args ...string) *oidcServer {
	t.Helper()
	bin := buildOIDCServer(t)
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-exit-on-stdin-eof"}, args...)...)
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// The server exits when this pipe closes, also if the test process dies.
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start(), "start %s", bin)
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		<-exited
	})

	deadline := time.Now().Add(30 * time.Second)
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("oidcserver: %s\nstderr:\n%s", fmt.Sprintf(format, a...), stderr.String())
	}
	// It prints "issuer <URL>" once it listens.
	var issuer string
	for issuer == "" {
		if line, _, ok := strings.Cut(stdout.String(), "\n"); ok {
			if issuer, ok = strings.CutPrefix(line, "issuer "); !ok {
				fail("unexpected first line %q", line)
			}
			break
		}
		select {
		case <-exited:
			fail("exited before listening: %v", waitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			fail("no issuer line within 30 s")
		}
	}

	client := &http.Client{Timeout: 5 * time.Second}
	for {
		var disc oidcServer
		resp, err := client.Get(issuer + "/.well-known/openid-configuration")
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				err = json.NewDecoder(resp.Body).Decode(&disc)
			} else {
				err = fmt.Errorf("status %s", resp.Status)
			}
			_ = resp.Body.Close()
		}
		if err == nil {
			if disc.Issuer != issuer || disc.AuthorizationEndpoint == "" || disc.TokenEndpoint == "" || disc.JWKSURI == "" {
				fail("incomplete discovery document %+v", disc)
			}
			return &disc
		}
		select {
		case <-exited:
			fail("exited: %v", waitErr)
		default:
		}
		if time.Now().After(deadline) {
			fail("no discovery document within 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// buildOIDCServer builds tools/oidcserver (its own module) into
// <user cache>/hub-test-bin/, named after a hash of its sources so a kept
// binary is reused until they change.
func buildOIDCServer(t *testing.T) string {
	t.Helper()
	src := filepath.Join(repoRoot(t), "tools", "oidcserver")
	h := sha256.New()
	files, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, f := range files { // ReadDir sorts by name
		if f.IsDir() || !(strings.HasSuffix(f.Name(), ".go") || f.Name() == "go.mod" || f.Name() == "go.sum") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, f.Name()))
		require.NoError(t, err)
		fmt.Fprintf(h, "%s %d\n", f.Name(), len(b))
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "hub-test-bin")
	bin := filepath.Join(dir, "oidcserver-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	// Build beside the target and rename, so concurrent test processes
	// never run a half-written binary.
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	cmd := exec.Command(goBin, "build", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.Remove(tmp)
		t.Fatalf("build tools/oidcserver: %v\n%s", err, out)
	}
	require.NoError(t, os.Rename(tmp, bin))
	return bin
}

// repoRoot is the nearest folder above the working directory holding
// tools/oidcserver/go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "oidcserver", "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no tools/oidcserver/go.mod above the working directory")
		}
		dir = parent
	}
}

// closedLoopbackAddr is a loopback address nothing listens on.
func closedLoopbackAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// loginForIDToken runs the authorization-code flow (with PKCE and a nonce)
// as a browser and the client would: open the authorization URL, follow
// redirects to the login form, submit a wrong and then the right password,
// follow redirects up to the redirect URI, take the code from it and
// exchange it at the token endpoint. It returns the ID token after checking
// its header and its main claims.
func loginForIDToken(t *testing.T, conf *oauth2.Config, issuer, user, password string) string {
	t.Helper()
	state, nonce, verifier := randomString(t), randomString(t), oauth2.GenerateVerifier()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), conf.RedirectURL) {
				return http.ErrUseLastResponse // the client's page: do not load it
			}
			if len(via) >= 10 {
				return errors.New("too many redirects")
			}
			return nil
		}}

	resp, err := browser.Get(conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("nonce", nonce)))
	require.NoError(t, err)
	page := readBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	require.Contains(t, resp.Request.URL.Path, "/login", "the authorization request leads to the login page")

	// A wrong password shows the form again, with no code.
	resp = submitLoginForm(t, browser, resp.Request.URL, page, user, password+"x")
	page = readBody(t, resp)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, page)

	resp = submitLoginForm(t, browser, resp.Request.URL, page, user, password)
	body := readBody(t, resp)
	require.Equal(t, http.StatusFound, resp.StatusCode, body)
	loc, err := resp.Location()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(loc.String(), conf.RedirectURL), "redirected to %s", loc)
	q := loc.Query()
	require.Empty(t, q.Get("error"), "%s: %s", q.Get("error"), q.Get("error_description"))
	require.Equal(t, state, q.Get("state"))
	code := q.Get("code")
	require.NotEmpty(t, code, "no code in %s", loc)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	require.NoError(t, err)
	idToken, _ := tok.Extra("id_token").(string)
	require.NotEmpty(t, idToken, "the token response has an id_token")

	parts := strings.Split(idToken, ".")
	require.Len(t, parts, 3)
	var header struct{ Alg, Kid string }
	decodeSegment(t, parts[0], &header)
	require.Equal(t, "RS256", header.Alg)
	require.NotEmpty(t, header.Kid)
	var claims struct {
		Iss, Sub, Nonce, Email string
		Aud                    audience
		Username               string `json:"preferred_username"`
	}
	decodeSegment(t, parts[1], &claims)
	require.Equal(t, issuer, claims.Iss)
	require.Contains(t, []string(claims.Aud), conf.ClientID)
	require.Equal(t, nonce, claims.Nonce)
	require.Equal(t, user, claims.Username)
	require.NotEqual(t, user, claims.Sub, "the subject is the provider's user id, not the username")
	return idToken
}

// submitLoginForm fills the first form of a page with the username and the
// password and submits it, with its hidden fields, to its action.
func submitLoginForm(t *testing.T, browser *http.Client, pageURL *url.URL, page, user, password string) *http.Response {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	require.NoError(t, err)
	var form *html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.Data == "form" {
			form = n
			break
		}
	}
	require.NotNil(t, form, "no form in the login page:\n%s", page)
	attr := func(n *html.Node, key string) string {
		for _, a := range n.Attr {
			if a.Key == key {
				return a.Val
			}
		}
		return ""
	}
	values := url.Values{}
	var sawUser, sawPassword bool
	for n := range form.Descendants() {
		if n.Type != html.ElementNode || n.Data != "input" || attr(n, "name") == "" {
			continue
		}
		name := attr(n, "name")
		switch {
		case attr(n, "type") == "password":
			values.Set(name, password)
			sawPassword = true
		case name == "username" || attr(n, "autocomplete") == "username":
			values.Set(name, user)
			sawUser = true
		default:
			values.Set(name, attr(n, "value"))
		}
	}
	require.True(t, sawUser && sawPassword, "the form asks for a username and a password:\n%s", page)
	require.True(t, strings.EqualFold(attr(form, "method"), http.MethodPost), "the form posts")
	action, err := pageURL.Parse(attr(form, "action"))
	require.NoError(t, err)
	resp, err := browser.PostForm(action.String(), values)
	require.NoError(t, err)
	return resp
}

// tamperSignature changes one character in the middle of the signature
// (the last character may carry only padding bits).
func tamperSignature(t *testing.T, jwt string) string {
	t.Helper()
	i := strings.LastIndexByte(jwt, '.') + 10
	require.Less(t, i, len(jwt))
	c := byte('A')
	if jwt[i] == 'A' {
		c = 'B'
	}
	return jwt[:i] + string(c) + jwt[i+1:]
}

// audience is the aud claim: one string or a list.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = audience{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(a))
}

func decodeSegment(t *testing.T, seg string, v any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), "%s", b)
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func randomString(t *testing.T) string {
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// lockedBuffer collects a child's stderr while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
