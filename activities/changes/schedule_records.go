package changes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// ScheduleInput is a schedule as a client writes it; nil fields keep
// their value (a create starts from the defaults).
type ScheduleInput struct {
	Name             *string         `json:"name"`
	Site             *string         `json:"site"`
	Space            *string         `json:"space"` // "" removes the space
	Enabled          *bool           `json:"enabled"`
	Minute           *string         `json:"minute"`
	Hour             *string         `json:"hour"`
	DayOfMonth       *string         `json:"day_of_month"`
	DayOfWeek        *string         `json:"day_of_week"`
	MonthOfYear      *string         `json:"month_of_year"`
	Discovery        *string         `json:"discovery"`
	DiscoveryOptions *map[string]any `json:"discovery_options"`
	ManagedPaths     *map[string]any `json:"managed_paths"`
}

// Discovery modes a schedule may use.
var scheduleDiscoveries = []string{"recursive", "snapdiff", "none"}

// SaveSchedule creates (id 0) or updates schedule id from in, and brings
// its Temporal Schedule in step (KindScheduleSync).
func (s *Service) SaveSchedule(ctx context.Context, id int64, in ScheduleInput) (*models.Schedule, error) {
	sch := &models.Schedule{Enabled: true, Cron: models.Cron{Minute: "0", Hour: "0", DayOfMonth: "*", DayOfWeek: "*", MonthOfYear: "*"},
		Discovery: "recursive", ManagedPaths: map[string]any{}, DiscoveryOptions: map[string]any{}}
	if id != 0 {
		var err error
		if sch, err = models.GetSchedule(ctx, s.DB, id); err != nil {
			return nil, err
		}
	}
	v := models.FieldErrors{}
	if id == 0 {
		v.Check(in.Name != nil, "name", "This field is required.")
		v.Check(in.Site != nil, "site", "This field is required.")
	}
	if in.Name != nil {
		sch.Name = strings.TrimSpace(*in.Name)
		v.Check(sch.Name != "", "name", "This field may not be blank.")
	}
	if in.Site != nil {
		site, err := models.GetSiteByName(ctx, s.DB, *in.Site)
		if errors.Is(err, models.ErrNotFound) {
			v.Add("site", fmt.Sprintf("Site %q does not exist.", *in.Site))
		} else if err != nil {
			return nil, err
		} else {
			sch.SiteID, sch.Site = site.ID, site
		}
	}
	if in.Space != nil {
		sch.SpaceID, sch.Space = nil, nil
		if *in.Space != "" {
			sp, err := models.GetSpaceByName(ctx, s.DB, *in.Space)
			if errors.Is(err, models.ErrNotFound) {
				v.Add("space", fmt.Sprintf("Space %q does not exist.", *in.Space))
			} else if err != nil {
				return nil, err
			} else {
				sch.SpaceID, sch.Space = &sp.ID, sp
			}
		}
	}
	setIf(&sch.Enabled, in.Enabled)
	setIf(&sch.Minute, in.Minute)
	setIf(&sch.Hour, in.Hour)
	setIf(&sch.DayOfMonth, in.DayOfMonth)
	setIf(&sch.DayOfWeek, in.DayOfWeek)
	setIf(&sch.MonthOfYear, in.MonthOfYear)
	CheckCron(v, "", sch.Cron)
	setIf(&sch.Discovery, in.Discovery)
	v.Check(slices.Contains(scheduleDiscoveries, sch.Discovery), "discovery", "Use "+strings.Join(scheduleDiscoveries, ", ")+".")
	if in.DiscoveryOptions != nil {
		sch.DiscoveryOptions = nonNil(*in.DiscoveryOptions)
	}
	if in.ManagedPaths != nil {
		sch.ManagedPaths = nonNil(*in.ManagedPaths)
	}
	CheckPaths(v, "managed_paths", slices.Sorted(maps.Keys(sch.ManagedPaths)))
	// Checked when the space or the managed paths change: an older
	// schedule without either can still be paused, mended or deleted.
	if (in.Space != nil || in.ManagedPaths != nil) && len(sch.Workflows) > 0 && !hasPaths(sch) {
		field := "managed_paths"
		if in.ManagedPaths == nil {
			field = "space"
		}
		v.Add(field, "A schedule with workflows needs a space or managed paths for its firings to run over.")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	if _, err := time.LoadLocation(siteTZ(sch.Site)); err != nil {
		return nil, models.Invalid("site", fmt.Sprintf("The site's timezone %q is unknown.", sch.Site.Timezone))
	}
	// Checked when the site or the space changes: a schedule whose space
	// left its site since can still be paused or deleted.
	if sch.SpaceID != nil && (in.Site != nil || in.Space != nil) {
		_, err := models.GetSpace(ctx, s.DB, *sch.SpaceID, models.SpaceFilter{SiteID: &sch.SiteID})
		if errors.Is(err, models.ErrNotFound) {
			return nil, models.Invalid("space", fmt.Sprintf("Space %q is not on site %s.", sch.Space.Name, sch.Site.Name))
		} else if err != nil {
			return nil, err
		}
	}
	var moved []*models.ScheduleWorkflow
	var err error
	if in.Site != nil {
		if moved, err = s.moveScheduleWorkflows(ctx, sch); err != nil {
			return nil, err
		}
	}
	err = s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := uniqueName(ctx, tx, (*models.Schedule)(nil), sch.ID, sch.Name, "A schedule with this name already exists."); err != nil {
			return err
		}
		if err := models.SaveSchedule(ctx, tx, sch); err != nil {
			return err
		}
		for _, w := range moved {
			if err := models.SaveScheduleWorkflow(ctx, tx, w); err != nil {
				return err
			}
		}
		return oweSync(ctx, tx, sch.ID, workflows.ScheduleTemporalID(sch.ID))
	})
	if err != nil {
		return nil, err
	}
	return models.GetSchedule(ctx, s.DB, sch.ID)
}

