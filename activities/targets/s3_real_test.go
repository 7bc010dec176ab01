package targets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
)

// TestS3AgainstVersityGW runs the driver contract, multipart uploads and
// the lock contract against a real S3 server rather than the in-process fake: versitygw
// (pinned by the tools/s3server module) with its posix backend, built once
// into the user cache and started on a loopback port for this test.
func TestS3AgainstVersityGW(t *testing.T) {
	t.Parallel()
	gw := startVersityGW(t)
	ctx := context.Background()

	var buckets atomic.Int64
	newBucket := func(t *testing.T) string {
		t.Helper()
		name := fmt.Sprintf("hub-%d", buckets.Add(1))
		_, err := gw.client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
		require.NoError(t, err, "create bucket %s", name)
		return name
	}
	open := func(t *testing.T, cfg Config) Driver {
		t.Helper()
		d, err := Open(cfg)
		require.NoError(t, err)
		return d
	}

	t.Run("contract", func(t *testing.T) {
		t.Parallel()
		// A bucket of its own for every sub-test, keys at its root.
		runDriverContract(t, func(t *testing.T) Driver { return open(t, gw.config(newBucket(t), "")) })
	})
	t.Run("contract-prefix", func(t *testing.T) {
		t.Parallel()
		// One bucket, a prefix of its own for every sub-test: each lists
		// only its own keys although the bucket holds the others'.
		bucket := newBucket(t)
		var sites atomic.Int64
		runDriverContract(t, func(t *testing.T) Driver {
			return open(t, gw.config(bucket, fmt.Sprintf("/sites/site-%d/", sites.Add(1))))
		})
	})
	t.Run("multipart", func(t *testing.T) {
		t.Parallel()
		runS3Multipart(t, gw.config(newBucket(t), ""))
	})
	t.Run("lock", func(t *testing.T) {
		t.Parallel()
		runS3LockContract(t, func(t *testing.T) Config { return gw.config(newBucket(t), "") })
	})
	t.Run("lock-prefix", func(t *testing.T) {
		t.Parallel()
		bucket := newBucket(t)
		var sites atomic.Int64
		runS3LockContract(t, func(t *testing.T) Config {
			return gw.config(bucket, fmt.Sprintf("/sites/site-%d/", sites.Add(1)))
		})
	})
}

// versityGW is a running versitygw server.
type versityGW struct {
	url            string
	access, secret string
}

// config is a driver Config for bucket on the server.
func (g *versityGW) config(bucket, prefix string) Config {
	return Config{
		StorageType:     "s3",
		Endpoint:        g.url,
		Region:          "us-east-1",
		Bucket:          bucket,
		Prefix:          prefix,
		AccessKeyID:     g.access,
		SecretAccessKey: g.secret,
	}
}

// client is a plain SDK client for what the driver does not do (buckets).
func (g *versityGW) client() *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(g.url),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(g.access, g.secret, ""),
	})
}

// startVersityGW starts versitygw over a fresh posix root on a free
// loopback port and stops it when t ends. It fails t, never skips it, when
// the server cannot be built or does not come up.
func startVersityGW(t *testing.T) *versityGW {
	t.Helper()
	bin := versityGWBinary(t)
	gw := &versityGW{access: "hubtestaccess", secret: "hubtestsecret-0123456789"}
	addr := freeLoopbackAddr(t)
	gw.url = "http://" + addr

	logs := &syncBuffer{}
	cmd := exec.Command(bin,
		"--port", addr,
		"--access", gw.access, "--secret", gw.secret,
		"--region", "us-east-1",
		"--quiet", // no line per request on stdout
		"posix", t.TempDir())
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.WaitDelay = 5 * time.Second // even if something kept its output open
	require.NoError(t, cmd.Start(), "start versitygw")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	shown := false // the output is already in a failure message
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() && !shown {
			t.Logf("versitygw output:\n%s", logs.String())
		}
	})

	// Up once it answers HTTP at all: an unsigned GET / gets a 403.
	httpc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := httpc.Get(gw.url + "/")
		if err == nil {
			resp.Body.Close()
			return gw
		}
		select {
		case werr := <-exited:
			exited <- werr // for the cleanup
			shown = true
			t.Fatalf("versitygw exited before answering (%v); its output:\n%s", werr, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			shown = true
			t.Fatalf("versitygw did not answer on %s within 30s (last error: %v); its output:\n%s", addr, err, logs.String())
		}
	}
}

// versityGWBinary builds the versitygw command from the tools/s3server
// module into the user cache once and returns its path. The file name
// carries the pinned version and a hash of that module's go.mod and go.sum,
// so changing the pin builds afresh.
func versityGWBinary(t *testing.T) string {
	t.Helper()
	mod := filepath.Join(repoRoot(t), "tools", "s3server")
	gomod, err := os.ReadFile(filepath.Join(mod, "go.mod"))
	require.NoError(t, err)
	gosum, err := os.ReadFile(filepath.Join(mod, "go.sum"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*github\.com/versity/versitygw (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatalf("%s/go.mod does not require github.com/versity/versitygw", mod)
	}
	h := sha256.Sum256(append(append(gomod, 0), gosum...))
	name := fmt.Sprintf("versitygw-%s-%s", m[1], hex.EncodeToString(h[:])[:12])

	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "hub-test-bin")
	bin := filepath.Join(dir, name)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building versitygw needs the go command: %v", err)
	}
	// Built under a name of its own, then renamed: a concurrent run never
	// sees a half-written binary.
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-C", mod, "-o", tmp, "github.com/versity/versitygw/cmd/versitygw")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build versitygw (%s): %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	require.NoError(t, os.Rename(tmp, bin))
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Second))
	// Binaries of earlier pins are never used again.
	old, _ := filepath.Glob(filepath.Join(dir, "versitygw-v*"))
	for _, o := range old {
		if o != bin && !strings.Contains(filepath.Base(o), ".tmp") {
			_ = os.Remove(o)
		}
	}
	return bin
}

// repoRoot walks up from the test's working directory (its package) to
// the folder holding tools/s3server.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "tools", "s3server", "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			t.Fatalf("no tools/s3server/go.mod above %s", dir)
		}
		d = parent
	}
}

// freeLoopbackAddr returns a 127.0.0.1 address with a port that was free
// a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// syncBuffer collects a child process's output for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
