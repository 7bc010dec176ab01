package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Policy types, and the workflow each runs over what its scan selects.
const (
	PolicyMigration    = "migration"
	PolicyPremigration = "premigration"
)

// PolicyWorkflows names the workflow a policy type runs.
var PolicyWorkflows = map[string]string{PolicyMigration: "migrate", PolicyPremigration: "premigrate"}

// Policy selects files of its spaces on a site by its condition groups,
// in its order, and migrates (or premigrates) them, on its schedule and,
// with triggers, only while a pool is fuller than a threshold.
type Policy struct {
	bun.BaseModel `bun:"table:policies,alias:pol"`

	ID              int64            `bun:"id,pk,autoincrement"`
	Name            string           `bun:"name"`
	Enabled         bool             `bun:"enabled"`
	PolicyType      string           `bun:"policy_type"`
	Filesystem      string           `bun:"filesystem"`
	SiteID          int64            `bun:"site_id"`
	Site            *Site            `bun:"rel:belongs-to,join:site_id=id"`
	Spaces          []int64          `bun:"spaces,type:jsonb"`
	Threads         int              `bun:"threads"`
	OrderBy         string           `bun:"order_by"`
	OrderReverse    bool             `bun:"order_reverse"`
	Schedule        *PolicySchedule  `bun:"schedule,type:jsonb"`
	Triggers        []PolicyTrigger  `bun:"triggers,type:jsonb"`
	ConditionGroups []ConditionGroup `bun:"condition_groups,type:jsonb"`
	Created         time.Time        `bun:"created_at"`
}

// PolicySchedule is when a policy runs: cron fields in Timezone ("": the
// policy's site's, whichever site that is); Time "HH:MM" sets hour and
// minute; FirstOccur runs it at the first occurrence only. StartDateTime
// (RFC 3339) is its first start after it was last written.
type PolicySchedule struct {
	ID int64 `json:"id"`
	Cron
	FirstOccur    bool   `json:"first_occur"`
	Time          string `json:"time,omitempty"`
	Timezone      string `json:"timezone"`
	StartDateTime string `json:"start_date_time,omitempty"`
}

// PolicyTrigger fires a policy while pool Pool is fuller than Upper
// percent, and frees space down to Lower (premigrating down to
// Premigrate).
type PolicyTrigger struct {
	ID                  int64   `json:"id"`
	PoolName            string  `json:"pool_name"`
	IsCloud             bool    `json:"is_cloud"`
	LowerThreshold      float64 `json:"lower_threshold"`
	UpperThreshold      float64 `json:"upper_threshold"`
	PremigrateThreshold float64 `json:"premigrate_threshold"`
	MaxUtilisation      float64 `json:"max_utilisation"`
}

// ConditionGroup selects the files that meet all its conditions; a
// policy selects the files of any of its groups.
type ConditionGroup struct {
	ID                 int64               `json:"id"`
	Name               string              `json:"name"`
	Policy             int64               `json:"policy"`
	DateConditions     []DateCondition     `json:"date_conditions"`
	FilesizeConditions []FilesizeCondition `json:"filesize_conditions"`
	FiletypeConditions []FiletypeCondition `json:"filetype_conditions"`
}

// DateCondition: the file's DateField is OlderOrNewer than Age.
type DateCondition struct {
	ID             int64  `json:"id"`
	ConditionGroup int64  `json:"condition_group"`
	Age            string `json:"age"`
	DateField      string `json:"date_field"`
	Include        bool   `json:"include"`
	OlderOrNewer   string `json:"older_or_newer"`
}

// FilesizeCondition: the file is GreaterOrLess than Size bytes.
type FilesizeCondition struct {
	ID             int64  `json:"id"`
	ConditionGroup int64  `json:"condition_group"`
	GreaterOrLess  string `json:"greater_or_less"`
	Size           int64  `json:"size"`
	Include        bool   `json:"include"`
}

// FiletypeCondition: the file's extension is one of Filetypes.
type FiletypeCondition struct {
	ID             int64    `json:"id"`
	ConditionGroup int64    `json:"condition_group"`
	Filetypes      []string `json:"filetypes"`
	Include        bool     `json:"include"`
}

// PoliciesQuery selects policies with their site, by id.
func PoliciesQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Relation("Site").Order("pol.id")
}

// GetPolicy loads a policy with its site.
func GetPolicy(ctx context.Context, db bun.IDB, id int64) (*Policy, error) {
	p := new(Policy)
	return p, dbErr(db.NewSelect().Model(p).Relation("Site").Where("pol.id = ?", id).Scan(ctx))
}

// PolicyIDs lists the ids of every policy.
func PolicyIDs(ctx context.Context, db bun.IDB) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().Model((*Policy)(nil)).Column("id").Order("id").Scan(ctx, &ids)
	return ids, dbErr(err)
}

// SavePolicy inserts or updates p.
func SavePolicy(ctx context.Context, db bun.IDB, p *Policy) error {
	if p.ID == 0 {
		p.Created = time.Now().UTC()
		_, err := db.NewInsert().Model(p).Exec(ctx)
		return dbErr(err)
	}
	_, err := db.NewUpdate().Model(p).WherePK().ExcludeColumn("created_at").Exec(ctx)
	return dbErr(err)
}

// DeletePolicy removes a policy.
func DeletePolicy(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*Policy)(nil)).Where("id = ?", id).Exec(ctx)
	return deleted(res, err)
}
