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

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/cmd/hub/hardening"
	"github.com/thehub/hub/workflows/vocab"
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
	LogFormat      string
	// OpsAddr is the listener of /healthz, /readyz and /metrics; empty
	// is none (see docs/operations.md).
	OpsAddr string
	// StartTimeout bounds how long a process retries its database and
	// Temporal at start; 0 retries until stopped.
	StartTimeout time.Duration
	// Temporal client security for a production cluster.
	TemporalTLS TemporalTLS
	Heartbeat   time.Duration
	SecretKey   string // base64 of the 32-byte key sealing secrets at rest

	// HTTP limits every HTTP server; Login throttles failed credential
	// checks; TrustedProxies (addresses or networks, comma-separated) are
	// the reverse proxies whose X-Forwarded-For names the client. See
	// docs/server-hardening.md.
	HTTP           hardening.Limits
	Login          auth.ThrottleConfig
	TrustedProxies string

	// Site worker settings.
	Site, Queue, Root, Node string
	Hub                     bool
	// InitRoot lets a site worker take a root without a .hub folder.
	InitRoot bool
	// StopTimeout is how long a stopping site worker lets its running
	// steps end before it cancels them.
	StopTimeout time.Duration

	adminPasswordSet bool
	secrets          *vocab.Cipher // from openSecrets
	envErrs          []error       // bad HUB_* values, reported by finish
	// waiting, when set, is told what the process waits for at start
	// (the ops probes report it).
	waiting func(string)
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
	fs.StringVar(&c.LogFormat, "log-format", env("HUB_LOG_FORMAT", "text"), "text (key=value) or json, one object a line [HUB_LOG_FORMAT]")
	fs.DurationVar(&c.StartTimeout, "start-timeout", 5*time.Minute, "how long to retry the database and Temporal at start, with backoff, before giving up; 0: until stopped [HUB_START_TIMEOUT]")
	c.TemporalTLS.flags(fs)
	c.fromEnv(fs, "start-timeout")
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

	h, l := hardening.Defaults(), auth.DefaultThrottle()
	fs.DurationVar(&c.HTTP.ReadHeaderTimeout, "http-read-header-timeout", h.ReadHeaderTimeout, "time a client has to send a request's headers [HUB_HTTP_READ_HEADER_TIMEOUT]")
	fs.DurationVar(&c.HTTP.ReadTimeout, "http-read-timeout", h.ReadTimeout, "time a client has to send a whole request, body included [HUB_HTTP_READ_TIMEOUT]")
	fs.DurationVar(&c.HTTP.WriteTimeout, "http-write-timeout", h.WriteTimeout, "time from the end of a request's headers to the end of its answer; at least the read timeout [HUB_HTTP_WRITE_TIMEOUT]")
	fs.DurationVar(&c.HTTP.IdleTimeout, "http-idle-timeout", h.IdleTimeout, "time a kept-alive connection may wait for its next request [HUB_HTTP_IDLE_TIMEOUT]")
	fs.IntVar(&c.HTTP.MaxHeaderBytes, "http-max-header-bytes", h.MaxHeaderBytes, "largest request line and headers, in bytes [HUB_HTTP_MAX_HEADER_BYTES]")
	fs.IntVar(&c.HTTP.MaxConns, "http-max-conns", h.MaxConns, "connections each HTTP server holds open at once [HUB_HTTP_MAX_CONNS]")
	fs.IntVar(&c.HTTP.MaxConnsPerAddr, "http-max-conns-per-addr", h.MaxConnsPerAddr, "connections each HTTP server holds open at once for one client address; 0: no bound [HUB_HTTP_MAX_CONNS_PER_ADDR]")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "reverse proxies (addresses or networks, comma-separated) whose X-Forwarded-For names the client; default none [HUB_TRUSTED_PROXIES]")
	fs.IntVar(&c.Login.AccountFailures, "login-failures-per-account", l.AccountFailures, "wrong passwords allowed per account name per login failure window [HUB_LOGIN_FAILURES_PER_ACCOUNT]")
	fs.IntVar(&c.Login.AddrFailures, "login-failures-per-addr", l.AddrFailures, "wrong passwords and tokens allowed per client address per login failure window [HUB_LOGIN_FAILURES_PER_ADDR]")
	fs.DurationVar(&c.Login.Window, "login-failure-window", l.Window, "time in which a spent allowance of login failures comes back [HUB_LOGIN_FAILURE_WINDOW]")
	fs.IntVar(&c.Login.MaxEntries, "login-throttle-entries", l.MaxEntries, "account names, and client addresses, whose failures are remembered [HUB_LOGIN_THROTTLE_ENTRIES]")
	c.fromEnv(fs, "http-read-header-timeout", "http-read-timeout", "http-write-timeout", "http-idle-timeout",
		"http-max-header-bytes", "http-max-conns", "http-max-conns-per-addr", "trusted-proxies",
		"login-failures-per-account", "login-failures-per-addr", "login-failure-window", "login-throttle-entries")
}

