package models

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/workflows/vocab"
)

// Setting is one key of the hub's global settings (SiteID nil) or of one
// site's own settings, which override the global value of the same key.
type Setting struct {
	bun.BaseModel `bun:"table:settings,alias:st"`

	ID          int64           `bun:"id,pk,autoincrement"`
	SiteID      *int64          `bun:"site_id"`
	Key         string          `bun:"key"`
	Value       json.RawMessage `bun:"value,type:jsonb"`
	Description string          `bun:"description"`
	UpdatedAt   time.Time       `bun:"updated_at"`
}

// Global reports whether the setting is a global one.
func (s *Setting) Global() bool { return s.SiteID == nil }

// SettingValue is a key and its new value; a nil (or JSON null) value
// deletes the key.
type SettingValue struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// Deletes reports whether the value deletes its key.
func (v SettingValue) Deletes() bool { return IsJSONNull(v.Value) }

// IsJSONNull reports whether raw is absent or the JSON null.
func IsJSONNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

var settingKeyPart = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// SettingKeyParts validates a key of shape <component>:<setting> with an
// optional third :<target> part and returns its number of parts (2 for a
// global key, 3 for a target-specific one).
func SettingKeyParts(key string) (int, error) {
	parts := strings.Split(key, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("keys have the shape <component>:<setting> or <component>:<setting>:<target>")
	}
	for _, p := range parts {
		if !settingKeyPart.MatchString(p) {
			return 0, fmt.Errorf("each part of a key must match [A-Za-z0-9_.-]+")
		}
	}
	return len(parts), nil
}

// GlobalSettings returns the global settings ordered by key.
func GlobalSettings(ctx context.Context, db bun.IDB) ([]Setting, error) {
	var ss []Setting
	err := db.NewSelect().Model(&ss).Where("st.site_id IS NULL").Order("st.key").Scan(ctx)
	return ss, dbErr(err)
}

// SiteOwnSettings returns the settings set for one site, ordered by key.
func SiteOwnSettings(ctx context.Context, db bun.IDB, siteID int64) ([]Setting, error) {
	var ss []Setting
	err := db.NewSelect().Model(&ss).Where("st.site_id = ?", siteID).Order("st.key").Scan(ctx)
	return ss, dbErr(err)
}

