package models

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Configuration is the hub's single configuration object. Defaults are
// DefaultConfiguration's; the stored row only ever holds a full object.
type Configuration struct {
	AnalyticsTimeout                 int64          `json:"analytics_timeout"`
	CustomStatisticsTasks            map[string]any `json:"custom_statistics_tasks"`
	DefaultSpaceLocation             string         `json:"default_space_location"`
	ForceLocalManagedUsers           bool           `json:"force_local_managed_users"`
	HealthTimeout                    int64          `json:"health_timeout"`
	InitialGID                       int64          `json:"initial_gid"`
	InitialUID                       int64          `json:"initial_uid"`
	JobsTTL                          int64          `json:"jobs_ttl"`
	MaximumExternalResults           int64          `json:"maximum_external_results"`
	NodeHealthLastHeartbeatInterval  int64          `json:"node_health_last_heartbeat_interval"`
	OrchestratorTaskTimeout          float64        `json:"orchestrator_task_timeout"`
	SchedulesEnabled                 bool           `json:"schedules_enabled"`
	SearchBackend                    string         `json:"search_backend"`
	SearchMaxResults                 int64          `json:"search_max_results"`
	SearchResultTTL                  int64          `json:"search_result_ttl"`
	SnapdiffStreamTimeout            int64          `json:"snapdiff_stream_timeout"`
	SnapshotCreateDeleteRetryTimeout int64          `json:"snapshot_create_delete_retry_timeout"`
	StatRefreshPeriod                int64          `json:"stat_refresh_period"`
	StatTimeout                      int64          `json:"stat_timeout"`
	TaskInvalidationTimeout          int64          `json:"task_invalidation_timeout"`
	// FileIndexScanSchedule is when every site rescans its file index (a
	// cron line in the site's timezone); "" schedules no scan.
	FileIndexScanSchedule string `json:"file_index_scan_schedule"`

	AlertCompletedFailedJobs      bool     `json:"alert_completed_failed_jobs"`
	AlertCompletedHasFailuresJobs bool     `json:"alert_completed_has_failures_jobs"`
	AlertCompletedSuccessJobs     bool     `json:"alert_completed_success_jobs"`
	AlertInprogressFailingJobs    bool     `json:"alert_inprogress_failing_jobs"`
	AlertNotprogressedJobs        bool     `json:"alert_notprogressed_jobs"`
	AlertNotstartedJobs           bool     `json:"alert_notstarted_jobs"`
	AlertScheduled                bool     `json:"alert_scheduled"`
	AlertUnscheduled              bool     `json:"alert_unscheduled"`
	AlertEmailAddress             []string `json:"alert_email_address"`
	DBBackupDir                   string   `json:"db_backup_dir"`
	DBBackupEnabled               bool     `json:"db_backup_enabled"`
	DBBackupReport                bool     `json:"db_backup_report"`
	DBBackupReportTo              string   `json:"db_backup_report_to"`
	DBBackupRetainVersions        int64    `json:"db_backup_retain_versions"`
	DBBackupSchedule              string   `json:"db_backup_schedule"`
	DBBackupType                  string   `json:"db_backup_type"`
	FilebrowserProxiesBackend     string   `json:"filebrowser_proxies_backend"`
	IDPJWKSTimeout                int64    `json:"idp_jwks_timeout"`
	NotprogressedJobThreshold     int64    `json:"notprogressed_job_threshold"`
	NotstartedJobThreshold        int64    `json:"notstarted_job_threshold"`
}

// DefaultConfiguration returns the configuration a new hub starts with.
func DefaultConfiguration() Configuration {
	return Configuration{
		AnalyticsTimeout: 30, CustomStatisticsTasks: map[string]any{}, DefaultSpaceLocation: "/",
		HealthTimeout: 10, InitialGID: 100000, InitialUID: 100000, JobsTTL: 90,
		MaximumExternalResults: 1000, NodeHealthLastHeartbeatInterval: 120, OrchestratorTaskTimeout: 300,
		SchedulesEnabled: true, SearchBackend: "database", SearchMaxResults: 200, SearchResultTTL: 7,
		SnapdiffStreamTimeout: 60, SnapshotCreateDeleteRetryTimeout: 300, StatRefreshPeriod: 300,
		StatTimeout: 30, TaskInvalidationTimeout: 1440,
		AlertCompletedFailedJobs: true, AlertCompletedHasFailuresJobs: true, AlertInprogressFailingJobs: true,
		AlertNotprogressedJobs: true, AlertNotstartedJobs: true, AlertEmailAddress: []string{},
		DBBackupRetainVersions: 7, DBBackupSchedule: "0 2 * * *", DBBackupType: "full",
		FilebrowserProxiesBackend: "local", IDPJWKSTimeout: 3600,
		NotprogressedJobThreshold: 3600, NotstartedJobThreshold: 600,
	}
}

// configurationRow stores the configuration as one JSON document, so adding
// a field needs no migration.
type configurationRow struct {
	bun.BaseModel `bun:"table:configurations"`

	ID        int64           `bun:"id,pk"`
	Data      json.RawMessage `bun:"data,type:jsonb"`
	UpdatedAt time.Time       `bun:"updated_at"`
}

// GetConfiguration returns the stored configuration over the defaults.
func GetConfiguration(ctx context.Context, db bun.IDB) (Configuration, error) {
	c := DefaultConfiguration()
	row := new(configurationRow)
	err := db.NewSelect().Model(row).Where("id = 1").Scan(ctx)
	if err = dbErr(err); err == ErrNotFound {
		return c, nil
	} else if err != nil {
		return c, err
	}
	if err := json.Unmarshal(row.Data, &c); err != nil {
		return c, fmt.Errorf("decode configuration: %w", err)
	}
	return c, nil
}

// SaveConfiguration stores the whole configuration.
func SaveConfiguration(ctx context.Context, db bun.IDB, c Configuration) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	row := &configurationRow{ID: 1, Data: data, UpdatedAt: time.Now().UTC()}
	_, err = db.NewInsert().Model(row).On("CONFLICT (id) DO UPDATE").
		Set("data = EXCLUDED.data, updated_at = EXCLUDED.updated_at").Exec(ctx)
	return dbErr(err)
}
