package devserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/log/tag"
)

// testLogger writes to stderr rather than t.Log: server goroutines may still
// log while shutting down, and t.Log after the test has finished panics.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.Logger = testLogger()
	srv, err := Start(opts)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return srv
}

func dial(t *testing.T, srv *Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{
		HostPort:  srv.FrontendAddr(),
		Namespace: srv.Namespace(),
		Logger:    sdklog.NewStructuredLogger(testLogger()),
	})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, "greet", name).Get(ctx, &out)
	return out, err
}

func greet(_ context.Context, name string) (string, error) { return "hello " + name, nil }

// runWorker starts a worker for greetWorkflow on taskQueue until the test ends.
func runWorker(t *testing.T, c client.Client, taskQueue string) {
	t.Helper()
	w := worker.New(c, taskQueue, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterActivityWithOptions(greet, activity.RegisterOptions{Name: "greet"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
}

var hubSite = temporal.NewSearchAttributeKeyKeyword("HubSite")

func TestWorkflowAndVisibility(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Options{
		FrontendAddr:     "127.0.0.1:0",
		SearchAttributes: map[string]enums.IndexedValueType{"HubSite": enums.INDEXED_VALUE_TYPE_KEYWORD},
	})
	require.Equal(t, "default", srv.Namespace())
	require.Empty(t, srv.UIURL())
	c := dial(t, srv)
	runWorker(t, c, "tq")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    "wf-visibility",
		TaskQueue:             "tq",
		TypedSearchAttributes: temporal.NewSearchAttributes(hubSite.ValueSet("x")),
	}, greetWorkflow, "hub")
	require.NoError(t, err)
	var got string
	require.NoError(t, run.Get(ctx, &got))
	require.Equal(t, "hello hub", got)

	// Visibility is written asynchronously after the workflow starts.
	require.Eventually(t, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: srv.Namespace(),
			Query:     `HubSite = "x"`,
		})
		return err == nil && len(resp.Executions) == 1 &&
			resp.Executions[0].Execution.WorkflowId == "wf-visibility"
	}, 20*time.Second, 100*time.Millisecond)
}

func TestFilePersistsAcrossRestart(t *testing.T) {
	t.Parallel()
	dbFile := filepath.Join(t.TempDir(), "temporal.db")
	opts := Options{
		FrontendAddr:     "127.0.0.1:0",
		DatabaseFile:     dbFile,
		Namespace:        "hub",
		SearchAttributes: map[string]enums.IndexedValueType{"HubSite": enums.INDEXED_VALUE_TYPE_KEYWORD},
		Logger:           testLogger(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	first, err := Start(opts)
	require.NoError(t, err)
	func() {
		// Stop the first server even when an assertion below fails.
		defer first.Stop()
		c, err := client.Dial(client.Options{
			HostPort:  first.FrontendAddr(),
			Namespace: first.Namespace(),
			Logger:    sdklog.NewStructuredLogger(testLogger()),
		})
		require.NoError(t, err)
		defer c.Close()
		w := worker.New(c, "tq", worker.Options{})
		w.RegisterWorkflow(greetWorkflow)
		w.RegisterActivityWithOptions(greet, activity.RegisterOptions{Name: "greet"})
		require.NoError(t, w.Start())
		defer w.Stop()

		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "wf-persist", TaskQueue: "tq"}, greetWorkflow, "disk")
		require.NoError(t, err)
		require.NoError(t, run.Get(ctx, nil))
	}()
	first.Stop() // a second Stop must be harmless

	// Same file again, plus a search attribute the first run did not know.
	opts.SearchAttributes["HubExtra"] = enums.INDEXED_VALUE_TYPE_INT
	second := startServer(t, opts)
	c := dial(t, second)

	desc, err := c.DescribeWorkflowExecution(ctx, "wf-persist", "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.WorkflowExecutionInfo.Status)

	var last enums.EventType
	events := 0
	iter := c.GetWorkflowHistory(ctx, "wf-persist", "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		last = ev.EventType
		events++
	}
	require.Greater(t, events, 5)
	require.Equal(t, enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, last)

	sas, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "hub"})
	require.NoError(t, err)
	require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, sas.CustomAttributes["HubSite"])
	require.Equal(t, enums.INDEXED_VALUE_TYPE_INT, sas.CustomAttributes["HubExtra"])
}

