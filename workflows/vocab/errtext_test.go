package vocab

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCleanErrorText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"activity error (type: RunStep, scheduledEventID: 12, startedEventID: 13, identity: 7@h@): disk full (type: *fs.PathError, retryable: true)":                                                                                                                                   "disk full",
		"workflow execution error (type: BrowseWorkflow, workflowID: browse-1, runID: 9): activity error (type: ListDir, scheduledEventID: 5, startedEventID: 6, identity: x): \"/a\": path leaves the site root (type: BadPath, retryable: false): \"/a\": path leaves the site root": "\"/a\": path leaves the site root: \"/a\": path leaves the site root",
		"child workflow execution error (type: X, workflowID: w, runID: r, initiatedEventID: 3, startedEventID: 4): boom (type: Y, retryable: false)":                                                                                                                                  "boom",
		"activity error (type: RunStep, scheduledEventID: 1, startedEventID: 0, identity: ): activity ScheduleToClose timeout (type: ScheduleToClose)":                                                                                                                                 "activity ScheduleToClose timeout",
		"sync_nas_users: s1: activity error (type: ApplyNASUsers, scheduledEventID: 5, startedEventID: 6, identity: i): no such group (type: BadInput, retryable: false); s2: ok":                                                                                                      "sync_nas_users: s1: no such group; s2: ok",
		"invalid: not finished within task_invalidation_timeout (24h0m0s) of being handed to site s1":                                                                                                                                                                                  "invalid: not finished within task_invalidation_timeout (24h0m0s) of being handed to site s1",
		"": "",
	} {
		require.Equal(t, want, CleanErrorText(in))
	}
}

func TestCleanErrorField(t *testing.T) {
	t.Parallel()
	raw := json.RawMessage(`{"error":"activity error (type: ApplySettings, scheduledEventID: 5, startedEventID: 6, identity: i): disk full (type: *fs.PathError, retryable: true)","set":["a"],"n":12345678901234567}`)
	var got map[string]any
	require.NoError(t, json.Unmarshal(CleanErrorField(raw), &got))
	require.Equal(t, map[string]any{"error": "disk full", "set": []any{"a"}, "n": float64(12345678901234567)}, got)
	require.Contains(t, string(CleanErrorField(raw)), `"n":12345678901234567`, "numbers kept as written")
	for _, keep := range []string{`{"set":["a"]}`, `null`, `not json`, `{"error":"plain"}`} {
		require.Equal(t, keep, string(CleanErrorField(json.RawMessage(keep))))
	}
}
