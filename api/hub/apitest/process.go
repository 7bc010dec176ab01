package apitest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/activities/changes"
	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/api/auth"
	hubapi "github.com/thehub/hub/api/hub"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
	"github.com/thehub/hub/workflows/vocab"
)

// workerProcessEnv carries, to a re-executed test binary, the site worker
// it should run instead of its tests (see RunWorkerProcessIfAsked).
const workerProcessEnv = "HUB_TEST_SITE_WORKER_PROCESS"

type workerProcess struct {
	TemporalAddr, Namespace string
	Site                    worker.SiteConfig
	SecretKey               []byte
}

// RunWorkerProcessIfAsked turns this test binary into the child process
// StartSiteWorkerProcess, StartHubWorkerProcess or StartAPIProcess
// started it as, if one did; call it first in TestMain. Such a process
// runs until it is killed and never returns.
func RunWorkerProcessIfAsked() {
	runAPIProcessIfAsked()
	runHubWorkerProcessIfAsked()
	var p workerProcess
	fail, asked := childProcess(workerProcessEnv, "site worker process", &p)
	if !asked {
		return
	}
	c := dialChild(fail, p.TemporalAddr, p.Namespace)
	var err error
	if p.Site.Cipher, err = vocab.NewCipher(p.SecretKey); err != nil {
		fail(err)
	}
	w, err := worker.Site(c, p.Site)
	if err != nil {
		fail(err)
	}
	if err := w.Start(); err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go worker.Heartbeats(ctx, c, p.Site, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	<-ctx.Done()
	w.Stop()
	os.Exit(0)
}

// StartSiteWorkerProcess runs a site worker in a child process (this test
// binary, re-executed) so that a test can kill it with SIGKILL like a
// crashed machine: nothing of it gets to clean up. The package's TestMain
// must call RunWorkerProcessIfAsked. env adds variables to the child's
// environment (a fault point, say). The process is killed when the test
// ends.
func (e *Env) StartSiteWorkerProcess(cfg worker.SiteConfig, env ...string) *os.Process {
	cfg.Cipher = nil // passed as its key
	return e.startChild(workerProcessEnv, workerProcess{TemporalAddr: TemporalAddr(e.T), Namespace: e.Namespace,
		Site: cfg, SecretKey: e.SecretKey}, env, nil).Process
}

// startChild starts this test binary again with cfg (JSON) in variable
// name and env added to its environment; stdout, when set, receives the
// child's standard output. The child is killed when the test ends.
func (e *Env) startChild(name string, cfg any, env []string, stdout *io.ReadCloser) *exec.Cmd {
	raw, err := json.Marshal(cfg)
	require.NoError(e.T, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), name+"="+string(raw)), env...)
	cmd.Stderr = os.Stderr
	if stdout != nil {
		*stdout, err = cmd.StdoutPipe()
		require.NoError(e.T, err)
	}
	dieWithParent(cmd)
	require.NoError(e.T, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.T.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd
}

// hubWorkerProcessEnv carries, to a re-executed test binary, the hub
// worker it should run instead of its tests (see StartHubWorkerProcess).
const hubWorkerProcessEnv = "HUB_TEST_HUB_WORKER_PROCESS"

type hubWorkerProcess struct {
	TemporalAddr, Namespace, DBURL string
	SecretKey                      []byte
}

// runHubWorkerProcessIfAsked runs the hub worker of StartHubWorkerProcess
// until the process is killed (by the test, or by its own fault point).
func runHubWorkerProcessIfAsked() {
	var p hubWorkerProcess
	fail, asked := childProcess(hubWorkerProcessEnv, "hub worker process", &p)
	if !asked {
		return
	}
	db, err := models.Open(p.DBURL)
	if err != nil {
		fail(err)
	}
	cipher, err := vocab.NewCipher(p.SecretKey)
	if err != nil {
		fail(err)
	}
	w := worker.Hub(dialChild(fail, p.TemporalAddr, p.Namespace), &hubact.Activities{DB: db, Secrets: cipher})
	fail(w.Run(nil))
}

// StartHubWorkerProcess runs this Env's hub worker (every workflow and the
// hub activities) in a child process over the same database and Temporal
// namespace, with env added to its environment (a fault point, say), so
// that a test can kill it like a crashed machine. The process is killed
// when the test ends.
func (e *Env) StartHubWorkerProcess(env ...string) *os.Process {
	return e.startChild(hubWorkerProcessEnv, hubWorkerProcess{TemporalAddr: TemporalAddr(e.T), Namespace: e.Namespace,
		DBURL: e.DBURL, SecretKey: e.SecretKey}, env, nil).Process
}

// apiProcessEnv carries, to a re-executed test binary, the hub API it
// should serve instead of running its tests (see StartAPIProcess).
const apiProcessEnv = "HUB_TEST_API_PROCESS"

type apiProcess struct {
	TemporalAddr, Namespace, DBURL string
}

// runAPIProcessIfAsked serves the hub API of StartAPIProcess, printing
// its address on the first line of stdout, until the process is killed
// (by the test, or by its own fault point: HUB_FAULT_POINT).
func runAPIProcessIfAsked() {
	var p apiProcess
	fail, asked := childProcess(apiProcessEnv, "api process", &p)
	if !asked {
		return
	}
	ctx := context.Background()
	db, err := models.Open(p.DBURL)
	if err != nil {
		fail(err)
	}
	c := dialChild(fail, p.TemporalAddr, p.Namespace)
	tokens, err := auth.NewTokens(ctx, db)
	if err != nil {
		fail(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	api := &hubapi.Server{DB: db, Tokens: tokens, Changes: &changes.Service{DB: db, Temporal: c, Log: log}, IDP: &auth.IDP{}, Log: log}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}
	fmt.Println(ln.Addr().String())
	fail(http.Serve(ln, api.Handler()))
}

// StartAPIProcess serves this Env's hub API from a child process (this
// test binary, re-executed) over the same database and Temporal
// namespace, with env added to its environment (a fault point, say), and
// returns its base URL. The process is killed when the test ends.
func (e *Env) StartAPIProcess(env ...string) string {
	var out io.ReadCloser
	e.startChild(apiProcessEnv, apiProcess{TemporalAddr: TemporalAddr(e.T), Namespace: e.Namespace, DBURL: e.DBURL}, env, &out)
	addr, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(e.T, err, "the API process did not start")
	return "http://" + strings.TrimSpace(addr)
}

// UnreachableTemporal is a Temporal client whose every call fails as if
// the server were down (nothing listens at its address).
func UnreachableTemporal(t testing.TB) client.Client {
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Namespace: "nowhere"})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// childProcess decodes into p the configuration a test passed to this
// re-executed binary in the environment variable env; asked is false when
// there is none. fail ends the child with the error, labelled.
func childProcess(env, label string, p any) (fail func(error), asked bool) {
	fail = func(err error) { fmt.Fprintln(os.Stderr, label+":", err); os.Exit(3) }
	raw := os.Getenv(env)
	if raw == "" {
		return fail, false
	}
	if err := json.Unmarshal([]byte(raw), p); err != nil {
		fail(err)
	}
	return fail, true
}

// dialChild connects a child process to the test's Temporal namespace.
func dialChild(fail func(error), addr, namespace string) client.Client {
	c, err := client.Dial(client.Options{HostPort: addr, Namespace: namespace, Logger: quietLogger()})
	if err != nil {
		fail(err)
	}
	return c
}
