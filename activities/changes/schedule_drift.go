package changes

import (
	"time"

	"github.com/robfig/cron/v3"
)

// firesAt tells whether the upcoming firing times Temporal lists for a
// schedule are the times r's spec gives: each one a firing time of r,
// with none of r's between them. A spec edited by hand in the Web UI
// (the note, which the reconciler also compares, stays as the hub wrote
// it) lists other times, and the reconciler then writes the record's
// spec back. Times already past are ignored (the list may lag a firing).
func (r *recurring) firesAt(listed []time.Time, now time.Time) bool {
	var prev time.Time
	for _, t := range listed {
		if !t.After(now) {
			continue
		}
		from := prev
		if from.IsZero() {
			from = t.Add(-time.Second)
		}
		if next, ok := r.next(from); !ok || !next.Equal(t) {
			return false
		}
		prev = t
	}
	return true
}

// next is r's first firing time after t (ok false: r cannot say).
func (r *recurring) next(t time.Time) (time.Time, bool) {
	var best time.Time
	if r.Cron != "" {
		loc, err := time.LoadLocation(r.TimeZone)
		if err != nil {
			return best, false
		}
		if best = cronNext(r.Cron, t.In(loc)); best.IsZero() {
			return best, false
		}
	}
	if r.Every > 0 {
		// Temporal aligns intervals on the Unix epoch (no offset is set).
		n := t.Truncate(r.Every).Add(r.Every)
		if best.IsZero() || n.Before(best) {
			best = n
		}
	}
	return best, !best.IsZero()
}

// starBit marks a cron field written "*" in a parsed schedule.
const starBit = 1 << 63

// cronNext is the first time after t that line matches, by Temporal's
// rule: when both the day of month and the day of week are restricted, a
// day must match both (classic cron takes either).
func cronNext(line string, t time.Time) time.Time {
	s, err := cronParser.Parse(line)
	spec, ok := s.(*cron.SpecSchedule)
	if err != nil || !ok {
		return time.Time{}
	}
	if spec.Dom&starBit != 0 || spec.Dow&starBit != 0 {
		return spec.Next(t)
	}
	days := *spec
	days.Dow = ^uint64(0) // any weekday: the month days alone choose
	for range 5 * 366 {
		if t = days.Next(t); t.IsZero() || spec.Dow&(1<<uint(t.Weekday())) != 0 {
			return t
		}
	}
	return time.Time{}
}
