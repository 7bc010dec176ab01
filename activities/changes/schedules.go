package changes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// Every recurring record (a schedule, a policy, a space's snapshot
// schedule) is one Temporal Schedule named after it ("schedule-<id>",
// "policy-<id>", "snapshot-<space id>"). The record is the
// truth: a write owes KindScheduleSync, whose delivery makes the Temporal
// Schedule what the record wants now (created, updated, paused, deleted),
// and the reconciling pass (ReconcileSchedules, every minute from the
// outbox workflow) does the same for any schedule that drifted: one
// deleted or paused by hand in the Web UI, a write whose delivery was
// lost. docs/schedules-policies.md has the reasoning.

// KindScheduleSync brings a Temporal Schedule in step with its record
// (payload ScheduleSync).
const KindScheduleSync = "schedule.sync"

// ScheduleSync is the payload of KindScheduleSync: the ID of the Temporal
// Schedule to bring in step with its record.
type ScheduleSync struct{ ID string }

// scheduleCatchup is how late a firing missed while Temporal was away may
// still run; older ones are dropped (and overlap policy skip keeps it to
// one).
const scheduleCatchup = time.Hour

// triggerCheckEvery is how often a policy with triggers measures its
// pools (besides its own schedule's times, if it has one).
const triggerCheckEvery = 10 * time.Minute

// recurring is what a record wants of its Temporal Schedule.
type recurring struct {
	Cron     string        `json:"cron,omitempty"`
	Every    time.Duration `json:"every,omitempty"`
	TimeZone string        `json:"tz"`
	Workflow string        `json:"workflow"`
	ActionID string        `json:"action_id"`
	Input    any           `json:"input"` // workflows.Fire, or ScanFileIndexInput
	Paused   bool          `json:"paused"`
	Once     bool          `json:"once,omitempty"`
	Why      string        `json:"-"` // why it is paused, for the note
}

// hash names this state in the schedule's note, so the reconciler sees at
// a glance whether a schedule is what its record wants.
func (r *recurring) hash() string {
	b, _ := json.Marshal(r)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}

func (r *recurring) note() string {
	n := "hub " + r.hash()
	if r.Why != "" {
		n += ": " + r.Why
	}
	return n
}

// upToDate tells whether a Temporal Schedule with note and paused state
// is what r wants.
func (r *recurring) upToDate(note string, paused bool) bool {
	return (note == "hub "+r.hash() || strings.HasPrefix(note, "hub "+r.hash()+":")) && paused == r.Paused
}

func (r *recurring) spec() client.ScheduleSpec {
	sp := client.ScheduleSpec{TimeZoneName: r.TimeZone}
	if r.Cron != "" {
		sp.CronExpressions = []string{r.Cron}
	}
	if r.Every > 0 {
		sp.Intervals = []client.ScheduleIntervalSpec{{Every: r.Every}}
	}
	return sp
}

func (r *recurring) action() *client.ScheduleWorkflowAction {
	return &client.ScheduleWorkflowAction{ID: r.ActionID, Workflow: r.Workflow, Args: []any{r.Input},
		TaskQueue: workflows.HubTaskQueue}
}

// pausedBecause fills the pause state from the record's enabled flag and
// the hub's schedules_enabled.
func (r *recurring) pausedBecause(enabled bool, conf models.Configuration) {
	switch {
	case !conf.SchedulesEnabled:
		r.Paused, r.Why = true, "schedules are disabled in the hub's configuration (schedules_enabled)"
	case !enabled:
		r.Paused, r.Why = true, "disabled on its record (enabled: false)"
	}
}

// PausedWhy says why a firing of Temporal Schedule id that began before
// a change should start nothing now ("" when it may): its record or the
// hub paused it (Temporal's pause stops later firings, not one waiting
// for a worker), or it is no longer scheduled at all.
func (s *Service) PausedWhy(ctx context.Context, id string) (string, error) {
	r, err := s.wanted(ctx, id)
	switch {
	case err != nil:
		return "", err
	case r == nil:
		return "it is no longer scheduled", nil
	case r.Paused:
		return r.Why, nil
	}
	return "", nil
}

