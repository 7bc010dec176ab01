package hub

import (
	"fmt"
	"net/http"
	"net/mail"
	"path"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/robfig/cron/v3"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// Accepted values of the configuration's enumerated fields
// (docs/catalogue-definitions.md).
var (
	searchBackends  = []string{"database", "searchengine"}
	dbBackupTypes   = []string{"full", "schema"}
	proxiesBackends = []string{"local", "site"}
)

func (s *Server) configurationRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("configuration")
	r.GET("/configurations/", perm, handle(s.getConfiguration))
	r.PATCH("/configurations/", perm, handle(s.patchConfiguration))
}

func (s *Server) getConfiguration(c *gin.Context) error {
	conf, err := models.GetConfiguration(c.Request.Context(), s.DB)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, normalizeConfiguration(conf))
	return nil
}

// normalizeConfiguration gives empty collections instead of null.
func normalizeConfiguration(conf models.Configuration) models.Configuration {
	if conf.CustomStatisticsTasks == nil {
		conf.CustomStatisticsTasks = map[string]any{}
	}
	if conf.AlertEmailAddress == nil {
		conf.AlertEmailAddress = []string{}
	}
	return conf
}

// patchConfiguration decodes the body over the stored configuration, so
// only the fields sent change (a wrong type is a 400 naming the field),
// then validates the whole object and stores it.
func (s *Server) patchConfiguration(c *gin.Context) error {
	ctx := c.Request.Context()
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return err
	}
	// Decoding into a non-nil map would merge the keys sent into the
	// stored ones; an object sent must replace the stored object.
	stored := conf.CustomStatisticsTasks
	conf.CustomStatisticsTasks = nil
	if err := web.Bind(c, &conf); err != nil {
		return err
	}
	if conf.CustomStatisticsTasks == nil {
		conf.CustomStatisticsTasks = stored
	}
	conf = normalizeConfiguration(conf)
	if err := validateConfiguration(conf); err != nil {
		return err
	}
	if err := s.Changes.SaveConfiguration(ctx, conf); err != nil {
		return err
	}
	c.JSON(http.StatusOK, conf)
	return nil
}

func validEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == strings.TrimSpace(s)
}

// bound is the range an integer setting of the configuration may take.
type bound struct{ min, max int64 }

// Units of the bounds below, in seconds.
const (
	minute = 60
	hour   = 60 * minute
	day    = 24 * hour
	year   = 365 * day
)

// configBounds are the ranges of the configuration's integers
// (docs/input-limits.md): wide enough for any real use, narrow enough
// that a value times its unit fits a time.Duration and means something.
var configBounds = map[string]bound{
	"analytics_timeout":                    {1, day},           // seconds
	"health_timeout":                       {1, hour},          // seconds
	"idp_jwks_timeout":                     {1, 30 * day},      // seconds
	"node_health_last_heartbeat_interval":  {1, day},           // seconds
	"snapdiff_stream_timeout":              {1, day},           // seconds
	"snapshot_create_delete_retry_timeout": {1, day},           // seconds
	"stat_refresh_period":                  {1, 30 * day},      // seconds
	"stat_timeout":                         {1, hour},          // seconds, as ?custom_timeout
	"task_invalidation_timeout":            {1, 365 * 24 * 60}, // minutes: a year
	"maximum_external_results":             {1, 100000},
	"search_max_results":                   {1, 100000},
	"db_backup_retain_versions":            {1, 1000},
	"jobs_ttl":                             {0, 36500},     // days; 0 keeps jobs for ever
	"search_result_ttl":                    {0, 36500},     // days; 0 keeps results for ever
	"notprogressed_job_threshold":          {0, year},      // seconds; 0 never alerts
	"notstarted_job_threshold":             {0, year},      // seconds; 0 never alerts
	"initial_uid":                          {0, 1<<31 - 1}, // a POSIX id every NFS and SMB stack takes
	"initial_gid":                          {0, 1<<31 - 1},
}

// maxOrchestratorTaskTimeout bounds orchestrator_task_timeout (seconds, a
// number): a day.
const maxOrchestratorTaskTimeout = day

