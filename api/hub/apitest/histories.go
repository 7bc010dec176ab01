package apitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"
)

// RecordHistoriesEnv names the folder RecordHistories writes to; unset,
// it records nothing. Regenerate the replay test's histories with
//
//	HUB_RECORD_HISTORIES=$PWD/workflows/testdata go test ./api/... -run 'TestJobPauseResume|TestSpaceLifecycle|...'
const RecordHistoriesEnv = "HUB_RECORD_HISTORIES"

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// RecordHistories writes the history of every closed workflow run of the
// test's namespace as JSON (<test>-<workflow id>-<run>.json) for the
// replay test in workflows/, when HUB_RECORD_HISTORIES names a folder.
func RecordHistories(t testing.TB, c client.Client) {
	dir := os.Getenv(RecordHistoriesEnv)
	if dir == "" {
		return
	}
	ctx := context.Background()
	time.Sleep(2 * time.Second) // visibility lists a closed run a moment after it closes
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: "ExecutionStatus != 'Running'", PageSize: 1000})
	require.NoError(t, err)
	for _, ex := range resp.GetExecutions() {
		id, run := ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId()
		it := c.GetWorkflowHistory(ctx, id, run, false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		h := &history.History{}
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			h.Events = append(h.Events, ev)
		}
		data, err := protojson.Marshal(h)
		require.NoError(t, err)
		name := unsafeName.ReplaceAllString(fmt.Sprintf("%s-%s-%s", t.Name(), id, run), "-") + ".json"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
}
