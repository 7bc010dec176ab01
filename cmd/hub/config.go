package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Config is every setting of the hub; each is a flag and a HUB_* variable
// (the flag wins). See the README for the reference.
type Config struct {
	DataDir        string
	DatabaseURL    string
	APIAddr        string
	CJAddr         string
	AuthAddr       string
	TemporalAddr   string
	TemporalUIAddr string
	Namespace      string
	AdminUsername  string
	AdminPassword  string
	DevSites       []string
	OIDCIssuer     string
	OIDCClientID   string
	LogLevel       string
	Heartbeat      time.Duration

	// Site worker settings.
	Site, Queue, Root, Node string
	Hub                     bool

	adminPasswordSet bool
}

// env returns the HUB_* variable or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func (c *Config) commonFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", env("HUB_DATA_DIR", "./.hub-data"), "folder for local state: sqlite files, site roots [HUB_DATA_DIR]")
	fs.StringVar(&c.DatabaseURL, "database-url", env("HUB_DATABASE_URL", ""), "postgres:// URL, or a sqlite file path; default <data-dir>/hub.db [HUB_DATABASE_URL]")
	fs.StringVar(&c.TemporalAddr, "temporal-addr", env("HUB_TEMPORAL_ADDR", "127.0.0.1:7233"), "Temporal frontend to dial (embedded in hub dev) [HUB_TEMPORAL_ADDR]")
	fs.StringVar(&c.Namespace, "temporal-namespace", env("HUB_TEMPORAL_NAMESPACE", "default"), "Temporal namespace [HUB_TEMPORAL_NAMESPACE]")
	fs.StringVar(&c.LogLevel, "log-level", env("HUB_LOG_LEVEL", "info"), "debug, info, warn or error [HUB_LOG_LEVEL]")
	fs.DurationVar(&c.Heartbeat, "heartbeat-interval", envDuration("HUB_HEARTBEAT_INTERVAL", 15*time.Second), "how often site workers report to the hub [HUB_HEARTBEAT_INTERVAL]")
}

func (c *Config) serveFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.APIAddr, "api-addr", env("HUB_API_ADDR", "127.0.0.1:8080"), "hub API listen address [HUB_API_ADDR]")
	fs.StringVar(&c.CJAddr, "cj-addr", env("HUB_CJ_ADDR", "127.0.0.1:5101"), "storage-management C+J API listen address [HUB_CJ_ADDR]")
	fs.StringVar(&c.AuthAddr, "auth-addr", env("HUB_AUTH_ADDR", "127.0.0.1:5102"), "C+J token server listen address [HUB_AUTH_ADDR]")
	fs.StringVar(&c.AdminUsername, "admin-username", env("HUB_ADMIN_USERNAME", "admin"), "administrator created at first start [HUB_ADMIN_USERNAME]")
	fs.StringVar(&c.AdminPassword, "admin-password", env("HUB_ADMIN_PASSWORD", ""), "administrator password; generated and printed once when empty; when set, reset at every start [HUB_ADMIN_PASSWORD]")
	fs.StringVar(&c.OIDCIssuer, "oidc-issuer", env("HUB_OIDC_ISSUER", ""), "OpenID Connect issuer URL whose ID tokens /api/auth/idp/token/ accepts [HUB_OIDC_ISSUER]")
	fs.StringVar(&c.OIDCClientID, "oidc-client-id", env("HUB_OIDC_CLIENT_ID", ""), "audience expected in those ID tokens [HUB_OIDC_CLIENT_ID]")
}

func (c *Config) siteFlags(fs *pflag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&c.Site, "site", env("HUB_SITE", ""), "site this worker serves [HUB_SITE]")
	fs.StringVar(&c.Queue, "queue", env("HUB_QUEUE", "default"), "queue this worker serves [HUB_QUEUE]")
	fs.StringVar(&c.Root, "root", env("HUB_ROOT", "/"), "storage root; every API path is inside it [HUB_ROOT]")
	fs.StringVar(&c.Node, "node", env("HUB_NODE_NAME", host), "node name reported in health [HUB_NODE_NAME]")
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// finish fills derived defaults and validates.
func (c *Config) finish(fs *pflag.FlagSet) error {
	if c.DataDir == "" {
		return errors.New("the data dir must not be empty (HUB_DATA_DIR)")
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = filepath.Join(c.DataDir, "hub.db")
	}
	if f := fs.Lookup("admin-password"); f != nil {
		c.adminPasswordSet = c.AdminPassword != ""
	}
	if c.Heartbeat <= 0 {
		return fmt.Errorf("heartbeat interval must be positive, got %s", c.Heartbeat)
	}
	return nil
}

func (c *Config) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToLower(c.LogLevel))); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// devSites parses HUB_DEV_SITES.
func devSites(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
