// Package worker builds the hub's Temporal workers: one function per
// task-queue kind.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/internal/fault"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// Version is the hub's version, set at build time with -ldflags.
var Version = "dev"

// Hub returns the hub worker: every workflow and the hub activities; in
// a process with fault points, each activity ends at one (activityDone).
func Hub(c client.Client, acts *hubact.Activities) sdkworker.Worker {
	var opts sdkworker.Options
	if fault.Enabled() {
		opts.Interceptors = []interceptor.WorkerInterceptor{&activityDone{}}
	}
	w := sdkworker.New(c, workflows.HubTaskQueue, opts)
	RegisterWorkflows(w)
	w.RegisterActivity(acts)
	return w
}

// RegisterWorkflows registers every workflow of the hub under its name on
// a worker or a replayer.
func RegisterWorkflows(r interface {
	RegisterWorkflowWithOptions(any, workflow.RegisterOptions)
}) {
	for name, fn := range map[string]any{
		workflows.NodeWorkflowName:           workflows.NodeWorkflow,
		workflows.JobWorkflowName:            workflows.JobWorkflow,
		workflows.JobCleanupWorkflowName:     workflows.JobCleanupWorkflow,
		workflows.ActionWorkflowName:         workflows.ActionWorkflow,
		workflows.BrowseWorkflowName:         workflows.BrowseWorkflow,
		workflows.MaintenanceWorkflowName:    workflows.MaintenanceWorkflow,
		workflows.NASUsersSyncWorkflowName:   workflows.NASUsersSyncWorkflow,
		workflows.SettingsWorkflowName:       workflows.SettingsWorkflow,
		workflows.ResourceChangeWorkflowName: workflows.ResourceChangeWorkflow,
		workflows.CJDatastoresWorkflowName:   workflows.CJDatastoresWorkflow,
		workflows.SiteRefreshWorkflowName:    workflows.SiteRefreshWorkflow,
		workflows.SpaceWorkflowName:          workflows.SpaceWorkflow,
		workflows.BucketDeleteWorkflowName:   workflows.BucketDeleteWorkflow,
		workflows.TargetFilesWorkflowName:    workflows.TargetFilesWorkflow,
		workflows.CollectWorkflowName:        workflows.CollectWorkflow,
		workflows.OutboxWorkflowName:         workflows.OutboxWorkflow,
		workflows.ScheduleWorkflowName:       workflows.ScheduleWorkflow,
		workflows.PolicyWorkflowName:         workflows.PolicyWorkflow,
		workflows.SnapshotWorkflowName:       workflows.SnapshotWorkflow,
		workflows.SearchWorkflowName:         workflows.SearchWorkflow,
		workflows.SetMetadataWorkflowName:    workflows.SetMetadataWorkflow,
		workflows.ScanFileIndexWorkflowName:  workflows.ScanFileIndexWorkflow,
		workflows.AnalyticsWorkflowName:      workflows.AnalyticsWorkflow,
	} {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	}
}

// SiteConfig describes one site worker process.
type SiteConfig struct {
	Site, Queue, Root, Node string
	ConfigDir               string // default <root>/.hub/config
	HeartbeatInterval       time.Duration
	// Cipher opens the target credentials jobs pass sealed; optional.
	Cipher *vocab.Cipher
	// Metrics counts what job steps do; optional.
	Metrics *site.StepMetrics
	// StopTimeout is how long Stop lets running activities end before
	// it cancels them (0: at once).
	StopTimeout time.Duration
}

// unsafePathsEnv lets a site worker run where paths cannot be opened
// race-free (see Site).
const unsafePathsEnv = "HUB_SITE_UNSAFE_PATHS"

// Site returns a worker polling the site's queue with the site activities
// over cfg.Root.
func Site(c client.Client, cfg SiteConfig) (sdkworker.Worker, error) {
	if runtime.GOOS != "linux" && os.Getenv(unsafePathsEnv) != "1" {
		return nil, fmt.Errorf("site workers reach files race-free only on Linux (openat2 and /proc/self/fd); "+
			"on %s a step reaches a file by name after checking it: set %s=1 to accept that", runtime.GOOS, unsafePathsEnv)
	}
	acts, err := site.NewActivities(cfg.Site, cfg.Queue, cfg.Node, cfg.Root, cfg.ConfigDir)
	if err != nil {
		return nil, err
	}
	acts.Cipher, acts.Metrics = cfg.Cipher, cfg.Metrics
	w := sdkworker.New(c, workflows.SiteTaskQueue(cfg.Site, cfg.Queue), siteOptions(acts.Root, cfg.StopTimeout))
	w.RegisterActivity(acts)
	return w, nil
}

// siteOptions are a site worker's options over root.
func siteOptions(root *site.Root, stopTimeout time.Duration) sdkworker.Options {
	return sdkworker.Options{
		// A deploy lets steps about to end finish instead of retrying them.
		WorkerStopTimeout: stopTimeout,
		// The default two pollers measurably starve busy site queues.
		MaxConcurrentActivityTaskPollers: 8,
		// Steps heartbeat their progress (site.StepProgress) at most once a
		// second; without this the SDK would hold them back for 80% of the
		// heartbeat timeout (16 s) and a job's live progress would lag.
		MaxHeartbeatThrottleInterval: time.Second,
		// No activity runs across two volumes (rootGuard).
		Interceptors: []interceptor.WorkerInterceptor{&rootGuard{root: root}},
	}
}

// Heartbeats signals the node's heartbeat to the hub every interval until
// ctx ends; the hub judges liveness from these.
func Heartbeats(ctx context.Context, c client.Client, cfg SiteConfig, log *slog.Logger) {
	hb := workflows.Heartbeat{Site: cfg.Site, Queue: cfg.Queue, Node: cfg.Node, WorkerVersion: Version,
		EngineVersion: "temporal-go-sdk " + temporal.SDKVersion, AnalyticsVersion: Version, SearchVersion: Version}
	opts := client.StartWorkflowOptions{
		ID:                       workflows.NodeWorkflowID(cfg.Site, cfg.Queue, cfg.Node),
		TaskQueue:                workflows.HubTaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
	t := time.NewTicker(cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.SignalWithStartWorkflow(sctx, opts.ID, workflows.NodeHeartbeatSignal, hb, opts, workflows.NodeWorkflowName, hb)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Warn("heartbeat not sent", "site", cfg.Site, "queue", cfg.Queue, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