// EffectiveSiteSettings returns what a site should apply: its own
// settings plus every global one it does not override, ordered by key.
func EffectiveSiteSettings(ctx context.Context, db bun.IDB, siteID int64) ([]Setting, error) {
	own, err := SiteOwnSettings(ctx, db, siteID)
	if err != nil {
		return nil, err
	}
	global, err := GlobalSettings(ctx, db)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(own))
	for _, s := range own {
		seen[s.Key] = true
	}
	out := own
	for _, s := range global {
		if !seen[s.Key] {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// PutSettings stores values in the global scope (siteID nil) or a site's
// scope: a null value deletes the key. Run it in a transaction so a
// request applies whole.
func PutSettings(ctx context.Context, db bun.IDB, siteID *int64, values []SettingValue) error {
	now := time.Now().UTC()
	for _, v := range values {
		del := db.NewDelete().Model((*Setting)(nil)).Where("key = ?", v.Key)
		upd := db.NewUpdate().Model((*Setting)(nil)).Set("value = ?", string(v.Value)).Set("updated_at = ?", now).Where("key = ?", v.Key)
		if siteID == nil {
			del, upd = del.Where("site_id IS NULL"), upd.Where("site_id IS NULL")
		} else {
			del, upd = del.Where("site_id = ?", *siteID), upd.Where("site_id = ?", *siteID)
		}
		if v.Deletes() {
			if _, err := del.Exec(ctx); err != nil {
				return dbErr(err)
			}
			continue
		}
		res, err := upd.Exec(ctx)
		if err != nil {
			return dbErr(err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			continue
		}
		s := &Setting{SiteID: siteID, Key: v.Key, Value: v.Value, UpdatedAt: now}
		if _, err := db.NewInsert().Model(s).Exec(ctx); err != nil {
			return dbErr(err)
		}
	}
	return nil
}

// settingValues indexes settings by key.
func settingValues(ss []Setting) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(ss))
	for _, s := range ss {
		m[s.Key] = s.Value
	}
	return m
}

// SiteValuesFor returns what a site must apply after keys changed in the
// hub: each key's effective value for the site (its own setting, else
// the global one), or null when the key no longer exists for it.
func SiteValuesFor(ctx context.Context, db bun.IDB, siteID int64, keys []string) ([]SettingValue, error) {
	eff, err := EffectiveSiteSettings(ctx, db, siteID)
	if err != nil {
		return nil, err
	}
	m := settingValues(eff)
	out := make([]SettingValue, len(keys))
	for i, k := range keys {
		out[i] = SettingValue{Key: k, Value: m[k]}
		if out[i].Value == nil {
			out[i].Value = json.RawMessage("null")
		}
	}
	return out, nil
}

// ImportSiteSettings creates, as the site's own settings, the keys a site
// applies that the hub knows neither globally nor for the site. It
// returns the keys created and the keys skipped as malformed.
func ImportSiteSettings(ctx context.Context, db bun.IDB, siteID int64, applied map[string]json.RawMessage) (created, skipped []string, err error) {
	eff, err := EffectiveSiteSettings(ctx, db, siteID)
	if err != nil {
		return nil, nil, err
	}
	known := settingValues(eff)
	keys := make([]string, 0, len(applied))
	for k := range applied {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var values []SettingValue
	for _, k := range keys {
		if _, ok := known[k]; ok || IsJSONNull(applied[k]) {
			continue
		}
		if _, kerr := SettingKeyParts(k); kerr != nil || !json.Valid(applied[k]) {
			skipped = append(skipped, k)
			continue
		}
		values = append(values, SettingValue{Key: k, Value: applied[k]})
		created = append(created, k)
	}
	return created, skipped, PutSettings(ctx, db, &siteID, values)
}

// Settings task types and the states a settings task moves through:
// PENDING → STARTED → SUCCESS or FAILURE.
const (
	SettingsTaskApply   = "apply_settings"
	SettingsTaskRefresh = "refresh_settings"
)

// SettingsTask records the propagation of settings to one site.
type SettingsTask struct {
	bun.BaseModel `bun:"table:settings_tasks,alias:sk"`

	ID           int64           `bun:"id,pk,autoincrement"`
	TaskID       string          `bun:"task_id"` // the Temporal workflow id
	TaskType     string          `bun:"tasktype"`
	JobID        *int64          `bun:"job_id"`
	Site         string          `bun:"site"`
	Started      *time.Time      `bun:"started"`
	Completed    *time.Time      `bun:"completed"`
	State        string          `bun:"state"`
	Request      json.RawMessage `bun:"request,type:jsonb"`
	Results      json.RawMessage `bun:"results,type:jsonb"`
	FriendlyName string          `bun:"friendly_name"`
	Created      time.Time       `bun:"created"`
}

// CreateSettingsTask inserts a PENDING settings task.
func CreateSettingsTask(ctx context.Context, db bun.IDB, t *SettingsTask) error {
	t.State, t.Created = vocab.TaskPending, time.Now().UTC()
	if t.Results == nil {
		t.Results = json.RawMessage("{}")
	}
	_, err := db.NewInsert().Model(t).Returning("id").Exec(ctx)
	return dbErr(err)
}

// SetSettingsTasksWorkflow records the Temporal workflow id of tasks.
func SetSettingsTasksWorkflow(ctx context.Context, db bun.IDB, ids []int64, workflowID string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := db.NewUpdate().Model((*SettingsTask)(nil)).Set("task_id = ?", workflowID).Where("id IN (?)", bun.In(ids)).Exec(ctx)
	return dbErr(err)
}

// StartSettingsTasks moves PENDING tasks to STARTED.
func StartSettingsTasks(ctx context.Context, db bun.IDB, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := db.NewUpdate().Model((*SettingsTask)(nil)).Set("state = ?", vocab.TaskStarted).Set("started = ?", time.Now().UTC()).
		Where("id IN (?) AND state = ?", bun.In(ids), vocab.TaskPending).Exec(ctx)
	return dbErr(err)
}

// FinishSettingsTask records a task's final state and results.
func FinishSettingsTask(ctx context.Context, db bun.IDB, id int64, state string, results json.RawMessage) error {
	now := time.Now().UTC()
	res, err := db.NewUpdate().Model((*SettingsTask)(nil)).Set("state = ?", state).Set("results = ?", string(results)).
		Set("completed = ?", now).Set("started = COALESCE(started, ?)", now).Where("id = ?", id).Exec(ctx)
	return affected(res, err)
}

// SettingsTaskFilter narrows a settings task listing; zero values do not
// filter.
type SettingsTaskFilter struct {
	TaskType string
	States   []string
	JobID    *int64
}

// SettingsTasksQuery selects settings tasks matching f into dest, newest first.
func SettingsTasksQuery(db bun.IDB, dest any, f SettingsTaskFilter) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).Order("sk.id DESC")
	if f.TaskType != "" {
		q = q.Where("sk.tasktype = ?", f.TaskType)
	}
	if len(f.States) > 0 {
		q = q.Where("sk.state IN (?)", bun.In(f.States))
	}
	if f.JobID != nil {
		q = q.Where("sk.job_id = ?", *f.JobID)
	}
	return q
}

// GetSettingsTask loads a settings task by id.
func GetSettingsTask(ctx context.Context, db bun.IDB, id int64) (*SettingsTask, error) {
	t := new(SettingsTask)
	err := db.NewSelect().Model(t).Where("sk.id = ?", id).Scan(ctx)
	return t, dbErr(err)
}
