package workflows_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/workflows"
)

// TestReplayRecordedJobHistories replays histories recorded from real job
// runs (pause/resume, cancel, resubmit; see api/hub recordHistories) so
// that a change to JobWorkflow that breaks determinism for running jobs
// fails here. A deliberate change must be guarded with workflow.GetVersion.
func TestReplayRecordedJobHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "recorded histories are missing from testdata/")
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.JobWorkflow, workflow.RegisterOptions{Name: workflows.JobWorkflowName})
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, f))
		})
	}
}