// moveScheduleWorkflows moves the workflows of sch that are not on its
// site (its site changed) there, each checked as SaveScheduleWorkflow
// checks it, on the new site; their firings would otherwise run on the
// old site, over the new site's paths.
func (s *Service) moveScheduleWorkflows(ctx context.Context, sch *models.Schedule) ([]*models.ScheduleWorkflow, error) {
	var moved []*models.ScheduleWorkflow
	v := models.FieldErrors{}
	for _, w := range sch.Workflows {
		if w.SiteID == sch.SiteID {
			continue
		}
		discovery := sch.Discovery
		j, err := NewJob(ctx, s.DB, JobRequest{Site: sch.Site.Name, Workflow: w.Workflow, Discovery: &discovery, Fields: w.Fields,
			Paths: []string{"/"}, Queue: &w.Queue, Owner: JobOwner{ScheduleID: &sch.ID, ScheduleName: sch.Name}})
		var bad models.FieldErrors
		if errors.As(err, &bad) {
			v.Add("site", fmt.Sprintf("Its workflow %d (%s) cannot run on site %s: %s", w.ID, w.Workflow, sch.Site.Name, bad.Messages()))
			continue
		} else if err != nil {
			return nil, err
		}
		w.SiteID, w.Site, w.Queue = sch.SiteID, sch.Site, j.Queue
		moved = append(moved, w)
	}
	return moved, v.Err()
}

// hasPaths tells whether schedule sch has paths for its firings to run
// over: its managed paths or, without any, its space's folder.
func hasPaths(sch *models.Schedule) bool {
	return len(sch.ManagedPaths) > 0 || sch.SpaceID != nil
}

// DeleteSchedule removes schedule id and its Temporal Schedule.
func (s *Service) DeleteSchedule(ctx context.Context, id int64) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := models.DeleteSchedule(ctx, tx, id); err != nil {
			return err
		}
		return oweSync(ctx, tx, id, workflows.ScheduleTemporalID(id))
	})
}

// RunSchedule fires schedule id now, once: a ScheduleWorkflow of its own
// (started exactly once through the outbox), whatever the schedule's
// state and whether an earlier firing still runs.
func (s *Service) RunSchedule(ctx context.Context, id int64) (*models.Schedule, error) {
	sch, err := models.GetSchedule(ctx, s.DB, id)
	if err != nil {
		return nil, err
	}
	st, err := NewStart(workflows.ScheduleTemporalID(id)+"-run-"+models.NewUUID(), workflows.ScheduleWorkflowName, workflows.Fire{ID: id, Now: true})
	if err != nil {
		return nil, err
	}
	return sch, s.Commit(ctx, func(ctx context.Context, tx *Tx) error { return tx.Owe(ctx, KindStart, id, st) })
}

