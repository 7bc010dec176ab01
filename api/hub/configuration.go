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
	if err := models.SaveConfiguration(ctx, s.DB, conf); err != nil {
		return err
	}
	c.JSON(http.StatusOK, conf)
	return nil
}

func validEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == strings.TrimSpace(s)
}

func validateConfiguration(conf models.Configuration) error {
	v := web.ValidationError{}
	positive := map[string]int64{
		"analytics_timeout": conf.AnalyticsTimeout, "health_timeout": conf.HealthTimeout,
		"maximum_external_results": conf.MaximumExternalResults, "search_max_results": conf.SearchMaxResults,
		"node_health_last_heartbeat_interval":  conf.NodeHealthLastHeartbeatInterval,
		"snapdiff_stream_timeout":              conf.SnapdiffStreamTimeout,
		"snapshot_create_delete_retry_timeout": conf.SnapshotCreateDeleteRetryTimeout,
		"stat_refresh_period":                  conf.StatRefreshPeriod, "stat_timeout": conf.StatTimeout,
		"task_invalidation_timeout": conf.TaskInvalidationTimeout, "idp_jwks_timeout": conf.IDPJWKSTimeout,
		"db_backup_retain_versions": conf.DBBackupRetainVersions,
	}
	for field, n := range positive {
		v.Check(n > 0, field, "Ensure this value is greater than 0.")
	}
	nonNegative := map[string]int64{
		"initial_gid": conf.InitialGID, "initial_uid": conf.InitialUID, "jobs_ttl": conf.JobsTTL,
		"search_result_ttl": conf.SearchResultTTL, "notprogressed_job_threshold": conf.NotprogressedJobThreshold,
		"notstarted_job_threshold": conf.NotstartedJobThreshold,
	}
	for field, n := range nonNegative {
		v.Check(n >= 0, field, "Ensure this value is greater than or equal to 0.")
	}
	v.Check(conf.OrchestratorTaskTimeout > 0, "orchestrator_task_timeout", "Ensure this value is greater than 0.")
	v.Check(slices.Contains(searchBackends, conf.SearchBackend), "search_backend",
		"Must be one of: "+strings.Join(searchBackends, ", ")+".")
	v.Check(slices.Contains(dbBackupTypes, conf.DBBackupType), "db_backup_type",
		"Must be one of: "+strings.Join(dbBackupTypes, ", ")+".")
	v.Check(slices.Contains(proxiesBackends, conf.FilebrowserProxiesBackend), "filebrowser_proxies_backend",
		"Must be one of: "+strings.Join(proxiesBackends, ", ")+".")
	if _, err := cron.ParseStandard(conf.DBBackupSchedule); err != nil {
		v.Add("db_backup_schedule", "Must be a cron expression (minute hour day-of-month month day-of-week, or @daily etc.): "+err.Error())
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