// ClockWhy says why the firing of Temporal Schedule id scheduled for at
// (its nominal time) should start nothing because of a daylight-saving
// change ("" when it may): the local wall-clock time came twice and it is
// the second, or the record's cron does not name it (recurring.clockWhy).
// A zero at (a run asked for now) always may.
func (s *Service) ClockWhy(ctx context.Context, id string, at time.Time, key string) (string, error) {
	if at.IsZero() {
		return "", nil
	}
	r, err := s.wanted(ctx, id)
	if r == nil || err != nil {
		return "", err
	}
	why := r.clockWhy(at)
	if twin := r.twinFiring(at); why != "" && !twin.IsZero() {
		// The repeat runs when the first of the two started nothing (the
		// hub was down then, its firing past the catch-up window; a
		// record paused then; an overlap skipped): a reviewer's finding,
		// the day's run was lost. Temporal names a firing's workflow by
		// its time; a key of another shape is taken as started.
		stamp := at.UTC().Format(time.RFC3339)
		if first, ok := strings.CutSuffix(key, stamp); ok {
			started, err := models.FiringStarted(ctx, s.DB, first+twin.UTC().Format(time.RFC3339))
			if err != nil || !started {
				return "", err
			}
		}
	}
	return why, nil
}

// wanted is what Temporal Schedule id should be now; nil: there should be
// none (no record, or a policy with nothing to run it).
func (s *Service) wanted(ctx context.Context, id string) (*recurring, error) {
	kind, num, ok := strings.Cut(id, "-")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil {
		return nil, nil
	}
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "schedule":
		sch, err := models.GetSchedule(ctx, s.DB, n)
		if errors.Is(err, models.ErrNotFound) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		r := &recurring{Cron: sch.Cron.Line(), TimeZone: siteTZ(sch.Site), Workflow: workflows.ScheduleWorkflowName,
			ActionID: id + "-fire", Input: workflows.Fire{ID: sch.ID}}
		r.pausedBecause(sch.Enabled, conf)
		return r, nil
	case "policy":
		p, err := models.GetPolicy(ctx, s.DB, n)
		if errors.Is(err, models.ErrNotFound) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		r := &recurring{TimeZone: PolicyTimezone(p), Workflow: workflows.PolicyWorkflowName,
			ActionID: id + "-run", Input: workflows.Fire{ID: p.ID}}
		if p.Schedule == nil && len(p.Triggers) == 0 {
			return nil, nil // runs only when asked (POST /policies/{id}/run/)
		}
		if p.Schedule != nil {
			r.Cron = PolicyCron(p.Schedule).Line()
			r.Once = p.Schedule.FirstOccur && len(p.Triggers) == 0
		}
		if len(p.Triggers) > 0 {
			// Triggers are checked on a schedule of their own, beside
			// the policy's: every firing measures them first.
			r.Every = triggerCheckEvery
		}
		r.pausedBecause(p.Enabled, conf)
		if f, err := models.GetFeature(ctx, s.DB, FeaturePolicies); err == nil && !f.Enabled && !r.Paused {
			r.Paused, r.Why = true, "the policies feature is disabled"
		}
		return r, nil
	case "indexscan":
		if conf.FileIndexScanSchedule == "" {
			return nil, nil
		}
		site, err := models.GetSite(ctx, s.DB, n)
		if errors.Is(err, models.ErrNotFound) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		// Firings are named after the scan (file-index-scan-<site>-<time>);
		// the site runs one scan at a time.
		r := &recurring{Cron: conf.FileIndexScanSchedule, TimeZone: siteTZ(site), Workflow: workflows.ScanFileIndexWorkflowName,
			ActionID: workflows.ScanFileIndexWorkflowID(site.Name), Input: workflows.ScanFileIndexInput{Site: site.Name}}
		r.pausedBecause(true, conf)
		return r, nil
	case "snapshot":
		sp, err := models.GetSpace(ctx, s.DB, n, models.SpaceFilter{})
		if errors.Is(err, models.ErrNotFound) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		ss := sp.SnapshotSchedule
		if ss == nil || ss.Frequency == "" {
			return nil, nil
		}
		line, err := SnapshotCron(ss.Frequency, ss.Time)
		if err != nil {
			return nil, nil // refused when written; nothing sensible to run
		}
		r := &recurring{Cron: line, TimeZone: "UTC", Workflow: workflows.SnapshotWorkflowName,
			ActionID: id + "-take", Input: workflows.Fire{ID: sp.ID}}
		r.pausedBecause(true, conf)
		return r, nil
	}
	return nil, nil
}

