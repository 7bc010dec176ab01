package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// TemporalTLS is how the hub's processes authenticate to a production
// Temporal cluster: TLS (with the system's or a given CA), a client
// certificate for mTLS, and/or an API key (Temporal Cloud). See
// docs/operations.md.
type TemporalTLS struct {
	Enabled    bool
	CAFile     string
	CertFile   string
	KeyFile    string
	ServerName string
	APIKey     string
}

func (t *TemporalTLS) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&t.Enabled, "temporal-tls", env("HUB_TEMPORAL_TLS", "") == "1", "dial Temporal over TLS, trusting the system's CAs unless --temporal-tls-ca is given; implied by the other TLS options and by an API key [HUB_TEMPORAL_TLS=1]")
	fs.StringVar(&t.CAFile, "temporal-tls-ca", env("HUB_TEMPORAL_TLS_CA", ""), "PEM file of the CA(s) that signed the Temporal frontend's certificate [HUB_TEMPORAL_TLS_CA]")
	fs.StringVar(&t.CertFile, "temporal-tls-cert", env("HUB_TEMPORAL_TLS_CERT", ""), "PEM client certificate for mTLS (with --temporal-tls-key) [HUB_TEMPORAL_TLS_CERT]")
	fs.StringVar(&t.KeyFile, "temporal-tls-key", env("HUB_TEMPORAL_TLS_KEY", ""), "PEM private key of the client certificate [HUB_TEMPORAL_TLS_KEY]")
	fs.StringVar(&t.ServerName, "temporal-tls-server-name", env("HUB_TEMPORAL_TLS_SERVER_NAME", ""), "name expected in the frontend's certificate; default the host of --temporal-addr [HUB_TEMPORAL_TLS_SERVER_NAME]")
	fs.StringVar(&t.APIKey, "temporal-api-key", env("HUB_TEMPORAL_API_KEY", ""), "API key sent to Temporal (e.g. Temporal Cloud); prefer the variable to the flag, which other users can see [HUB_TEMPORAL_API_KEY]")
}

// check refuses half a key pair and unreadable files at start.
func (t *TemporalTLS) check() error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("HUB_TEMPORAL_TLS_CERT (--temporal-tls-cert) and HUB_TEMPORAL_TLS_KEY (--temporal-tls-key) go together: give both or neither")
	}
	_, err := t.config()
	return err
}

// config returns the TLS configuration, nil for plain TCP (then an API
// key still turns TLS on in the SDK).
func (t *TemporalTLS) config() (*tls.Config, error) {
	if !t.Enabled && t.CAFile == "" && t.CertFile == "" && t.ServerName == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("HUB_TEMPORAL_TLS_CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("HUB_TEMPORAL_TLS_CA: no PEM certificate in %s", t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("HUB_TEMPORAL_TLS_CERT/HUB_TEMPORAL_TLS_KEY: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// temporalOptions are the client options of every process: address,
// namespace, security, logger and metrics handler.
func (c *Config) temporalOptions(metrics client.MetricsHandler) (client.Options, error) {
	tlsCfg, err := c.TemporalTLS.config()
	if err != nil {
		return client.Options{}, err
	}
	opts := client.Options{HostPort: c.TemporalAddr, Namespace: c.Namespace,
		Logger:         sdklog.NewStructuredLogger(c.logger(slog.LevelWarn)),
		MetricsHandler: metrics,
	}
	opts.ConnectionOptions.TLS = tlsCfg
	if c.TemporalTLS.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(c.TemporalTLS.APIKey)
	}
	return opts, nil
}

// dialTemporal connects to the frontend, retrying with backoff (see
// retry) while it does not answer.
func dialTemporal(ctx context.Context, cfg *Config, metrics client.MetricsHandler, log *slog.Logger) (client.Client, error) {
	opts, err := cfg.temporalOptions(metrics)
	if err != nil {
		return nil, err
	}
	var tc client.Client
	err = retry(ctx, cfg, log, "connect to Temporal at "+cfg.TemporalAddr, func(ctx context.Context) error {
		tc, err = client.DialContext(ctx, opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s: %w", cfg.TemporalAddr, err)
	}
	return tc, nil
}
