package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

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

// RunWorkerProcessIfAsked turns this test binary into a site worker
// process when StartSiteWorkerProcess started it; call it first in
// TestMain. The process runs until it is killed and never returns.
func RunWorkerProcessIfAsked() {
	raw := os.Getenv(workerProcessEnv)
	if raw == "" {
		return
	}
	fail := func(err error) { fmt.Fprintln(os.Stderr, "site worker process:", err); os.Exit(3) }
	var p workerProcess
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		fail(err)
	}
	c, err := client.Dial(client.Options{HostPort: p.TemporalAddr, Namespace: p.Namespace, Logger: quietLogger()})
	if err != nil {
		fail(err)
	}
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
// must call RunWorkerProcessIfAsked. The process is killed when the test
// ends.
func (e *Env) StartSiteWorkerProcess(cfg worker.SiteConfig) *os.Process {
	cfg.Cipher = nil // passed as its key
	raw, err := json.Marshal(workerProcess{TemporalAddr: TemporalAddr(e.T), Namespace: e.Namespace, Site: cfg, SecretKey: e.SecretKey})
	require.NoError(e.T, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerProcessEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	dieWithParent(cmd)
	require.NoError(e.T, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	e.T.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return cmd.Process
}
