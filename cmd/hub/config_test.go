package main

import (
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/cmd/hub/hardening"
)

// serveConfig builds the configuration of hub serve from args and the
// environment, as the command does.
func serveConfig(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	cfg := new(Config)
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	cfg.commonFlags(fs)
	cfg.serveFlags(fs)
	require.NoError(t, fs.Parse(args))
	return cfg, cfg.finish(fs)
}

func TestServerLimitsConfig(t *testing.T) {
	cfg, err := serveConfig(t)
	require.NoError(t, err)
	want := hardening.Defaults()
	want.TrustedProxies = cfg.HTTP.TrustedProxies
	require.Equal(t, want, cfg.HTTP)
	require.Empty(t, cfg.HTTP.TrustedProxies, "no proxy is trusted by default")
	wantLogin := auth.DefaultThrottle()
	wantLogin.TrustedProxies = cfg.Login.TrustedProxies
	require.Equal(t, wantLogin, cfg.Login)

	t.Setenv("HUB_HTTP_READ_TIMEOUT", "10m")
	t.Setenv("HUB_HTTP_WRITE_TIMEOUT", "11m")
	t.Setenv("HUB_LOGIN_FAILURES_PER_ACCOUNT", "5")
	t.Setenv("HUB_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7")
	cfg, err = serveConfig(t, "--login-failures-per-account=7")
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, cfg.HTTP.ReadTimeout)
	require.Equal(t, 11*time.Minute, cfg.HTTP.WriteTimeout)
	require.Equal(t, 7, cfg.Login.AccountFailures, "the flag wins")
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}
	require.Equal(t, proxies, cfg.HTTP.TrustedProxies)
	require.Equal(t, proxies, cfg.Login.TrustedProxies)
}

func TestServerLimitsConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		env, value, want string
	}{
		{"HUB_HTTP_READ_TIMEOUT", "soon", `HUB_HTTP_READ_TIMEOUT="soon"`},
		{"HUB_HTTP_READ_HEADER_TIMEOUT", "0s", "HUB_HTTP_READ_HEADER_TIMEOUT (--http-read-header-timeout) must be between 1s and 5m0s, got 0s"},
		{"HUB_HTTP_READ_TIMEOUT", "2s", "HUB_HTTP_READ_TIMEOUT (--http-read-timeout) must be between 10s and 1h0m0s"},
		{"HUB_HTTP_WRITE_TIMEOUT", "1m", "HUB_HTTP_WRITE_TIMEOUT (--http-write-timeout) must be between 5m0s and 2h0m0s"},
		{"HUB_HTTP_IDLE_TIMEOUT", "-1s", "HUB_HTTP_IDLE_TIMEOUT"},
		{"HUB_HTTP_MAX_HEADER_BYTES", "9223372036854775807", "HUB_HTTP_MAX_HEADER_BYTES (--http-max-header-bytes) must be between 4096 and 1048576"},
		{"HUB_HTTP_MAX_HEADER_BYTES", "99999999999999999999", `HUB_HTTP_MAX_HEADER_BYTES="99999999999999999999"`},
		{"HUB_HTTP_MAX_CONNS", "0", "HUB_HTTP_MAX_CONNS"},
		{"HUB_HTTP_MAX_CONNS_PER_ADDR", "5000", "HUB_HTTP_MAX_CONNS_PER_ADDR (--http-max-conns-per-addr) must be between 0 and 1024"},
		{"HUB_TRUSTED_PROXIES", "proxy.example.com", "HUB_TRUSTED_PROXIES (--trusted-proxies)"},
		{"HUB_LOGIN_FAILURES_PER_ACCOUNT", "0", "HUB_LOGIN_FAILURES_PER_ACCOUNT"},
		{"HUB_LOGIN_FAILURES_PER_ADDR", "1000000", "HUB_LOGIN_FAILURES_PER_ADDR"},
		{"HUB_LOGIN_FAILURE_WINDOW", "48h", "HUB_LOGIN_FAILURE_WINDOW"},
		{"HUB_LOGIN_THROTTLE_ENTRIES", "10", "HUB_LOGIN_THROTTLE_ENTRIES"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			_, err := serveConfig(t)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestWorkerRootIsTheSites: a site worker needs its root said, never /,
// and takes only a folder a site worker used before (it holds .hub) unless
// told --init: a root whose volume is not mounted (no folder, or an empty
// one) is refused before anything is written beneath it.
func TestWorkerRootIsTheSites(t *testing.T) {
	run := func(args ...string) error {
		cmd := rootCmd()
		cmd.SetArgs(append([]string{"worker", "--site", "s1", "--temporal-addr", "127.0.0.1:1", "--start-timeout", "1ms"}, args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		return cmd.Execute()
	}
	t.Setenv("HUB_ROOT", "")
	require.ErrorContains(t, run(), "--root DIR")
	require.ErrorContains(t, run("--root", "/"), "must not be /")
	require.ErrorContains(t, run("--root", "//"), "must not be /")

	mnt := t.TempDir()
	root := filepath.Join(mnt, "vol")
	require.ErrorContains(t, run("--root", root), "does not exist")
	require.NoDirExists(t, root, "nothing made where the volume belongs")
	require.NoError(t, os.Mkdir(root, 0o755)) // an empty mountpoint
	require.ErrorContains(t, run("--root", root), "has no .hub folder")
	require.NoDirExists(t, filepath.Join(root, ".hub"))

	require.NoError(t, checkRoot(root, true), "a new site, once")
	require.NoError(t, os.Mkdir(filepath.Join(root, ".hub"), 0o750))
	require.NoError(t, checkRoot(root, false), "a root used before")
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "file"), nil, 0o644))
	require.ErrorContains(t, checkRoot(filepath.Join(mnt, "file"), true), "not a folder")

	// Beneath a mount point of /etc/fstab that is not mounted, a root is
	// on the disk under it, --init or not.
	fstab := filepath.Join(t.TempDir(), "fstab")
	require.NoError(t, os.WriteFile(fstab, []byte("nas:/vol "+mnt+" nfs defaults 0 0\n"), 0o644))
	saved := fsutil.MountTables
	t.Cleanup(func() { fsutil.MountTables = saved })
	fsutil.MountTables.Fstab = fstab
	require.ErrorContains(t, checkRoot(root, true), "which /etc/fstab mounts and is not mounted")
	require.ErrorContains(t, run("--root", root), "which /etc/fstab mounts and is not mounted")
}

// TestStopTimeoutConfig: a site worker lets running steps end for 30 s by
// default, HUB_STOP_TIMEOUT or --stop-timeout otherwise.
func TestStopTimeoutConfig(t *testing.T) {
	parse := func(args ...string) time.Duration {
		cfg := new(Config)
		fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
		cfg.siteFlags(fs)
		require.NoError(t, fs.Parse(args))
		return cfg.StopTimeout
	}
	require.Equal(t, 30*time.Second, parse())
	t.Setenv("HUB_STOP_TIMEOUT", "2m")
	require.Equal(t, 2*time.Minute, parse())
	require.Equal(t, 5*time.Second, parse("--stop-timeout=5s"), "the flag wins")
}