func configInts(conf models.Configuration) map[string]int64 {
	return map[string]int64{
		"analytics_timeout": conf.AnalyticsTimeout, "health_timeout": conf.HealthTimeout,
		"idp_jwks_timeout": conf.IDPJWKSTimeout, "node_health_last_heartbeat_interval": conf.NodeHealthLastHeartbeatInterval,
		"snapdiff_stream_timeout": conf.SnapdiffStreamTimeout, "snapshot_create_delete_retry_timeout": conf.SnapshotCreateDeleteRetryTimeout,
		"stat_refresh_period": conf.StatRefreshPeriod, "stat_timeout": conf.StatTimeout,
		"task_invalidation_timeout": conf.TaskInvalidationTimeout, "maximum_external_results": conf.MaximumExternalResults,
		"search_max_results": conf.SearchMaxResults, "db_backup_retain_versions": conf.DBBackupRetainVersions,
		"jobs_ttl": conf.JobsTTL, "search_result_ttl": conf.SearchResultTTL,
		"notprogressed_job_threshold": conf.NotprogressedJobThreshold, "notstarted_job_threshold": conf.NotstartedJobThreshold,
		"initial_uid": conf.InitialUID, "initial_gid": conf.InitialGID,
	}
}

func validateConfiguration(conf models.Configuration) error {
	v := web.ValidationError{}
	for field, n := range configInts(conf) {
		b := configBounds[field]
		switch {
		case n < b.min:
			v.Add(field, fmt.Sprintf("Ensure this value is greater than or equal to %d.", b.min))
		case n > b.max:
			v.Add(field, fmt.Sprintf("Ensure this value is less than or equal to %d.", b.max))
		}
	}
	o := conf.OrchestratorTaskTimeout
	v.Check(o > 0 && o <= maxOrchestratorTaskTimeout, "orchestrator_task_timeout",
		fmt.Sprintf("Ensure this value is greater than 0 and at most %d.", maxOrchestratorTaskTimeout))
	v.Check(slices.Contains(searchBackends, conf.SearchBackend), "search_backend",
		"Must be one of: "+strings.Join(searchBackends, ", ")+".")
	v.Check(slices.Contains(dbBackupTypes, conf.DBBackupType), "db_backup_type",
		"Must be one of: "+strings.Join(dbBackupTypes, ", ")+".")
	v.Check(slices.Contains(proxiesBackends, conf.FilebrowserProxiesBackend), "filebrowser_proxies_backend",
		"Must be one of: "+strings.Join(proxiesBackends, ", ")+".")
	if _, err := cron.ParseStandard(conf.DBBackupSchedule); err != nil {
		v.Add("db_backup_schedule", "Must be a cron expression (minute hour day-of-month month day-of-week, or @daily etc.): "+err.Error())
	}
	if conf.FileIndexScanSchedule != "" {
		if _, err := cron.ParseStandard(conf.FileIndexScanSchedule); err != nil {
			v.Add("file_index_scan_schedule", "Must be empty (no scan) or a cron expression (minute hour day-of-month month day-of-week, or @daily etc.): "+err.Error())
		} else if err := changes.CheckTemporalCron(conf.FileIndexScanSchedule); err != nil {
			v.Add("file_index_scan_schedule", "A cron expression Temporal's schedules refuse (use * for any value): "+err.Error())
		}
	}
	for i, a := range conf.AlertEmailAddress {
		v.Check(validEmail(a), fmt.Sprintf("alert_email_address[%d]", i), "Enter a valid email address.")
	}
	v.Check(conf.DBBackupReportTo == "" || validEmail(conf.DBBackupReportTo), "db_backup_report_to", "Enter a valid email address.")
	v.Check(path.IsAbs(conf.DefaultSpaceLocation), "default_space_location", "Must be an absolute path.")
	if conf.DBBackupEnabled {
		v.Check(path.IsAbs(conf.DBBackupDir), "db_backup_dir", "Must be an absolute path when database backups are enabled.")
	} else {
		v.Check(conf.DBBackupDir == "" || path.IsAbs(conf.DBBackupDir), "db_backup_dir", "Must be an absolute path.")
	}
	return v.Err()
}
