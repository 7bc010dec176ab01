package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Schedule runs its workflows over its managed paths of a site at the
// times its cron fields name, in the site's timezone. Each schedule is one
// Temporal Schedule (see activities/changes/schedules.go).
type Schedule struct {
	bun.BaseModel `bun:"table:schedules,alias:sch"`

	ID               int64          `bun:"id,pk,autoincrement"`
	Name             string         `bun:"name"`
	SiteID           int64          `bun:"site_id"`
	Site             *Site          `bun:"rel:belongs-to,join:site_id=id"`
	SpaceID          *int64         `bun:"space_id"`
	Space            *Space         `bun:"rel:belongs-to,join:space_id=id"`
	Enabled          bool           `bun:"enabled"`
	Cron                            // minute, hour, day_of_month, day_of_week, month_of_year
	Discovery        string         `bun:"discovery"`
	DiscoveryOptions map[string]any `bun:"discovery_options,type:jsonb"`
	// ManagedPaths maps each managed path (absolute inside the site root)
	// to its options (an object, kept as given).
	ManagedPaths map[string]any      `bun:"managed_paths,type:jsonb"`
	Workflows    []*ScheduleWorkflow `bun:"rel:has-many,join:id=schedule_id"`
	CreatedAt    time.Time           `bun:"created_at"`
	UpdatedAt    time.Time           `bun:"updated_at"`
}

// Cron is the five fields of a cron line, as the API names them.
type Cron struct {
	Minute      string `bun:"minute" json:"minute"`
	Hour        string `bun:"hour" json:"hour"`
	DayOfMonth  string `bun:"day_of_month" json:"day_of_month"`
	DayOfWeek   string `bun:"day_of_week" json:"day_of_week"`
	MonthOfYear string `bun:"month_of_year" json:"month_of_year"`
}

// Line is the cron line "minute hour day-of-month month day-of-week".
func (c Cron) Line() string {
	return c.Minute + " " + c.Hour + " " + c.DayOfMonth + " " + c.MonthOfYear + " " + c.DayOfWeek
}

// ScheduleWorkflow is one job a schedule's firing starts: its workflow on
// a queue of the schedule's site, with its runtime fields.
type ScheduleWorkflow struct {
	bun.BaseModel `bun:"table:schedule_workflows,alias:sw"`

	ID         int64          `bun:"id,pk,autoincrement"`
	ScheduleID int64          `bun:"schedule_id"`
	Workflow   string         `bun:"workflow"`
	SiteID     int64          `bun:"site_id"`
	Site       *Site          `bun:"rel:belongs-to,join:site_id=id"`
	Queue      string         `bun:"queue"`
	Fields     map[string]any `bun:"fields,type:jsonb"`
}

// SchedulesQuery selects schedules with their site and space, by id,
// narrowed to a site or a space when given.
func SchedulesQuery(db bun.IDB, dest any, siteID, spaceID *int64) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).Relation("Site").Relation("Space").Order("sch.id")
	if siteID != nil {
		q.Where("sch.site_id = ?", *siteID)
	}
	if spaceID != nil {
		q.Where("sch.space_id = ?", *spaceID)
	}
	return q
}

// GetSchedule loads a schedule with its site, space and workflows.
func GetSchedule(ctx context.Context, db bun.IDB, id int64) (*Schedule, error) {
	s := new(Schedule)
	err := db.NewSelect().Model(s).Relation("Site").Relation("Space").
		Relation("Workflows", func(q *bun.SelectQuery) *bun.SelectQuery { return q.Order("sw.id") }).
		Relation("Workflows.Site").Where("sch.id = ?", id).Scan(ctx)
	return s, dbErr(err)
}

// ScheduleIDs lists the ids of every schedule.
func ScheduleIDs(ctx context.Context, db bun.IDB) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().Model((*Schedule)(nil)).Column("id").Order("id").Scan(ctx, &ids)
	return ids, dbErr(err)
}

// SaveSchedule inserts or updates s.
func SaveSchedule(ctx context.Context, db bun.IDB, s *Schedule) error {
	s.UpdatedAt = time.Now().UTC()
	if s.ID == 0 {
		s.CreatedAt = s.UpdatedAt
		_, err := db.NewInsert().Model(s).Exec(ctx)
		return dbErr(err)
	}
	_, err := db.NewUpdate().Model(s).WherePK().ExcludeColumn("created_at").Exec(ctx)
	return dbErr(err)
}

// DeleteSchedule removes a schedule and its workflows.
func DeleteSchedule(ctx context.Context, db bun.IDB, id int64) error {
	if _, err := db.NewDelete().Model((*ScheduleWorkflow)(nil)).Where("schedule_id = ?", id).Exec(ctx); err != nil {
		return dbErr(err)
	}
	res, err := db.NewDelete().Model((*Schedule)(nil)).Where("id = ?", id).Exec(ctx)
	return deleted(res, err)
}

// ScheduleWorkflowsQuery selects the workflows of schedule id.
func ScheduleWorkflowsQuery(db bun.IDB, dest any, scheduleID int64) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Relation("Site").Where("sw.schedule_id = ?", scheduleID).Order("sw.id")
}

// GetScheduleWorkflow loads workflow id of schedule scheduleID.
func GetScheduleWorkflow(ctx context.Context, db bun.IDB, scheduleID, id int64) (*ScheduleWorkflow, error) {
	w := new(ScheduleWorkflow)
	err := db.NewSelect().Model(w).Relation("Site").Where("sw.id = ? AND sw.schedule_id = ?", id, scheduleID).Scan(ctx)
	return w, dbErr(err)
}

// SaveScheduleWorkflow inserts or updates w.
func SaveScheduleWorkflow(ctx context.Context, db bun.IDB, w *ScheduleWorkflow) error {
	if w.ID == 0 {
		_, err := db.NewInsert().Model(w).Exec(ctx)
		return dbErr(err)
	}
	_, err := db.NewUpdate().Model(w).WherePK().Exec(ctx)
	return dbErr(err)
}

// DeleteScheduleWorkflow removes workflow id of schedule scheduleID.
func DeleteScheduleWorkflow(ctx context.Context, db bun.IDB, scheduleID, id int64) error {
	res, err := db.NewDelete().Model((*ScheduleWorkflow)(nil)).Where("id = ? AND schedule_id = ?", id, scheduleID).Exec(ctx)
	return deleted(res, err)
}
