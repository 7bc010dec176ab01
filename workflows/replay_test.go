package workflows_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/thehub/hub/worker"
)

// TestReplayRecordedHistories replays histories recorded from real runs
// (jobs paused, resumed, cancelled and resubmitted; C+J changes, failed
// and retried; space and share changes; maintenance and job cleanup; see
// apitest.RecordHistories) so that a change to a workflow that breaks
// determinism for running executions fails here. A deliberate change must
// be guarded with workflow.GetVersion.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "recorded histories are missing from testdata/")
	r := sdkworker.NewWorkflowReplayer()
	worker.RegisterWorkflows(r)
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(logger, f))
		})
	}
}
