package hub_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/workflows"
)

// TestSpaceSnapshotSchedule: a space's snapshot schedule is a Temporal
// Schedule; a firing takes a snapshot of the space at its site and removes
// the scheduled snapshots older than the retention, never others.
func TestSpaceSnapshotSchedule(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		s := newJobSite(t, e, "south")
		id := policySpace(t, e, "south", s.root, "lab")
		require.NoError(t, os.WriteFile(filepath.Join(s.root, "spaces", "lab", "a.txt"), []byte("first"), 0o644))
		// A migrated file: the snapshot keeps it as a stub of its own.
		require.NoError(t, os.WriteFile(filepath.Join(s.root, "spaces", "lab", "m.txt"), []byte("migrated"), 0o644))
		job := runJob(t, e, "south", "migrate", []string{"/spaces/lab/m.txt"}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		base := fmt.Sprintf("/api/spaces/%d/", id)

		for field, ss := range map[string]map[string]any{
			"snapshot_schedule.frequency": {"frequency": "fortnightly", "time": "02:00", "duration": "7d"},
			"snapshot_schedule.duration":  {"frequency": "daily", "time": "02:00", "duration": "a week"},
		} {
			r := e.AsAdmin(http.MethodPatch, base, map[string]any{"snapshot_schedule": ss})
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", field, r.Body)
			require.Contains(t, r.Map(), field, string(r.Body))
		}
		r := e.AsAdmin(http.MethodPatch, base, map[string]any{"snapshot_schedule": map[string]any{"frequency": "daily", "time": "02:30", "duration": "7d"}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		tid := workflows.SnapshotTemporalID(id)
		d := describeSchedule(t, e, tid)
		require.NotNil(t, d, "the snapshot schedule is a Temporal Schedule")
		next := d.Info.NextActionTimes[0].UTC()
		require.Equal(t, []int{2, 30}, []int{next.Hour(), next.Minute()})
		auto := e.AsAdmin(http.MethodGet, "/api/automatedschedules/", nil).Map()
		require.EqualValues(t, 1, auto["count"], auto)
		require.Equal(t, "snapshot", auto["results"].([]any)[0].(map[string]any)["schedule_type"])

		// Its name is a label: renamed (to one no folder may bear), its
		// snapshots stay in the folder of its own (.snapshots/lab, beside
		// its C+J snapshots).
		r = e.AsAdmin(http.MethodPatch, base, map[string]any{"name": "Lab (renamed)"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))

		// An expired scheduled snapshot, and one taken by hand (C+J).
		snaps := filepath.Join(s.root, ".snapshots", "lab")
		for _, n := range []string{"scheduled-20200101T000000Z", "by-hand"} {
			require.NoError(t, os.MkdirAll(filepath.Join(snaps, n), 0o755))
		}

		// Fire it now, as the Web UI's "trigger" does.
		require.NoError(t, e.Temporal.ScheduleClient().GetHandle(ctx, tid).Trigger(ctx,
			client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}))
		var names []string
		require.Eventually(t, func() bool {
			des, err := os.ReadDir(snaps)
			if err != nil {
				return false
			}
			names = names[:0]
			for _, de := range des {
				names = append(names, de.Name())
			}
			return len(names) == 2 && names[0] == "by-hand" && names[1] != "scheduled-20200101T000000Z"
		}, time.Minute, 100*time.Millisecond, "a new snapshot, the expired one removed: %v", names)
		require.Regexp(t, `^scheduled-\d{8}T\d{6}Z$`, names[1])
		got, err := os.ReadFile(filepath.Join(snaps, names[1], "a.txt"))
		require.NoError(t, err)
		require.Equal(t, "first", string(got))
		// Its stub outlives the space's: deleted, its content collected
		// (the reference left by the user's deletion dropped first), the
		// snapshot's stub still recalls.
		require.NoError(t, os.Remove(filepath.Join(s.root, "spaces", "lab", "m.txt")))
		auditAndCollect(t, e, s)
		snapStub := "/.snapshots/lab/" + names[1] + "/m.txt"
		job = runJob(t, e, "south", "recall", []string{snapStub}, nil)
		require.Equal(t, "SUCCESS", job["state"], job)
		got, err = os.ReadFile(filepath.Join(s.root, filepath.FromSlash(snapStub)))
		require.NoError(t, err)
		require.Equal(t, "migrated", string(got))

		// Removing the schedule removes its Temporal Schedule.
		r = e.AsAdmin(http.MethodPatch, base, map[string]any{"snapshot_schedule": nil})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Nil(t, describeSchedule(t, e, tid))
		apitest.RecordHistories(t, e.Temporal)
	})
}

// auditAndCollect runs the site's references audit with --drop, as if
// every reference were old enough, then the collector with no grace,
// twice: what destroys the content nothing references any more.
func auditAndCollect(t *testing.T, e *apitest.Env, s *jobSite) {
	t.Helper()
	ctx := context.Background()
	root, err := site.NewRoot(s.root)
	require.NoError(t, err)
	d, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: s.targetDir})
	require.NoError(t, err)
	later := func() time.Time { return time.Now().Add(site.DefaultAuditMinAge + time.Hour) }
	_, err = site.AuditRefs(ctx, root, map[string]targets.Driver{s.name + "-fs": d}, site.AuditOptions{Now: later, Drop: true})
	require.NoError(t, err)
	for range 2 {
		_, err := site.Collect(ctx, d, site.CollectOptions{Grace: time.Nanosecond})
		require.NoError(t, err)
	}
}
