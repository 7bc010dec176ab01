package cj_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/cj/cjtest"
)

// TestSnapshotNamesOfSchedulesAreReserved: a space's snapshot schedule
// names its snapshots scheduled-<time>, and its retention removes the
// expired ones by that name; a C+J snapshot so named would be removed
// with them, so the API refuses the prefix (422 on the name).
func TestSnapshotNamesOfSchedulesAreReserved(t *testing.T) {
	t.Parallel()
	scheduled := site.ScheduledSnapshotName(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	require.True(t, strings.HasPrefix(scheduled, "scheduled-"), "the prefix the API refuses is the schedules'")
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		e.Create("spaces", map[string]any{"name": "work"})
		for _, name := range []string{scheduled, "scheduled-x"} {
			r := e.Do(http.MethodPost, "/snapshots/", e.Admin, map[string]any{"name": name, "space": "work"})
			require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
			require.Equal(t, "name", r.Error().Fields[0].Name)
			require.Contains(t, r.Error().Fields[0].Message, "reserved for scheduled snapshots")
		}
		// Other names, scheduled ones included further in, are fine.
		for _, name := range []string{"my-scheduled-1", "Scheduled_1"} {
			r := e.Do(http.MethodPost, "/snapshots/", e.Admin, map[string]any{"name": name, "space": "work"})
			require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		}
	})
}

// TestSnapshotNamesFitTheTrash: a removed snapshot's copy waits in the
// site trash as snapshot.<space>.<name>.<time>; with a space and a
// snapshot name of 150 characters each (each within the API's limit) that
// name passed 255 bytes, and the removal failed for ever (a reviewer's
// finding). The API refuses such a pair (422 on the name); 225 bytes
// together pass.
func TestSnapshotNamesFitTheTrash(t *testing.T) {
	t.Parallel()
	space := strings.Repeat("s", 150)
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		e.Create("spaces", map[string]any{"name": space})
		r := e.Do(http.MethodPost, "/snapshots/", e.Admin, map[string]any{"name": strings.Repeat("n", 76), "space": space})
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, string(r.Body))
		require.Equal(t, "name", r.Error().Fields[0].Name)
		require.Contains(t, r.Error().Fields[0].Message, "must fit a file name")
		r = e.Do(http.MethodPost, "/snapshots/", e.Admin, map[string]any{"name": strings.Repeat("n", 75), "space": space})
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
	})
}
