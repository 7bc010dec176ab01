package changes

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	schedulepb "go.temporal.io/api/schedule/v1"
	"go.temporal.io/server/service/worker/scheduler"
	"google.golang.org/protobuf/types/known/durationpb"
)

// compiled is r's spec (recurring.spec) as Temporal's scheduler compiles
// it: the drift check and the firings' daylight-saving check read r's
// times with Temporal's own calendar, so they agree with the times
// Temporal lists and fires, also around daylight-saving changes (where
// another cron library, robfig's, names other times).
func (r *recurring) compiled() (*scheduler.CompiledSpec, error) {
	sp := &schedulepb.ScheduleSpec{TimezoneName: r.TimeZone}
	if r.Cron != "" {
		sp.CronString = []string{r.Cron}
	}
	if r.Every > 0 {
		sp.Interval = []*schedulepb.IntervalSpec{{Interval: durationpb.New(r.Every)}}
	}
	return compileSpec(sp)
}

// firesAt tells whether the upcoming firing times Temporal lists for a
// schedule are the times r's spec gives: each one a firing time of r,
// with none of r's between them. A spec edited by hand in the Web UI
// (the note, which the reconciler also compares, stays as the hub wrote
// it) lists other times, and the reconciler then writes the record's
// spec back. Times already past are ignored (the list may lag a firing).
// Temporal lists each time as the next after the one before it (the
// first, after the last time its scheduler processed), and around a
// daylight-saving change its next time depends on where it steps from,
// so the check steps as Temporal does (onCalendar for the first).
func (r *recurring) firesAt(listed []time.Time, now time.Time) bool {
	spec, err := r.compiled()
	if err != nil {
		return false
	}
	var prev time.Time
	for _, t := range listed {
		if !t.After(now) {
			continue
		}
		if prev.IsZero() {
			if !onCalendar(spec, t, now) {
				return false
			}
		} else if next, err := spec.GetNextTime("", prev); err != nil || !next.Next.Equal(t) {
			return false
		}
		prev = t
	}
	return true
}

// onCalendar tells whether Temporal's scheduler, stepping through spec's
// times each from the one before, fires at t: stepping from a day
// before t, from just before t, or from also (when not zero: a time
// Temporal may have stepped from, now for the times it lists).
func onCalendar(spec *scheduler.CompiledSpec, t, also time.Time) bool {
	next := func(from time.Time) time.Time {
		n, err := spec.GetNextTime("", from)
		if err != nil {
			return time.Time{}
		}
		return n.Next
	}
	if next(t.Add(-time.Second)).Equal(t) || (!also.IsZero() && also.Before(t) && next(also).Equal(t)) {
		return true
	}
	for n := next(t.Add(-26 * time.Hour)); !n.IsZero() && !n.After(t); n = next(n) {
		if n.Equal(t) {
			return true
		}
	}
	return false
}

// lists tells whether spec fires at t (onCalendar).
func lists(spec *scheduler.CompiledSpec, t time.Time) bool { return onCalendar(spec, t, time.Time{}) }

// clockWhy says why r's firing scheduled for at starts nothing ("" when
// it runs): around a daylight-saving change Temporal's calendar fires a
// cron line at a local wall-clock time the line does not name (Paris,
// "30 1 * * *": 02:30 CEST on the autumn change's day, besides 01:30
// CEST), or twice at a time of the repeated hour (New York, "30 1 * * *":
// 01:30 EDT and 01:30 EST). As cron does, a time of the repeated hour
// runs once, at its first, and a time the line does not name not at all.
// A firing at a time r's calendar does not list (a trigger or a backfill
// asked of Temporal, or a spec edited by hand) runs: someone asked for
// it. So does a firing of r's interval (intervals count real time).
func (r *recurring) clockWhy(at time.Time) string {
	if r.Cron == "" || at.IsZero() {
		return ""
	}
	spec, err := r.compiled()
	if err != nil || !lists(spec, at) {
		return ""
	}
	if r.Every >= time.Second && at.Unix()%int64(r.Every/time.Second) == 0 && at.Nanosecond() == 0 {
		return "" // the interval names it (Temporal aligns it on the epoch)
	}
	loc, err := time.LoadLocation(r.TimeZone)
	if err != nil {
		return ""
	}
	local := at.In(loc)
	// The wall-clock time, read as UTC (no daylight saving): does the
	// line name it?
	wall := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), 0, time.UTC)
	utc, err := temporalSpec(r.Cron, "UTC")
	if err != nil {
		return ""
	}
	if !lists(utc, wall) {
		return fmt.Sprintf("not fired: Temporal's calendar fires at %s, %s in %s, a time cron %q does not name (a daylight-saving change)",
			at.UTC().Format(time.RFC3339), local.Format("2006-01-02 15:04 MST"), r.TimeZone, r.Cron)
	}
	if twin := r.repeatedTwin(spec, local); !twin.IsZero() {
		return fmt.Sprintf("not fired: %s came twice in %s (daylight saving ended); it fired at the first, %s (%s)",
			local.Format("2006-01-02 15:04"), r.TimeZone, twin.Format("15:04 MST"), twin.UTC().Format(time.RFC3339))
	}
	return ""
}

// repeatedTwin is the earlier firing of r's calendar at local's
// wall-clock time, when local is in the hour a daylight-saving change
// repeated and r's cron line names its hours; zero otherwise. A line
// whose hour field is "*" runs by the clock through the repeated hour,
// as cron runs it (a reviewer's finding: "*/5 * * * *" ran nothing for
// an hour).
func (r *recurring) repeatedTwin(spec *scheduler.CompiledSpec, local time.Time) time.Time {
	if !namesHours(r.Cron) {
		return time.Time{}
	}
	if twin := earlierTwin(local); !twin.IsZero() && lists(spec, twin) {
		return twin
	}
	return time.Time{}
}

// namesHours tells whether cron line line fires in some hours of the day
// only (an hour field other than "*", "@daily" too): read by the parser
// the hub checks lines with, which knows the shorthands (a reviewer's
// finding: "@daily" was taken for a line of every hour).
func namesHours(line string) bool {
	sched, err := cron.ParseStandard(line)
	spec, ok := sched.(*cron.SpecSchedule)
	const every = 1<<24 - 1
	return err == nil && ok && spec.Hour&every != every
}

// twinFiring is the time of the earlier firing of r that its firing at
// at repeats (repeatedTwin); zero when at repeats none.
func (r *recurring) twinFiring(at time.Time) time.Time {
	spec, err := r.compiled()
	loc, lerr := time.LoadLocation(r.TimeZone)
	if err != nil || lerr != nil || r.Cron == "" {
		return time.Time{}
	}
	return r.repeatedTwin(spec, at.In(loc))
}

// earlierTwin is the earlier instant that shows t's wall-clock time when
// t is in the hour a daylight-saving change repeated (the clocks went
// back); zero otherwise.
func earlierTwin(t time.Time) time.Time {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return time.Time{}
	}
	_, before := start.Add(-time.Second).Zone()
	_, now := t.Zone()
	back := time.Duration(before-now) * time.Second
	if back <= 0 {
		return time.Time{}
	}
	u := t.Add(-back)
	if !u.Before(start) || u.Format(time.DateTime) != t.Format(time.DateTime) {
		return time.Time{}
	}
	return u
}