func TestUI(t *testing.T) {
	t.Parallel()
	srv := startServer(t, Options{FrontendAddr: "127.0.0.1:0", UIAddr: "127.0.0.1:0"})
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, srv.UIURL())

	get := func(path string) bool {
		resp, err := http.Get(srv.UIURL() + path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	require.Eventually(t, func() bool { return get("/") }, 20*time.Second, 100*time.Millisecond)
	// The API route proves the UI reaches the frontend, not just that it serves files.
	require.Eventually(t, func() bool { return get("/api/v1/namespaces") }, 20*time.Second, 100*time.Millisecond)

	srv.Stop()
	srv.Stop()
	_, err := http.Get(srv.UIURL() + "/")
	require.Error(t, err, "UI still serving after Stop")
}

func TestBusyPort(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()

	_, err = Start(Options{FrontendAddr: busy.Addr().String(), Logger: testLogger()})
	require.ErrorContains(t, err, "in use")
	require.ErrorContains(t, err, "HUB_TEMPORAL_ADDR")

	_, err = Start(Options{FrontendAddr: "127.0.0.1:0", UIAddr: busy.Addr().String(), Logger: testLogger()})
	require.ErrorContains(t, err, "in use")
	require.ErrorContains(t, err, "HUB_TEMPORAL_UI_ADDR")
}

func TestLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newSlogLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), slog.LevelWarn)
	svc := l.With(tag.NewStringTag("service", "history"))

	svc.Info("chatty")
	require.Empty(t, buf.String(), "Info must be filtered at the default Warn level")
	svc.Warn("careful", tag.Error(errors.New("boom")))
	require.Contains(t, buf.String(), `msg=careful service=history error=boom`)

	// Fatal only panics while the server is being built, so Start can recover it.
	require.NotPanics(t, func() { svc.Fatal("after start") })
	l.fatalPanics.Store(true)
	require.PanicsWithError(t, "bind failed address=127.0.0.1:1", func() {
		svc.Fatal("bind failed", tag.NewStringTag("address", "127.0.0.1:1"))
	})

	// Once stopping, warnings and canceled-context errors are shutdown noise.
	buf.Reset()
	l.stopping.Store(true)
	svc.Warn("lost connection")
	svc.Error("poll failed", tag.Error(fmt.Errorf("poll: %w", context.Canceled)))
	svc.Error("poll failed", tag.NewStringTag("error", "GetTasks failed. Error: context canceled"))
	require.Empty(t, buf.String())
	svc.Error("failed to stop service")
	require.Contains(t, buf.String(), "failed to stop service")
}

// TestPortsAreBelowTheEphemeralRange: the ports the server is handed
// (frontend and internal services) come from below the kernel's ephemeral
// range, so no outgoing connection takes one between its pick and its
// bind; a taken one is never handed out.
func TestPortsAreBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	low := ephemeralLow()
	require.Greater(t, low, minPort, "this machine's ephemeral range leaves no room below it")
	for range 50 {
		port, err := FreePort(localhost)
		require.NoError(t, err)
		require.GreaterOrEqual(t, port, minPort)
		require.Less(t, port, low)
		ln, err := net.Listen("tcp", net.JoinHostPort(localhost, strconv.Itoa(port)))
		require.NoError(t, err, "a free port")
		require.NoError(t, ln.Close())
	}
	srv := startServer(t, Options{})
	_, port, err := net.SplitHostPort(srv.FrontendAddr())
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	require.Less(t, p, low, "the frontend's port 0 is picked the same way")
}

// TestFreePortNeverTwice: ports are handed out once per process, so two
// servers starting at the same moment never pick the same one (each
// binds its ports seconds after picking them).
func TestFreePortNeverTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		p, err := FreePort("127.0.0.1")
		require.NoError(t, err)
		require.False(t, seen[p], "port %d handed out twice", p)
		seen[p] = true
	}
}