// envName is the HUB_* variable of a flag: its name in capitals, dashes as
// underscores.
func envName(flag string) string {
	return "HUB_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fromEnv sets each named flag from its variable (see envName) when that is
// set, parsed exactly as the flag would be; a bad value fails the start in
// finish. A flag on the command line is parsed later, so it still wins.
func (c *Config) fromEnv(fs *pflag.FlagSet, flags ...string) {
	for _, name := range flags {
		if v, ok := os.LookupEnv(envName(name)); ok {
			if err := fs.Set(name, v); err != nil {
				c.envErrs = append(c.envErrs, fmt.Errorf("%s=%q: %w", envName(name), v, err))
			}
		}
	}
}

// opsFlags adds the ops listener, on by default at def ("" for none).
func (c *Config) opsFlags(fs *pflag.FlagSet, def string) {
	fs.StringVar(&c.OpsAddr, "ops-addr", env("HUB_OPS_ADDR", def), "listen address of /healthz, /readyz and /metrics (no authentication: keep it private); empty for none [HUB_OPS_ADDR]")
}

func (c *Config) siteFlags(fs *pflag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&c.Site, "site", env("HUB_SITE", ""), "site this worker serves [HUB_SITE]")
	fs.StringVar(&c.Queue, "queue", env("HUB_QUEUE", "default"), "queue this worker serves [HUB_QUEUE]")
	fs.StringVar(&c.Root, "root", env("HUB_ROOT", ""), "storage root, an existing folder other than /; every API path is inside it [HUB_ROOT]")
	fs.BoolVar(&c.InitRoot, "init", env("HUB_INIT", "") == "1", "take a root no site worker has used yet (without a .hub folder); once, for a new site [HUB_INIT=1]")
	fs.DurationVar(&c.StopTimeout, "stop-timeout", envDuration("HUB_STOP_TIMEOUT", 30*time.Second), "how long a stopping site worker lets running steps end before cancelling them (they are retried, from their journal) [HUB_STOP_TIMEOUT]")
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
	if err := errors.Join(c.envErrs...); err != nil {
		return err
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if f := strings.ToLower(c.LogFormat); f != "text" && f != "json" {
		return fmt.Errorf("HUB_LOG_FORMAT (--log-format) must be text or json, got %q", c.LogFormat)
	}
	if c.StartTimeout < 0 {
		return fmt.Errorf("HUB_START_TIMEOUT (--start-timeout) must not be negative, got %s", c.StartTimeout)
	}
	if err := c.TemporalTLS.check(); err != nil {
		return err
	}
	if fs.Lookup("api-addr") != nil {
		return c.finishServers()
	}
	return nil
}

// finishServers validates the limits of the HTTP servers and the login
// throttle, and hands both the trusted proxies.
func (c *Config) finishServers() error {
	proxies, err := auth.ParseProxies(strings.Split(c.TrustedProxies, ","))
	if err != nil {
		return fmt.Errorf("HUB_TRUSTED_PROXIES (--trusted-proxies): %w", err)
	}
	c.HTTP.TrustedProxies, c.Login.TrustedProxies = proxies, proxies
	h, l := c.HTTP, c.Login
	errs := []error{
		between("http-read-header-timeout", h.ReadHeaderTimeout, time.Second, 5*time.Minute),
		between("http-read-timeout", h.ReadTimeout, h.ReadHeaderTimeout, time.Hour),
		between("http-write-timeout", h.WriteTimeout, h.ReadTimeout, 2*time.Hour),
		between("http-idle-timeout", h.IdleTimeout, time.Second, time.Hour),
		between("http-max-header-bytes", h.MaxHeaderBytes, 4<<10, 1<<20),
		between("http-max-conns", h.MaxConns, 16, 1<<20),
		between("http-max-conns-per-addr", h.MaxConnsPerAddr, 0, h.MaxConns),
		between("login-failures-per-account", l.AccountFailures, 1, 1000),
		between("login-failures-per-addr", l.AddrFailures, 1, 100_000),
		between("login-failure-window", l.Window, time.Second, 24*time.Hour),
		between("login-throttle-entries", l.MaxEntries, 1000, 10_000_000),
	}
	return errors.Join(errs...)
}

// between checks that a setting lies in [lo, hi]; a bound may be another
// setting (the read timeout is at least the read header timeout, the write
// timeout at least the read timeout, as it runs while the body is read).
func between[T int | time.Duration](flag string, v, lo, hi T) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s (--%s) must be between %v and %v, got %v", envName(flag), flag, lo, hi, v)
	}
	return nil
}

