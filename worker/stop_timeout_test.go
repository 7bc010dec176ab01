package worker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/worker/devserver"
	"github.com/thehub/hub/workflows"
)

// TestStoppingASiteWorkerLetsItsStepsEnd: a site worker stopped (a deploy,
// SIGTERM) while a step runs lets the step end within StopTimeout instead
// of cancelling it; with no StopTimeout the step is cancelled at once.
// A real site worker (Site) on an embedded Temporal server.
func TestStoppingASiteWorkerLetsItsStepsEnd(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	srv, err := devserver.Start(devserver.Options{Logger: logger})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddr(), Namespace: srv.Namespace(),
		Logger: sdklog.NewStructuredLogger(logger)})
	require.NoError(t, err)
	t.Cleanup(c.Close)

	for _, tc := range []struct {
		stopTimeout time.Duration
		cancelled   bool
	}{{10 * time.Second, false}, {0, true}} {
		root := filepath.Join(t.TempDir(), "site")
		require.NoError(t, os.MkdirAll(filepath.Join(root, ".hub"), 0o755))
		queue := "q" + tc.stopTimeout.String()
		w, err := Site(c, SiteConfig{Site: "s", Queue: queue, Node: "n", Root: root, StopTimeout: tc.stopTimeout})
		require.NoError(t, err)
		started, ended := make(chan struct{}), make(chan error, 1)
		step := func(ctx context.Context) error {
			close(started)
			select {
			case <-time.After(time.Second): // a step about to end
				ended <- nil
			case <-ctx.Done():
				ended <- ctx.Err()
			}
			return nil
		}
		w.RegisterActivityWithOptions(step, activity.RegisterOptions{Name: "step"})
		w.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
			ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
				RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
			return workflow.ExecuteActivity(ctx, "step").Get(ctx, nil)
		}, workflow.RegisterOptions{Name: "stepping"})
		require.NoError(t, w.Start())
		_, err = c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
			TaskQueue: workflows.SiteTaskQueue("s", queue)}, "stepping")
		require.NoError(t, err)
		<-started
		w.Stop()
		if tc.cancelled {
			require.ErrorIs(t, <-ended, context.Canceled, "no stop timeout: the step is cancelled")
			continue
		}
		select {
		case err := <-ended:
			require.NoError(t, err, "the step ends before the worker stops")
		default:
			t.Fatalf("Stop returned while the step still ran (stop timeout %s)", tc.stopTimeout)
		}
	}
}
