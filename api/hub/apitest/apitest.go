// Package apitest runs the hub API for tests against real parts: a real
// embedded Temporal server (one per test process, a fresh namespace per
// test environment), a real database of each supported kind, and real
// workers when a test asks for them.
package apitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thehub/hub/activities/changes"
	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/api/auth"
	hubapi "github.com/thehub/hub/api/hub"
	"github.com/thehub/hub/migrations"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/worker/devserver"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// AdminPassword is the password of the "admin" superuser of every Env.
const AdminPassword = "admin-password-1"

var shared struct {
	once sync.Once
	srv  *devserver.Server
	err  error
}

// TemporalAddr returns the frontend of the process-wide embedded server.
func TemporalAddr(t testing.TB) string {
	shared.once.Do(func() {
		shared.srv, shared.err = devserver.Start(devserver.Options{
			Namespace: "default", SearchAttributes: workflows.SearchAttributes,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	})
	require.NoError(t, shared.err, "start embedded Temporal")
	return shared.srv.FrontendAddr()
}

func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// NewNamespace registers a fresh namespace with the hub's search
// attributes and returns a client for it. Tests in one process share the
// server, so workflow ids and task queues never collide across tests.
func NewNamespace(t testing.TB) (client.Client, string) {
	addr := TemporalAddr(t)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	ns := "t-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := client.NewNamespaceClient(client.Options{HostPort: addr, Logger: quietLogger()})
	require.NoError(t, err)
	defer nc.Close()
	require.NoError(t, nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}))
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: ns, Logger: quietLogger()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, worker.EnsureSearchAttributes(ctx, c, ns))
	return c, ns
}

// Env is one hub API over one database and one Temporal namespace.
type Env struct {
	T        testing.TB
	DB       *bun.DB
	DBURL    string // for a second process (StartAPIProcess)
	Temporal client.Client
	// Namespace is the Temporal namespace of this Env.
	Namespace string
	API       *hubapi.Server
	URL       string // base URL of the server, without /api
	Admin     string // access token of the superuser "admin"
	// SecretKey seals secrets at rest for the API and the hub worker.
	SecretKey []byte
	Secrets   *vocab.Cipher
}

// Each runs body once per database kind with a fresh Env.
func Each(t *testing.T, body func(t *testing.T, e *Env)) {
	for _, kind := range dbtest.Dialects(t) {
		t.Run(kind, func(t *testing.T) {
			body(t, New(t, kind))
		})
	}
}

// New starts an Env over a fresh database of the given kind.
func New(t testing.TB, kind string) *Env {
	ctx := context.Background()
	url := dbtest.URL(t, kind)
	db, err := models.Open(url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, migrations.Up(ctx, db))
	require.NoError(t, models.EnsureAuthData(ctx, db))
	require.NoError(t, models.EnsureBuiltinWorkflows(ctx, db))
	_, err = models.EnsureAdmin(ctx, db, "admin", AdminPassword, false)
	require.NoError(t, err)
	tokens, err := auth.NewTokens(ctx, db)
	require.NoError(t, err)
	e := &Env{T: t, DB: db, DBURL: url}
	e.Temporal, e.Namespace = NewNamespace(t)
	e.SecretKey, err = vocab.ParseSecretKey(vocab.NewSecretKey())
	require.NoError(t, err)
	e.Secrets, err = vocab.NewCipher(e.SecretKey)
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.API = &hubapi.Server{DB: db, Tokens: tokens, Changes: &changes.Service{DB: db, Temporal: e.Temporal, Log: log},
		IDP: &auth.IDP{}, Secrets: e.Secrets, Log: log}
	srv := httptest.NewServer(checked(t, e.API.Handler()))

	t.Cleanup(srv.Close)
	e.URL = srv.URL
	e.Admin = e.Login("admin", AdminPassword)
	return e
}

// StartHubWorker runs the hub worker for this Env until the returned
// stop function is called or the test ends.
func (e *Env) StartHubWorker() (stop func()) {
	w := worker.Hub(e.Temporal, &hubact.Activities{DB: e.DB, Secrets: e.Secrets})
	require.NoError(e.T, w.Start())
	stop = sync.OnceFunc(w.Stop)
	e.T.Cleanup(stop)
	require.NoError(e.T, worker.EnsureSchedules(context.Background(), e.Temporal))
	return stop
}

// StartSiteWorker runs a site worker with heartbeats every interval until
// the returned stop function is called or the test ends.
func (e *Env) StartSiteWorker(cfg worker.SiteConfig) (stop func()) {
	if cfg.Cipher == nil {
		cfg.Cipher = e.Secrets
	}
	w, err := worker.Site(e.Temporal, cfg)
	require.NoError(e.T, err)
	require.NoError(e.T, w.Start())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		worker.Heartbeats(ctx, e.Temporal, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			w.Stop()
		})
	}
	e.T.Cleanup(stop)
	return stop
}

// Response is a decoded API answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic value.
func (r Response) JSON() any {
	var v any
	_ = json.Unmarshal(r.Body, &v)
	return v
}

// Map decodes the body as an object.
func (r Response) Map() map[string]any {
	m, _ := r.JSON().(map[string]any)
	return m
}

// Do sends a request with an "Authorization" header value (may be empty)
// and a body: a string is sent as is, anything else as JSON.
func (e *Env) Do(method, path, authorization string, body any) Response {
	e.T.Helper()
	r, err := e.DoURL(e.URL, method, path, authorization, body)
	require.NoError(e.T, err)
	return r
}

// DoURL sends a request to the API at base (another process's, say); an
// error means no answer came.
func (e *Env) DoURL(base, method, path, authorization string, body any) (Response, error) {
	e.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(e.T, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, rd)
	require.NoError(e.T, err)
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, err
}

// Bearer formats an access token as an Authorization value.
func Bearer(token string) string { return "Bearer " + token }

// Login obtains an access token.
func (e *Env) Login(username, password string) string {
	e.T.Helper()
	r := e.Do(http.MethodPost, "/api/auth/token/", "", map[string]string{"username": username, "password": password})
	require.Equal(e.T, http.StatusCreated, r.Status, string(r.Body))
	return r.Map()["access"].(string)
}

// AsAdmin sends a request as the superuser.
func (e *Env) AsAdmin(method, path string, body any) Response {
	e.T.Helper()
	return e.Do(method, path, Bearer(e.Admin), body)
}

// CreateUser creates an active user in the given groups (Users when none)
// and returns an access token for it.
func (e *Env) CreateUser(username string, groups ...string) string {
	e.T.Helper()
	if groups == nil {
		groups = []string{models.GroupUsers}
	}
	r := e.AsAdmin(http.MethodPost, "/api/users/", map[string]any{"username": username, "password": "password-" + username, "groups": groups})
	require.Equal(e.T, http.StatusCreated, r.Status, string(r.Body))
	return e.Login(username, "password-"+username)
}