// ScheduleWorkflowInput is a schedule workflow as a client writes it.
type ScheduleWorkflowInput struct {
	Workflow *string         `json:"workflow"`
	Site     *string         `json:"site"`
	Queue    *string         `json:"queue"`
	Fields   *map[string]any `json:"fields"`
}

// SaveScheduleWorkflow adds (id 0) or changes workflow id of schedule
// scheduleID. It is checked as its firing's job request is (the workflow
// enabled, its fields, queue and destinations), so a firing does not fail
// on what could have been refused here.
func (s *Service) SaveScheduleWorkflow(ctx context.Context, scheduleID, id int64, in ScheduleWorkflowInput) (*models.ScheduleWorkflow, error) {
	sch, err := models.GetSchedule(ctx, s.DB, scheduleID)
	if err != nil {
		return nil, err
	}
	w := &models.ScheduleWorkflow{ScheduleID: scheduleID, SiteID: sch.SiteID, Site: sch.Site}
	if id != 0 {
		if w, err = models.GetScheduleWorkflow(ctx, s.DB, scheduleID, id); err != nil {
			return nil, err
		}
	}
	v := models.FieldErrors{}
	if id == 0 {
		v.Check(in.Workflow != nil, "workflow", "This field is required.")
	}
	setIf(&w.Workflow, in.Workflow)
	if in.Site != nil && *in.Site != sch.Site.Name {
		v.Add("site", fmt.Sprintf("A schedule's workflows run on its site, %s.", sch.Site.Name))
	}
	if in.Fields != nil {
		w.Fields = nonNil(*in.Fields)
	}
	v.Check(hasPaths(sch), "non_field_errors",
		fmt.Sprintf("Schedule %s has neither a space nor managed paths for its firings to run over: give it one first.", sch.Name))
	if err := v.Err(); err != nil {
		return nil, err
	}
	discovery := sch.Discovery
	req := JobRequest{Site: sch.Site.Name, Workflow: w.Workflow, Discovery: &discovery, Fields: w.Fields,
		Paths: []string{"/"}, Queue: in.Queue, Owner: JobOwner{ScheduleID: &sch.ID, ScheduleName: sch.Name}}
	if in.Queue == nil && id != 0 {
		req.Queue = &w.Queue
	}
	j, err := NewJob(ctx, s.DB, req)
	if err != nil {
		return nil, err
	}
	w.Queue = j.Queue
	err = s.Commit(ctx, func(ctx context.Context, tx *Tx) error { return models.SaveScheduleWorkflow(ctx, tx, w) })
	if err != nil {
		return nil, err
	}
	return models.GetScheduleWorkflow(ctx, s.DB, scheduleID, w.ID)
}

// DeleteScheduleWorkflow removes workflow id of schedule scheduleID.
func (s *Service) DeleteScheduleWorkflow(ctx context.Context, scheduleID, id int64) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		return models.DeleteScheduleWorkflow(ctx, tx, scheduleID, id)
	})
}

// oweSync owes the sync of Temporal Schedule id (record refID).
func oweSync(ctx context.Context, tx *Tx, refID int64, id string) error {
	return tx.Owe(ctx, KindScheduleSync, refID, ScheduleSync{ID: id})
}

// OweScheduleSync owes the sync of Temporal Schedule id with its record
// refID (a space's snapshot schedule changed, say).
func (t *Tx) OweScheduleSync(ctx context.Context, refID int64, id string) error {
	return oweSync(ctx, t, refID, id)
}

// OweSyncAll owes the sync of every schedule's and policy's Temporal
// Schedule (after schedules_enabled or a feature flag changed).
func (s *Service) OweSyncAll(ctx context.Context, tx *Tx) error {
	ids, err := recurringIDs(ctx, tx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := oweSync(ctx, tx, 0, id); err != nil {
			return err
		}
	}
	return nil
}

// uniqueName refuses name when another record of model's table has it.
func uniqueName(ctx context.Context, tx *Tx, model any, id int64, name, msg string) error {
	n, err := tx.NewSelect().Model(model).Where("name = ? AND id <> ?", name, id).Count(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return models.Invalid("name", msg)
	}
	return nil
}

func setIf[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
