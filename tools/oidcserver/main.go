// Command oidcserver runs a real OpenID provider (github.com/zitadel/oidc/v3,
// its op package over its example in-memory storage) on a loopback address,
// for tests of the hub's ID-token exchange. It has one confidential web
// client and one user with a password; users log in through a small HTML
// form at /login/username (the login URL the example storage gives its
// clients). ID tokens are RS256-signed with a key generated at start.
//
// The provider serves discovery (/.well-known/openid-configuration), the key
// set (/keys), /authorize, /authorize/callback and /oauth/token.
//
// When it listens it prints one line "issuer <URL>" on stdout; -addr may use
// port 0 to let the system choose a free port. With -exit-on-stdin-eof it
// exits when its stdin closes, so a test that starts it with a pipe as stdin
// leaves no server behind even if the test process is killed.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/text/language"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (host:port); the issuer is http://<addr>")
	clientID := flag.String("client-id", "hub-client", "client id of the confidential client")
	clientSecret := flag.String("client-secret", "hub-secret", "client secret of the confidential client")
	redirectURI := flag.String("redirect-uri", "http://127.0.0.1/callback", "the client's redirect URI")
	user := flag.String("user", "ida", "username of the one user")
	password := flag.String("password", "ida-password", "password of the one user")
	email := flag.String("email", "", "email of the user (default <user>@example.org)")
	lifeline := flag.Bool("exit-on-stdin-eof", false, "exit when stdin is closed (lets a test's child end with the test)")
	flag.Parse()
	if *email == "" {
		*email = *user + "@example.org"
	}

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(log) // the op package logs through the default logger
	if err := run(log, *lifeline, *addr, *clientID, *clientSecret, *redirectURI, &storage.User{
		ID: "sub-" + *user, Username: *user, Password: *password,
		FirstName: "Ida", LastName: "Tester", Email: *email, EmailVerified: true,
		PreferredLanguage: language.English,
	}); err != nil {
		log.Error("oidcserver", "error", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, lifeline bool, addr, clientID, clientSecret, redirectURI string, user *storage.User) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	issuer := "http://" + ln.Addr().String()

	store := &hubStorage{Storage: storage.NewStorageWithClients(oneUser{user},
		map[string]*storage.Client{clientID: storage.WebClient(clientID, clientSecret, redirectURI)})}

	var cryptoKey [32]byte // encrypts the opaque access tokens
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		return err
	}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:          cryptoKey,
		CodeMethodS256:     true,
		AuthMethodPost:     true,
		SupportedUILocales: []language.Tag{language.English},
	}, store, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/login/username", op.NewIssuerInterceptor(provider.IssuerFromRequest).Handler(
		&loginPage{store: store, callback: op.AuthCallbackURL(provider)}))
	mux.Handle("/", provider)
	srv := &http.Server{Handler: logRequests(log, mux), ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if lifeline {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			log.Info("stdin closed, exiting")
			stop()
		}()
	}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	fmt.Printf("issuer %s\n", issuer)
	log.Info("listening", "issuer", issuer, "client", clientID, "redirect_uri", redirectURI, "user", user.Username)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// oneUser is the example storage's UserStore holding a single user.
type oneUser struct{ u *storage.User }

func (s oneUser) GetUserByID(id string) *storage.User {
	if id == s.u.ID {
		return s.u
	}
	return nil
}

func (s oneUser) GetUserByUsername(name string) *storage.User {
	if name == s.u.Username {
		return s.u
	}
	return nil
}

// ExampleClientID names the example storage's JWT-profile service user,
// which this server does not use.
func (oneUser) ExampleClientID() string { return "service" }

// hubStorage is the example storage whose clients also put the profile and
// email claims into ID tokens issued next to an access token (as most
// providers do; the example clients put them only at /userinfo), so the
// hub sees a username and an email.
type hubStorage struct{ *storage.Storage }

func (s *hubStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return claimsInIDToken{c}, nil
}

type claimsInIDToken struct{ op.Client }

func (claimsInIDToken) IDTokenUserinfoClaimsAssertion() bool { return true }

var loginForm = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html><head><meta charset="UTF-8"><title>Sign in</title></head>
<body>
<form method="POST" action="/login/username">
<input type="hidden" name="authRequestID" value="{{.ID}}">
<label>Username <input name="username" autocomplete="username"></label>
<label>Password <input name="password" type="password" autocomplete="current-password"></label>
{{if .Error}}<p class="error">{{.Error}}</p>{{end}}
<button type="submit">Sign in</button>
</form>
</body></html>
`))

// loginPage is the login step: GET shows the form for an auth request,
// POST checks the password, marks the request done and sends the browser
// back to the provider's callback, which redirects to the client with a code.
type loginPage struct {
	store    *hubStorage
	callback func(context.Context, string) string
}

func (l *loginPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.FormValue("authRequestID")
	data := struct{ ID, Error string }{ID: id}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		err := l.store.CheckUsernamePassword(r.FormValue("username"), r.FormValue("password"), id)
		if err == nil {
			http.Redirect(w, r, l.callback(r.Context(), id), http.StatusFound)
			return
		}
		data.Error = err.Error()
		w.WriteHeader(http.StatusUnauthorized)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	_ = loginForm.Execute(w, data)
}

func logRequests(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		next.ServeHTTP(w, r)
		log.Info("request", "method", r.Method, "path", r.URL.Path, "took", time.Since(start))
	})
}