// Snapshot frequencies, and the cron line each makes of a time of day.
var snapshotFrequencies = map[string]string{
	"hourly": "%[2]d * * * *", "daily": "%[2]d %[1]d * * *", "weekly": "%[2]d %[1]d * * 0", "monthly": "%[2]d %[1]d 1 * *",
}

// SnapshotCron is the cron line (UTC) of a space's snapshot schedule:
// frequency hourly (at the minute of at), daily, weekly (Sundays) or
// monthly (the 1st) at time of day at ("HH:MM" or "HH:MM:SS"), or a cron
// line of five fields itself.
func SnapshotCron(frequency, at string) (string, error) {
	f := strings.ToLower(strings.TrimSpace(frequency))
	if layout, ok := snapshotFrequencies[f]; ok {
		t, err := time.Parse("15:04", at)
		if err != nil {
			t, err = time.Parse("15:04:05", at)
		}
		if err != nil {
			return "", fmt.Errorf("time %q is not HH:MM", at)
		}
		return fmt.Sprintf(layout, t.Hour(), t.Minute()), nil
	}
	if _, err := cronParser.Parse(frequency); err != nil {
		return "", fmt.Errorf("use hourly, daily, weekly, monthly or a cron line of five fields (%v)", err)
	}
	if err := CheckTemporalCron(frequency); err != nil {
		return "", fmt.Errorf("a cron line Temporal's schedules refuse (%v): use * for any value", err)
	}
	return frequency, nil
}

func siteTZ(s *models.Site) string {
	if s == nil || s.Timezone == "" {
		return "UTC"
	}
	return s.Timezone
}

// PolicyCron is the cron line of a policy's schedule: its time of day
// "HH:MM", when set, gives the hour and minute.
func PolicyCron(ps *models.PolicySchedule) models.Cron {
	c := ps.Cron
	if h, m, ok := strings.Cut(ps.Time, ":"); ok {
		c.Hour, c.Minute = strings.TrimLeft(h, "0"), strings.TrimLeft(strings.SplitN(m, ":", 2)[0], "0")
		if c.Hour == "" {
			c.Hour = "0"
		}
		if c.Minute == "" {
			c.Minute = "0"
		}
	}
	for _, f := range []*string{&c.Minute, &c.Hour, &c.DayOfMonth, &c.DayOfWeek, &c.MonthOfYear} {
		if *f == "" {
			*f = "*"
		}
	}
	return c
}

// SyncSchedule makes Temporal Schedule id what its record wants now. It
// is idempotent: delivered twice, or raced by the reconciler, the outcome
// is the same.
func (s *Service) SyncSchedule(ctx context.Context, id string) error {
	want, err := s.wanted(ctx, id)
	if err != nil {
		return err
	}
	sc := s.Temporal.ScheduleClient()
	h := sc.GetHandle(ctx, id)
	desc, err := h.Describe(ctx)
	var nf *serviceerror.NotFound
	missing := errors.As(err, &nf)
	if err != nil && !missing {
		return err
	}
	switch {
	case want == nil && missing:
		return nil
	case want == nil:
		if err := h.Delete(ctx); err != nil && !errors.As(err, &nf) {
			return err
		}
		return nil
	case missing:
		opts := client.ScheduleOptions{ID: id, Spec: want.spec(), Action: want.action(),
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: scheduleCatchup,
			Paused: want.Paused, Note: want.note()}
		if want.Once {
			opts.RemainingActions = 1
		}
		_, err := sc.Create(ctx, opts)
		return err
	case want.upToDate(desc.Schedule.State.Note, desc.Schedule.State.Paused) && want.firesAt(desc.Info.NextActionTimes, time.Now()):
		return nil
	}
	return h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		sch := in.Description.Schedule
		spec := want.spec()
		sch.Spec = &spec
		sch.Action = want.action()
		if sch.Policy == nil {
			sch.Policy = &client.SchedulePolicies{}
		}
		sch.Policy.Overlap, sch.Policy.CatchupWindow = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, scheduleCatchup
		if sch.State == nil {
			sch.State = &client.ScheduleState{}
		}
		sch.State.Paused, sch.State.Note = want.Paused, want.note()
		// A one-shot policy that fired stays spent through pauses and
		// other updates (re-armed, it ran again at its next time after a
		// mere pause and resume); one that was not one-shot is armed.
		spent := sch.State.LimitedActions && sch.State.RemainingActions == 0
		sch.State.LimitedActions, sch.State.RemainingActions = want.Once, 0
		if want.Once && !spent {
			sch.State.RemainingActions = 1
		}
		return &client.ScheduleUpdate{Schedule: &sch}, nil
	}})
}

