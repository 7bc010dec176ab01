package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun/migrate"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/thehub/hub/migrations"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestMigrationsWaitForTheLock holds the migration lock as a process
// migrating at that moment would: a second process starting waits for it
// and then migrates, rather than failing at once; with a start timeout it
// gives up saying why.
func TestMigrationsWaitForTheLock(t *testing.T) {
	for _, kind := range dbtest.Dialects(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			url := dbtest.URL(t, kind)
			holder, err := models.Open(url)
			require.NoError(t, err)
			defer holder.Close()
			m, err := migrations.NewMigrator(holder)
			require.NoError(t, err)
			require.NoError(t, m.Init(ctx))
			require.NoError(t, m.Lock(ctx))

			db, err := models.Open(url)
			require.NoError(t, err)
			defer db.Close()
			err = migrateUp(ctx, &Config{StartTimeout: 1500 * time.Millisecond}, db, quiet)
			require.ErrorContains(t, err, "gave up after")
			require.ErrorContains(t, err, "HUB_START_TIMEOUT")

			done := make(chan error, 1)
			go func() { done <- migrateUp(ctx, &Config{StartTimeout: time.Minute}, db, quiet) }()
			select {
			case err := <-done:
				t.Fatalf("migrated (or failed: %v) while another process held the lock", err)
			case <-time.After(2 * time.Second):
			}
			require.NoError(t, m.Unlock(ctx))
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(45 * time.Second):
				t.Fatal("still waiting after the lock was released")
			}
			ms, err := m.MigrationsWithStatus(ctx)
			require.NoError(t, err)
			require.Empty(t, migrate.MigrationSlice(ms).Unapplied(), "every migration applied")
		})
	}
}

// TestStartRetriesTheDatabase starts against a PostgreSQL address where
// nothing listens yet: the process keeps trying instead of exiting.
func TestStartRetriesTheDatabase(t *testing.T) {
	addr := freeAddr(t)
	db, err := models.Open("postgres://hub:hub@" + addr + "/hub?sslmode=disable")
	require.NoError(t, err)
	defer db.Close()
	start := time.Now()
	err = migrateUp(t.Context(), &Config{StartTimeout: 2 * time.Second}, db, quiet)
	require.ErrorContains(t, err, "database: gave up after")
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second, "it retried until the start timeout")
}

// pemFile writes a PEM block to dir/name.
func pemFile(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return p
}

// issue makes a key and a certificate signed by parent (self-signed when
// parent is nil).
func issue(t *testing.T, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

// TestTemporalMutualTLSAndAPIKey dials a gRPC frontend that demands a
// client certificate signed by its CA (as a Temporal cluster with mTLS
// does) and answers the SDK's health check: the hub's options present
// the certificate, trust the given CA, and send the API key.
func TestTemporalMutualTLSAndAPIKey(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	srvCert, srvKey := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "temporal"}, DNSNames: []string{"temporal.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey)
	cliCert, cliKey := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "hub-worker"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey)
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return b
	}

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srvTLS := &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}}}
	var mu sync.Mutex
	var clients, keys []string
	srvTLS.VerifyConnection = func(cs tls.ConnectionState) error {
		mu.Lock()
		defer mu.Unlock()
		clients = append(clients, cs.PeerCertificates[0].Subject.CommonName)
		return nil
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(srvTLS)),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			if md, ok := metadata.FromIncomingContext(ctx); ok {
				keys = append(keys, md.Get("authorization")...)
			}
			return h(ctx, req)
		}))
	hs := health.NewServer()
	hs.SetServingStatus("temporal.api.workflowservice.v1.WorkflowService", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	workflowservice.RegisterWorkflowServiceServer(gs, systemInfo{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()

	args := []string{"--temporal-addr", ln.Addr().String(), "--temporal-tls-server-name", "temporal.test",
		"--temporal-tls-ca", pemFile(t, dir, "ca.pem", "CERTIFICATE", ca.Raw),
		"--temporal-tls-cert", pemFile(t, dir, "client.pem", "CERTIFICATE", cliCert.Raw),
		"--temporal-tls-key", pemFile(t, dir, "client.key", "EC PRIVATE KEY", keyDER(cliKey))}
	t.Setenv("HUB_TEMPORAL_API_KEY", "k-123")
	cfg, err := workerConfig(t, args...)
	require.NoError(t, err)
	cfg.StartTimeout = 20 * time.Second
	tc, err := dialTemporal(t.Context(), cfg, nil, quiet)
	require.NoError(t, err)
	tc.Close()
	mu.Lock()
	require.Contains(t, clients, "hub-worker", "the client certificate was presented and verified")
	require.Contains(t, keys, "Bearer k-123", "the API key was sent")
	mu.Unlock()

	// Without the client certificate the frontend refuses the handshake;
	// with another CA the hub refuses the frontend.
	other, _ := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "other CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	for _, bad := range [][]string{
		{"--temporal-tls-ca", args[5]},
		{"--temporal-tls-ca", pemFile(t, dir, "other.pem", "CERTIFICATE", other.Raw), "--temporal-tls-cert", args[7], "--temporal-tls-key", args[9]},
	} {
		cfg, err := workerConfig(t, append([]string{"--temporal-addr", ln.Addr().String(), "--temporal-tls-server-name", "temporal.test"}, bad...)...)
		require.NoError(t, err)
		cfg.StartTimeout = 1500 * time.Millisecond
		_, err = dialTemporal(t.Context(), cfg, nil, quiet)
		require.ErrorContains(t, err, "gave up after", bad)
	}
}

// systemInfo answers the one call the SDK makes when it connects.
type systemInfo struct {
	workflowservice.UnimplementedWorkflowServiceServer
}

func (systemInfo) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{}, nil
}

// workerConfig builds the configuration of hub worker from args and the
// environment, as the command does.
func workerConfig(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	cfg := new(Config)
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	cfg.commonFlags(fs)
	cfg.siteFlags(fs)
	cfg.opsFlags(fs, "")
	require.NoError(t, fs.Parse(args))
	return cfg, cfg.finish(fs)
}

// A bad log level or format, half a client key pair or an unreadable CA
// fails the start with a message naming the setting.
func TestStartConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		env, value, want string
	}{
		{"HUB_LOG_LEVEL", "loud", `HUB_LOG_LEVEL (--log-level) must be debug, info, warn or error, got "loud"`},
		{"HUB_LOG_FORMAT", "yaml", `HUB_LOG_FORMAT (--log-format) must be text or json, got "yaml"`},
		{"HUB_START_TIMEOUT", "soon", `HUB_START_TIMEOUT="soon"`},
		{"HUB_TEMPORAL_TLS_CERT", "/etc/hub/client.pem", "HUB_TEMPORAL_TLS_CERT (--temporal-tls-cert) and HUB_TEMPORAL_TLS_KEY (--temporal-tls-key) go together"},
		{"HUB_TEMPORAL_TLS_CA", "/nonexistent/ca.pem", "HUB_TEMPORAL_TLS_CA: open /nonexistent/ca.pem"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, err := workerConfig(t)
			require.ErrorContains(t, err, tc.want)
		})
	}
	for _, ok := range []struct{ env, value string }{{"HUB_LOG_LEVEL", "WARN"}, {"HUB_LOG_FORMAT", "JSON"}, {"HUB_START_TIMEOUT", "0"}} {
		t.Setenv(ok.env, ok.value)
	}
	cfg, err := workerConfig(t)
	require.NoError(t, err)
	require.Zero(t, cfg.StartTimeout)
	require.False(t, cfg.logger().Enabled(t.Context(), slog.LevelInfo))
}
