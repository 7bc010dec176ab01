package changes

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	schedulepb "go.temporal.io/api/schedule/v1"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/service/worker/scheduler"
	"google.golang.org/protobuf/types/known/durationpb"
)

// temporalTimes lists the n next firing times Temporal's calendar gives r
// after from (what a Temporal Schedule's NextActionTimes lists), compiled
// here as Temporal's scheduler compiles the spec the hub writes.
func temporalTimes(t *testing.T, r *recurring, from time.Time, n int) []time.Time {
	t.Helper()
	sp := &schedulepb.ScheduleSpec{CronString: []string{r.Cron}, TimezoneName: r.TimeZone}
	if r.Every > 0 {
		sp.Interval = []*schedulepb.IntervalSpec{{Interval: durationpb.New(r.Every)}}
	}
	limits := dynamicconfig.GetIntPropertyFn(0)
	spec, err := scheduler.NewSpecBuilder(limits, limits).NewCompiledSpec(sp)
	require.NoError(t, err)
	var out []time.Time
	for range n {
		next, err := spec.GetNextTime("", from)
		require.NoError(t, err)
		out = append(out, next.Next)
		from = next.Next
	}
	return out
}

// TestDriftCheckAgreesWithTemporalAroundDaylightSaving: the drift check
// (firesAt) must find the times Temporal lists for a record's own spec to
// be the record's, also over daylight-saving changes. A reviewer found it
// computed the times with robfig/cron, which names other times there
// (Europe/Paris "30 1 * * *" from 2026-10-24: Temporal lists 02:30 CEST on
// the 25th, robfig 01:30 CET on the 26th), so ReconcileSchedules rewrote
// the Temporal Schedule every minute for the days the change was among
// the listed times. A time Temporal would not list is still drift.
func TestDriftCheckAgreesWithTemporalAroundDaylightSaving(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"America/New_York", "Europe/Paris", "Australia/Lord_Howe", "Australia/Sydney"} {
		loc, err := time.LoadLocation(tz)
		require.NoError(t, err)
		for _, line := range []string{"30 2 * * *", "30 1 * * *", "30 * * * *", "0 0 * * *", "*/20 1-3 * * *", "15 1 1-7 * SUN"} {
			for _, every := range []time.Duration{0, triggerCheckEvery} {
				r := &recurring{Cron: line, TimeZone: tz, Every: every}
				// Each day of 2026 whose next times hold a change.
				for day := time.Date(2026, 1, 1, 12, 0, 0, 0, loc); day.Year() == 2026; day = day.AddDate(0, 0, 1) {
					if _, off := day.Zone(); func() bool { _, o := day.AddDate(0, 0, 10).Zone(); return o == off }() {
						continue
					}
					listed := temporalTimes(t, r, day, 10)
					require.True(t, r.firesAt(listed, day), "%s %q every %s from %s: Temporal lists %v",
						tz, line, every, day.Format(time.DateOnly), listed)
				}
			}
		}
	}
	// Drift is still drift: a time the record's calendar does not list.
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	r := &recurring{Cron: "30 1 * * *", TimeZone: "Europe/Paris"}
	day := time.Date(2026, 10, 24, 12, 0, 0, 0, paris)
	listed := temporalTimes(t, r, day, 4)
	require.False(t, r.firesAt(append([]time.Time{listed[0].Add(time.Hour)}, listed[1:]...), day))
	require.False(t, r.firesAt([]time.Time{listed[0], listed[2]}, day), "a listed time left out")
	require.False(t, (&recurring{Cron: "30 2 * * *", TimeZone: "Europe/Paris"}).firesAt(listed, day))
}
