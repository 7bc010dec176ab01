package changes

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFiringsAroundDaylightSavingRunOnce: around daylight-saving changes
// Temporal's calendar fires a daily cron line twice in the repeated hour
// (America/New_York "30 1 * * *": 01:30 EDT and 01:30 EST on 2026-11-01)
// and at local times the line does not name (Europe/Paris "30 1 * * *":
// 02:30 CEST on 2026-10-25). Each firing has its own workflow ID and job
// keys, so each ran the jobs again (a reviewer's finding). clockWhy lets a
// wall-clock time run once, at its first, and a time the line does not
// name not at all; a firing Temporal's calendar does not list (a trigger
// or a backfill someone asked for) and an interval's firing always run.
func TestFiringsAroundDaylightSavingRunOnce(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, c := range []struct {
		tz, line string
		at       string
		skip     string // "" runs; else a part of why it does not
	}{
		{"America/New_York", "30 1 * * *", "2026-11-01T05:30:00Z", ""},                 // 01:30 EDT
		{"America/New_York", "30 1 * * *", "2026-11-01T06:30:00Z", "came twice"},       // 01:30 EST
		{"America/New_York", "30 1 * * *", "2026-11-02T06:30:00Z", ""},                 // the next day
		{"America/New_York", "30 1 * * *", "2026-11-01T06:00:00Z", ""},                 // triggered: not on the calendar
		{"America/New_York", "*/20 1 * * *", "2026-11-01T06:20:00Z", "came twice"},     // 01:20 EST
		{"Europe/Paris", "30 1 * * *", "2026-10-24T23:30:00Z", ""},                     // 01:30 CEST
		{"Europe/Paris", "30 1 * * *", "2026-10-25T00:30:00Z", "does not name"},        // 02:30 CEST
		{"Europe/Paris", "30 2 * * *", "2026-10-25T01:30:00Z", ""},                     // 02:30 CET, its only one
		{"Europe/Paris", "*/20 2 * * *", "2026-10-25T02:20:00Z", "does not name"},      // 03:20 CET
		{"Australia/Lord_Howe", "15 1 * * *", "2026-04-04T15:15:00Z", "does not name"}, // 01:45 +1030
		{"Australia/Lord_Howe", "15 1 * * *", "2026-04-04T14:15:00Z", ""},              // 01:15 +11
		{"UTC", "30 1 * * *", "2026-11-01T01:30:00Z", ""},                              // no daylight saving
		{"America/New_York", "30 1 * * *", "0001-01-01T00:00:00Z", ""},                 // a run asked for now
		{"America/New_York", "*/5 * * * *", "2026-11-01T06:05:00Z", ""},                // hour "*": by the clock
		{"America/Havana", "@daily", "2026-11-01T05:00:00Z", "came twice"},             // 00:00 CST, after 00:00 CDT
	} {
		var when time.Time
		if !strings.HasPrefix(c.at, "0001") {
			when = at(c.at)
		}
		why := (&recurring{Cron: c.line, TimeZone: c.tz}).clockWhy(when)
		if c.skip == "" {
			require.Empty(t, why, "%s %q at %s", c.tz, c.line, c.at)
		} else {
			require.Contains(t, why, c.skip, "%s %q at %s", c.tz, c.line, c.at)
		}
	}
	// A policy with triggers fires on its interval too: those run.
	p := &recurring{Cron: "30 1 * * *", TimeZone: "Europe/Paris", Every: triggerCheckEvery}
	require.Empty(t, p.clockWhy(at("2026-10-25T00:30:00Z")), "02:30 CEST is also on the 10-minute interval")

	// Over a whole year in zones with changes, the firings that run name
	// each wall-clock time the line names at most once, and only those.
	for _, tz := range []string{"America/New_York", "Europe/Paris", "Australia/Lord_Howe"} {
		loc, err := time.LoadLocation(tz)
		require.NoError(t, err)
		for _, line := range []string{"30 1 * * *", "30 2 * * *", "0 1 * * *", "*/20 1-3 * * *", "30 * * * *"} {
			r := &recurring{Cron: line, TimeZone: tz}
			spec, err := r.compiled()
			require.NoError(t, err)
			utc, err := temporalSpec(line, "UTC")
			require.NoError(t, err)
			seen := map[string]bool{}
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			for from.Year() == 2026 {
				next, err := spec.GetNextTime("", from)
				require.NoError(t, err)
				from = next.Nominal
				if r.clockWhy(from) != "" {
					continue
				}
				l := from.In(loc)
				wall := l.Format(time.DateTime)
				// A line whose hour field is "*" runs by the clock through
				// the repeated hour, as cron runs it.
				require.False(t, seen[wall] && namesHours(line), "%s %q: %s ran twice", tz, line, wall)
				seen[wall] = true
				w := time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
				require.True(t, lists(utc, w), "%s %q: ran at %s, which it does not name", tz, line, l)
			}
		}
	}
}