// parseLevel reads HUB_LOG_LEVEL; anything but the four names fails the
// start rather than silently logging at info.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("HUB_LOG_LEVEL (--log-level) must be debug, info, warn or error, got %q", s)
}

// logger returns the process's logger (finish has validated the level and
// format); min raises the level, e.g. for the Temporal SDK's chatter.
func (c *Config) logger(min ...slog.Level) *slog.Logger {
	lvl, _ := parseLevel(c.LogLevel)
	for _, m := range min {
		lvl = max(lvl, m)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if strings.EqualFold(c.LogFormat, "json") {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
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
		key, err := vocab.ParseSecretKey(c.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("HUB_SECRET_KEY: %w", err)
		}
		return key, nil
	}
	file := c.secretKeyFile()
	data, err := os.ReadFile(file)
	switch {
	case err == nil:
		key, err := vocab.ParseSecretKey(string(data))
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
	enc := vocab.NewSecretKey()
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
	return vocab.ParseSecretKey(enc)
}

// openSecrets loads the secret key (see loadSecretKey) into c.secrets.
func (c *Config) openSecrets(generate bool) error {
	key, err := c.loadSecretKey(generate)
	if err != nil {
		return err
	}
	c.secrets, err = vocab.NewCipher(key)
	return err
}

// checkRootSetting refuses a site worker without a root.
func checkRootSetting(root string) error {
	if root == "" {
		return errors.New("say where the site's storage is: --root DIR (HUB_ROOT)")
	}
	return nil
}

// legacyRoot: / as a site root, taken only where a site ran there before
// (when it was the default), with a warning.
func legacyRoot(root string) bool { return filepath.Clean(root) == "/" }

// checkRoot makes sure a site worker's root is the site's: an existing
// folder that a site worker has used before (it holds .hub), unless init.
// A root whose volume is not mounted is an empty folder or none: a worker
// serving it would write the site's data to the disk beneath, hidden once
// the volume is mounted.
func checkRoot(root string, init bool) error {
	fi, err := os.Stat(root)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("site root %s does not exist: mount its volume, or create it and start once with --init (HUB_INIT=1)", root)
	case err != nil:
		return fmt.Errorf("site root: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("site root %s is not a folder", root)
	}
	if mp := fsutil.UnmountedVolume(root); mp != "" {
		return fmt.Errorf("site root %s lies beneath %s, which /etc/fstab mounts and is not mounted: mount it", root, mp)
	}
	_, err = os.Stat(filepath.Join(root, ".hub"))
	switch {
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("site root: %w", err)
	case legacyRoot(root) && err != nil:
		// The whole host: the hub's data, other sites' folders, the targets.
		return errors.New("the site root must not be / (HUB_ROOT): give the folder that holds the site's data")
	case err == nil || init:
		return nil
	}
	return fmt.Errorf("site root %s has no .hub folder: no site worker has used it, or its volume is not mounted; "+
		"for a new site, start once with --init (HUB_INIT=1)", root)
}
