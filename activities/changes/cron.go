package changes

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	schedulepb "go.temporal.io/api/schedule/v1"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/service/worker/scheduler"

	"github.com/thehub/hub/models"
)

// cronParser reads one cron line as the schedules' fields make it;
// Temporal reads them with its own parser (temporalSpec): a line must
// pass both. Times are computed with Temporal's calendar only.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// CheckCron adds an error for each cron field of c that is not valid
// (named prefix+field): one robfig's parser or Temporal's refuses (such
// as "?", which robfig reads as "*" and Temporal refuses, so the
// Temporal Schedule could never be made). Each field is read on its own,
// so the error names the field at fault. Fields that are each valid but
// never fire together (day 30 of February) are refused on day_of_month.
func CheckCron(v models.FieldErrors, prefix string, c models.Cron) {
	fields := []struct {
		name, val string
		line      func(string) string
	}{
		{"minute", c.Minute, func(f string) string { return f + " * * * *" }},
		{"hour", c.Hour, func(f string) string { return "* " + f + " * * *" }},
		{"day_of_month", c.DayOfMonth, func(f string) string { return "* * " + f + " * *" }},
		{"month_of_year", c.MonthOfYear, func(f string) string { return "* * * " + f + " *" }},
		{"day_of_week", c.DayOfWeek, func(f string) string { return "* * * * " + f }},
	}
	valid := true
	for _, f := range fields {
		if strings.TrimSpace(f.val) == "" || strings.ContainsAny(f.val, " \t") {
			v.Add(prefix+f.name, "Enter one cron field (e.g. *, 5, 1-5, */15, MON-FRI).")
			valid = false
			continue
		}
		if _, err := cronParser.Parse(f.line(f.val)); err != nil {
			v.Add(prefix+f.name, "Not a valid cron field: "+err.Error()+".")
			valid = false
		} else if err := CheckTemporalCron(f.line(f.val)); err != nil {
			msg := "Not a valid cron field for Temporal's schedules: " + err.Error() + "."
			if strings.Contains(f.val, "?") {
				msg += " Use * for any value."
			}
			v.Add(prefix+f.name, msg)
			valid = false
		}
	}
	if !valid {
		return
	}
	if next, err := nextStart(c, "UTC", time.Now()); err == nil && next.IsZero() {
		v.Add(prefix+"day_of_month", fmt.Sprintf("Day %s never comes in month %s: the schedule would never fire.", c.DayOfMonth, c.MonthOfYear))
	}
}

// CheckTemporalCron refuses a cron line Temporal's scheduler refuses.
func CheckTemporalCron(line string) error {
	_, err := temporalSpec(line, "UTC")
	return err
}

// temporalSpec compiles cron line in timezone tz as Temporal's scheduler
// does when the hub writes it into a Temporal Schedule (recurring.spec).
func temporalSpec(line, tz string) (*scheduler.CompiledSpec, error) {
	return compileSpec(&schedulepb.ScheduleSpec{CronString: []string{line}, TimezoneName: tz})
}

// compileSpec compiles spec as Temporal's scheduler does.
func compileSpec(spec *schedulepb.ScheduleSpec) (*scheduler.CompiledSpec, error) {
	defaults := dynamicconfig.GetIntPropertyFn(0) // Temporal's own iteration limits
	return scheduler.NewSpecBuilder(defaults, defaults).NewCompiledSpec(spec)
}

// nextStart is the first time after t that c fires in timezone tz, by
// Temporal's rules (to the second); zero when it never fires.
func nextStart(c models.Cron, tz string, after time.Time) (time.Time, error) {
	spec, err := temporalSpec(c.Line(), tz)
	if err != nil {
		return time.Time{}, err
	}
	next, err := spec.GetNextTime("", after)
	return next.Nominal, err
}