// recurringIDs lists the Temporal Schedule IDs the records want.
func recurringIDs(ctx context.Context, db bun.IDB) ([]string, error) {
	var ids []string
	sch, err := models.ScheduleIDs(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, id := range sch {
		ids = append(ids, workflows.ScheduleTemporalID(id))
	}
	pol, err := models.PolicyIDs(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, id := range pol {
		ids = append(ids, workflows.PolicyTemporalID(id))
	}
	snaps, err := models.SnapshotScheduleSpaceIDs(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, id := range snaps {
		ids = append(ids, workflows.SnapshotTemporalID(id))
	}
	// Every site's index scan, wanted or not: a schedule emptied in the
	// configuration must remove them.
	sites, err := models.SiteIDs(ctx, db)
	if err != nil {
		return nil, err
	}
	for _, id := range sites {
		ids = append(ids, workflows.IndexScanTemporalID(id))
	}
	return ids, nil
}

// ours tells whether a Temporal Schedule ID is one of the records'.
func ours(id string) bool {
	kind, num, ok := strings.Cut(id, "-")
	_, err := strconv.ParseInt(num, 10, 64)
	return ok && err == nil && (kind == "schedule" || kind == "policy" || kind == "snapshot" || kind == "indexscan")
}

// ReconcileSchedules brings every Temporal Schedule of a record in step
// with it, creates those missing (deleted by hand, or never delivered) and
// deletes those whose record is gone. It returns how many it changed.
func (s *Service) ReconcileSchedules(ctx context.Context) (int, error) {
	type seen struct {
		note   string
		paused bool
		next   []time.Time
	}
	listed := map[string]seen{}
	it, err := s.Temporal.ScheduleClient().List(ctx, client.ScheduleListOptions{PageSize: 1000})
	if err != nil {
		return 0, err
	}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return 0, err
		}
		if ours(e.ID) {
			listed[e.ID] = seen{e.Note, e.Paused, e.NextActionTimes}
		}
	}
	ids, err := recurringIDs(ctx, s.DB)
	if err != nil {
		return 0, err
	}
	wantIDs := map[string]bool{}
	for _, id := range ids {
		wantIDs[id] = true
	}
	for id := range listed {
		if !wantIDs[id] {
			ids = append(ids, id)
		}
	}
	changed := 0
	var errs []error
	now := time.Now()
	for _, id := range ids {
		if wantIDs[id] {
			want, err := s.wanted(ctx, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			l, ok := listed[id]
			if (want == nil && !ok) || (want != nil && ok && want.upToDate(l.note, l.paused) && want.firesAt(l.next, now)) {
				continue
			}
		}
		if err := s.SyncSchedule(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		changed++
		if s.Progress != nil {
			s.Progress(changed)
		}
	}
	return changed, errors.Join(errs...)
}

func deliverScheduleSync(ctx context.Context, s *Service, in *models.Intent) error {
	var p ScheduleSync
	if err := decode(in, &p); err != nil {
		return err
	}
	return s.SyncSchedule(ctx, p.ID)
}
