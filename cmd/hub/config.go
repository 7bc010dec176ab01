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

	"github.com/thehub/hub/models"
)

// Config is every setting of the hub; each is a flag and a HUB_* variable
// (the flag wins). See the README for the reference.
type Config struct {
	DataDir        string
	DatabaseURL    string
	APIAddr        string
	CJAddr         string
	AuthAddr       string
	CJSite         string
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
	SecretKey      string // base64 of the 32-byte key sealing secrets at rest

	// Site worker settings.
	Site, Queue, Root, Node string
	Hub                     bool

	adminPasswordSet bool
	secrets          *models.Cipher // from openSecrets
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
	fs.StringVar(&c.SecretKey, "secret-key", env("HUB_SECRET_KEY", ""), "base64 of 32 random bytes sealing target credentials at rest; default <data-dir>/secret.key (created by hub dev) [HUB_SECRET_KEY]")
	fs.DurationVar(&c.Heartbeat, "heartbeat-interval", envDuration("HUB_HEARTBEAT_INTERVAL", 15*time.Second), "how often site workers report to the hub [HUB_HEARTBEAT_INTERVAL]")
}

func (c *Config) serveFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.APIAddr, "api-addr", env("HUB_API_ADDR", "127.0.0.1:8080"), "hub API listen address [HUB_API_ADDR]")
	fs.StringVar(&c.CJAddr, "cj-addr", env("HUB_CJ_ADDR", "127.0.0.1:5101"), "storage-management C+J API listen address [HUB_CJ_ADDR]")
	fs.StringVar(&c.AuthAddr, "auth-addr", env("HUB_AUTH_ADDR", "127.0.0.1:5102"), "C+J token server listen address [HUB_AUTH_ADDR]")
	fs.StringVar(&c.CJSite, "cj-site", env("HUB_CJ_SITE", ""), "site whose storage the C+J API manages; default the first dev site (hub dev) or the oldest site record (hub serve) [HUB_CJ_SITE]")
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

// errNoSecretKey says how to give the hub its secret key.
var errNoSecretKey = errors.New("no secret key: set HUB_SECRET_KEY (or --secret-key) to the base64 of 32 random bytes " +
	"(e.g. `head -c32 /dev/urandom | base64`), or put it in <data dir>/secret.key; every hub serve and hub worker --hub must use the same key")

// secretKeyFile is where hub dev keeps the key it generates.
func (c *Config) secretKeyFile() string { return filepath.Join(c.DataDir, "secret.key") }

// loadSecretKey returns the key sealing secrets at rest: HUB_SECRET_KEY,
// else the key in <data dir>/secret.key. With generate (hub dev) a missing
// file is created with a fresh key (mode 0600), so restarts can still
// decrypt; otherwise a missing key is errNoSecretKey.
func (c *Config) loadSecretKey(generate bool) ([]byte, error) {
	if c.SecretKey != "" {
		key, err := models.ParseSecretKey(c.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("HUB_SECRET_KEY: %w", err)
		}
		return key, nil
	}
	file := c.secretKeyFile()
	data, err := os.ReadFile(file)
	switch {
	case err == nil:
		key, err := models.ParseSecretKey(string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return key, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read secret key: %w", err)
	case !generate:
		return nil, errNoSecretKey
	}
	if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	enc := models.NewSecretKey()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return c.loadSecretKey(false) // another process won the race
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", file, err)
	}
	_, err = f.WriteString(enc + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", file, err)
	}
	return models.ParseSecretKey(enc)
}

// openSecrets loads the secret key (see loadSecretKey) into c.secrets.
func (c *Config) openSecrets(generate bool) error {
	key, err := c.loadSecretKey(generate)
	if err != nil {
		return err
	}
	c.secrets, err = models.NewCipher(key)
	return err
}
