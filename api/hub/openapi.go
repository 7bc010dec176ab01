package hub

import (
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	swaggerfiles "github.com/swaggo/files/v2"
	"sigs.k8s.io/yaml"

	"github.com/thehub/hub/api/web"
)

// The OpenAPI document is generated from the routes the engine really
// serves, so it never lists a route that does not exist nor misses one
// that does. routeDocs adds what a route cannot say about itself. Adding a
// route? Add one line to routeDocs, keyed "METHOD /api/path/{param}/" (the
// parameter names do not matter). A route without a line is still
// documented, from its path alone, but without a summary; and
// TestOpenAPICoversEveryRoute fails until the line is written.

// Shapes of a response body.
const (
	shapeObject = iota // the schema itself
	shapePage          // the pagination envelope around a list of the schema
	shapeArray         // a bare array of the schema
)

// routeDoc documents one route.
type routeDoc struct {
	Tag     string
	Summary string
	Schema  string // component name of the body; "" for a generic object
	Shape   int
	Status  int      // success status; 0 = by method (POST 201, DELETE 204, else 200)
	Query   []string // query parameters
	Public  bool     // served without authentication
	NoBody  bool     // no request body even for POST/PATCH
}

func docOne(tag, summary, schema string, query ...string) routeDoc {
	return routeDoc{Tag: tag, Summary: summary, Schema: schema, Query: query}
}
func docPage(tag, summary, schema string, query ...string) routeDoc {
	return routeDoc{Tag: tag, Summary: summary, Schema: schema, Shape: shapePage, Query: query}
}
func docArray(tag, summary, schema string, query ...string) routeDoc {
	return routeDoc{Tag: tag, Summary: summary, Schema: schema, Shape: shapeArray, Query: query}
}

// with returns d answering status.
func (d routeDoc) with(status int) routeDoc { d.Status = status; return d }

// public marks d as served without authentication.
func (d routeDoc) public() routeDoc { d.Public = true; return d }

// noBody marks a POST that takes no body.
func (d routeDoc) noBody() routeDoc { d.NoBody = true; return d }

// q adds query parameters.
func (d routeDoc) q(names ...string) routeDoc { d.Query = append(d.Query, names...); return d }

// routeDocs documents every route of the hub API, including routes of the
// spec that later features add.
var routeDocs = map[string]routeDoc{
	// Auth and identity.
	"POST /api/auth/token/":            docOne("auth", "Obtain an access and a refresh token", "TokenPair").public(),
	"POST /api/auth/token/refresh/":    docOne("auth", "Obtain a new access token from a refresh token", "TokenPair").public(),
	"POST /api/auth/token/verify/":     docOne("auth", "Verify a token", "").public(),
	"GET /api/auth/token/publickey/":   docOne("auth", "The public key that verifies tokens", "").public(),
	"POST /api/auth/idp/token/":        docOne("auth", "Exchange an identity-provider token for hub tokens", "TokenPair").public(),
	"GET /api/auth/clientkeys/":        docPage("auth", "List client keys", "ClientKey"),
	"POST /api/auth/clientkeys/":       docOne("auth", "Create a client key (api_key shown once)", "ClientKey"),
	"GET /api/auth/clientkeys/{}/":     docOne("auth", "Get a client key", "ClientKey"),
	"PATCH /api/auth/clientkeys/{}/":   docOne("auth", "Rename a client key", "ClientKey"),
	"DELETE /api/auth/clientkeys/{}/":  docOne("auth", "Revoke a client key", ""),
	"GET /api/users/":                  docPage("users", "List users", "User"),
	"POST /api/users/":                 docOne("users", "Create a user", "User"),
	"POST /api/users/change_password/": docOne("users", "Change the caller's password", ""),
	"POST /api/users/sync/":            docOne("users", "Sync NAS users on each site", "").with(http.StatusAccepted),
	"GET /api/users/{}/":               docOne("users", "Get a user", "User"),
	"PATCH /api/users/{}/":             docOne("users", "Update a user", "User"),
	"DELETE /api/users/{}/":            docOne("users", "Delete a user", ""),
	"POST /api/users/{}/activate/":     docOne("users", "Activate a user", "").noBody(),
	"POST /api/users/{}/deactivate/":   docOne("users", "Deactivate a user", "").noBody(),
	"GET /api/my-permissions/":         docArray("users", "The caller's permissions", ""),
	"GET /api/groups/":                 docPage("users", "List groups", "Group"),
	"POST /api/groups/":                docOne("users", "Create a group", "Group"),
	"GET /api/groups/{}/":              docOne("users", "Get a group", "Group"),
	"PATCH /api/groups/{}/":            docOne("users", "Update a group", "Group"),
	"DELETE /api/groups/{}/":           docOne("users", "Delete a group", ""),
	"GET /api/permissions/":            docPage("users", "List permissions", "Permission"),
	"GET /api/permissions/{}/":         docOne("users", "Get a permission", "Permission"),
	"GET /api/health/":                 docOne("health", "Health of the hub, its sites, nodes and queues", "Health"),

	// Reference.
	"GET /api/schema/": docOne("reference", "This OpenAPI document (JSON; ?format=yaml for YAML)", "").public().q("format"),
	"GET /api/docs/":   docOne("reference", "Interactive API reference (Swagger UI)", "").public(),
	"GET /api/docs/{}": docOne("reference", "Assets of the interactive API reference", "").public(),

	// Catalogue: features, file status types, certificate lifetimes, tags.
	"GET /api/features/":             docPage("catalogue", "List feature flags", "Feature"),
	"GET /api/features/{}/":          docOne("catalogue", "Get a feature flag", "Feature"),
	"PATCH /api/features/{}/":        docOne("catalogue", "Switch a feature flag (enabled)", "Feature"),
	"GET /api/filestatustypes/":      docPage("catalogue", "List file status types", "FileStatusType"),
	"GET /api/filestatustypes/{}/":   docOne("catalogue", "Get a file status type", "FileStatusType"),
	"PATCH /api/filestatustypes/{}/": docOne("catalogue", "Change a file status type's label and colours", "FileStatusType"),
	"GET /api/pki/lifetime/":         docArray("catalogue", "List certificate lifetimes", "CertificateLifetime"),
	"GET /api/pki/lifetime/{}/":      docOne("catalogue", "Get a certificate lifetime", "CertificateLifetime"),
	"PATCH /api/pki/lifetime/{}/":    docOne("catalogue", "Change a certificate lifetime (days)", "CertificateLifetime"),
	"POST /api/pki/site/":            docOne("catalogue", "Issue a client certificate for a site or node from the hub CA (site, node, csr)", ""),
	"GET /api/tags/":                 docArray("catalogue", "List tags", "Tag", "filter"),

	// Operations: alerts, actions, nodes, queues.
	"GET /api/alerts/":      docArray("operations", "List alerts, newest first", "Alert", "name", "node", "site", "severity", "summary", "timestamp", "suppressed"),
	"GET /api/alerts/{}/":   docOne("operations", "Get an alert", "Alert"),
	"PATCH /api/alerts/{}/": docOne("operations", "Suppress or unsuppress an alert", "Alert"),
	"GET /api/actions/":     docPage("operations", "List actions", "Action"),
	"POST /api/actions/":    docOne("operations", "Record an action (state PENDING)", "Action"),
	"GET /api/actions/{}/":  docOne("operations", "Get an action", "Action"),
	"GET /api/nodes/":       docPage("operations", "List worker nodes", "Node", "site"),
	"GET /api/nodes/{}/":    docOne("operations", "Get a worker node", "Node"),
	"PATCH /api/nodes/{}/":  docOne("operations", "Update a worker node", "Node"),
	"DELETE /api/nodes/{}/": docOne("operations", "Forget a worker node", ""),
	"GET /api/queues/":      docPage("operations", "List queues", "Queue", "site"),
	"GET /api/queues/{}/":   docOne("operations", "Get a queue", "Queue"),

	// Configuration and settings.
	"GET /api/configurations/":             docOne("settings", "Get the configuration", "Configuration"),
	"PATCH /api/configurations/":           docOne("settings", "Change the configuration", "Configuration"),
	"GET /api/settings/":                   docArray("settings", "List global settings", "Setting"),
	"PATCH /api/settings/":                 docOne("settings", "Set or delete global settings and send them to every site", "SettingsPatch").with(http.StatusAccepted),
	"POST /api/settings/sync/":             docOne("settings", "Send the settings to every site, or to ?site=", "").with(http.StatusAccepted).noBody().q("site"),
	"GET /api/sites/{}/settings/":          docArray("settings", "Settings in force at a site (?flat=true: key to value)", "Setting", "flat"),
	"PATCH /api/sites/{}/settings/":        docOne("settings", "Set or delete a site's own settings and send them", "SettingsPatch").with(http.StatusAccepted),
	"POST /api/sites/{}/settings/refresh/": docOne("settings", "Import the settings a site applies that the hub lacks", "").with(http.StatusAccepted).noBody(),
	"GET /api/settingstasks/":              docPage("settings", "List settings tasks", "SettingsTask", "tasktype", "state", "job_id"),
	"GET /api/settingstasks/{}/":           docOne("settings", "Get a settings task", "SettingsTask"),

	// Workflow definitions.
	"GET /api/workflows/":       docPage("workflows", "List workflow definitions", "Workflow", "enabled", "visible"),
	"POST /api/workflows/":      docOne("workflows", "Create a workflow definition", "Workflow"),
	"GET /api/workflows/{}/":    docOne("workflows", "Get a workflow definition", "Workflow"),
	"PATCH /api/workflows/{}/":  docOne("workflows", "Update a workflow definition", "Workflow"),
	"DELETE /api/workflows/{}/": docOne("workflows", "Delete a workflow definition (not a built-in one)", ""),

	// Sites and storage.
	"GET /api/sites/":                     docPage("sites", "List sites", "Site"),
	"POST /api/sites/":                    docOne("sites", "Create a site", "Site"),
	"GET /api/sites/{}/":                  docOne("sites", "Get a site", "Site"),
	"PATCH /api/sites/{}/":                docOne("sites", "Update a site", "Site"),
	"DELETE /api/sites/{}/":               docOne("sites", "Delete a site", ""),
	"GET /api/sites/{}/health/":           docOne("sites", "Health of a site", "Site"),
	"POST /api/sites/{}/refresh/":         docOne("sites", "Refresh a site's counts and storage", "Site").noBody(),
	"GET /api/spaces/":                    docPage("spaces", "List spaces", "Space", "site_id", "search_keyword"),
	"POST /api/spaces/":                   docOne("spaces", "Create a space", "Space"),
	"GET /api/spaces/{}/":                 docOne("spaces", "Get a space", "Space", "site_id", "search_keyword"),
	"PATCH /api/spaces/{}/":               docOne("spaces", "Update a space", "Space"),
	"DELETE /api/spaces/{}/":              docOne("spaces", "Delete a space", ""),
	"GET /api/spaces/{}/files/":           docOne("spaces", "Browse a space's files", "SpaceFile"),
	"GET /api/storagepools/":              docPage("storage", "List storage pools", "StoragePool"),
	"GET /api/storagepools/{}/":           docOne("storage", "Get a storage pool", "StoragePool"),
	"GET /api/servers/":                   docPage("storage", "List servers", "Server"),
	"GET /api/servers/{}/":                docOne("storage", "Get a server", "Server"),
	"GET /api/datastores/":                docPage("storage", "List data stores", "DataStore"),
	"POST /api/datastores/":               docOne("storage", "Create a data store", "DataStore"),
	"GET /api/datastores/{}/":             docOne("storage", "Get a data store", "DataStore"),
	"PATCH /api/datastores/{}/":           docOne("storage", "Update a data store", "DataStore"),
	"DELETE /api/datastores/{}/":          docOne("storage", "Delete a data store", ""),
	"GET /api/ipaddresses/":               docPage("storage", "List IP addresses", "IPAddress", "datastore_id"),
	"POST /api/ipaddresses/":              docOne("storage", "Create an IP address", "IPAddress"),
	"GET /api/ipaddresses/{}/":            docOne("storage", "Get an IP address", "IPAddress"),
	"PATCH /api/ipaddresses/{}/":          docOne("storage", "Update an IP address", "IPAddress"),
	"DELETE /api/ipaddresses/{}/":         docOne("storage", "Delete an IP address", ""),
	"GET /api/buckets/":                   docPage("storage", "List buckets", "Bucket"),
	"POST /api/buckets/":                  docOne("storage", "Create a bucket", "Bucket"),
	"GET /api/buckets/{}/":                docOne("storage", "Get a bucket", "Bucket"),
	"PATCH /api/buckets/{}/":              docOne("storage", "Update a bucket", "Bucket"),
	"DELETE /api/buckets/{}/":             docOne("storage", "Delete a bucket (and its settings on every site)", ""),
	"GET /api/external_targets/":          docPage("storage", "List external targets", "ExternalTarget", "bucket"),
	"POST /api/external_targets/":         docOne("storage", "Create an external target", "ExternalTarget"),
	"GET /api/external_targets/{}/":       docOne("storage", "Get an external target", "ExternalTarget"),
	"PATCH /api/external_targets/{}/":     docOne("storage", "Update an external target", "ExternalTarget"),
	"DELETE /api/external_targets/{}/":    docOne("storage", "Delete an external target", ""),
	"GET /api/external_targets/{}/files/": docOne("storage", "List an external target's contents", "", "page", "page_size", "path", "max_items", "marker"),
	"GET /api/nfsshares/":                 docArray("storage", "List NFS shares", "NFSShare"),
	"POST /api/nfsshares/":                docOne("storage", "Create an NFS share", "NFSShare"),
	"GET /api/nfsshares/{}/":              docOne("storage", "Get an NFS share", "NFSShare"),
	"PATCH /api/nfsshares/{}/":            docOne("storage", "Update an NFS share", "NFSShare"),
	"DELETE /api/nfsshares/{}/":           docOne("storage", "Delete an NFS share", ""),
	"GET /api/smbshares/":                 docArray("storage", "List SMB shares", "SMBShare"),
	"POST /api/smbshares/":                docOne("storage", "Create an SMB share", "SMBShare"),
	"GET /api/smbshares/{}/":              docOne("storage", "Get an SMB share", "SMBShare"),
	"PATCH /api/smbshares/{}/":            docOne("storage", "Update an SMB share", "SMBShare"),
	"DELETE /api/smbshares/{}/":           docOne("storage", "Delete an SMB share", ""),

	// Jobs and tasks.
	"POST /api/file/workflow/":               docOne("jobs", "Run a workflow on paths of a site (starts a job)", "Job"),
	"GET /api/jobs/":                         docPage("jobs", "List jobs", "Job", "created", "created_time_from", "created_time_to", "completed_time_from", "completed_time_to", "workflow", "state", "owner_ids", "clientkey_ids", "schedule_ids", "site_id", "site", "input_paths_prefix", "search_keyword", "hide_noop", "queue", "queue_id"),
	"POST /api/jobs/":                        docOne("jobs", "Create a job (older revision body)", "Job"),
	"GET /api/jobs/jobtype_choices/":         docPage("jobs", "Custom job types", ""),
	"GET /api/jobs/recent/":                  docArray("jobs", "The most recent jobs", "Job"),
	"GET /api/jobs/stats/":                   docOne("jobs", "Job statistics (same filters as the job list)", ""),
	"GET /api/jobs/{}/":                      docOne("jobs", "Get a job", "Job"),
	"DELETE /api/jobs/{}/":                   docOne("jobs", "Delete a job", ""),
	"POST /api/jobs/{}/cancel/":              docOne("jobs", "Cancel a job's pending and started tasks", "").noBody(),
	"POST /api/jobs/{}/pause/":               docOne("jobs", "Pause a job", "").noBody(),
	"POST /api/jobs/{}/resume/":              docOne("jobs", "Resume a paused job", "").noBody(),
	"POST /api/jobs/{}/resubmit/":            docOne("jobs", "Resubmit a finished job", "").noBody(),
	"GET /api/jobs/{}/files/":                docPage("jobs", "Files of a job", "", "category"),
	"GET /api/jobs/{}/progress/":             docOne("jobs", "Completion percentage of a job", ""),
	"GET /api/jobs/{}/statistics/":           docOne("jobs", "Statistics of all files of a job", ""),
	"GET /api/jobstats/":                     docPage("jobs", "List per-path job stats", "JobStat", "state", "job", "path", "history"),
	"GET /api/jobstats/{}/":                  docOne("jobs", "Get a job stat", "JobStat"),
	"GET /api/jobstats/{}/history/":          docPage("jobs", "Task history of a job stat", "JobStat", "state", "job", "path", "history"),
	"GET /api/tasks/":                        docPage("jobs", "List tasks", "Task", "tasktype", "task_id", "state", "job_id", "internal"),
	"GET /api/tasks/{}/":                     docOne("jobs", "Get a task", "Task"),
	"GET /api/tasks/{}/files/":               docPage("jobs", "Files of a task", "", "state", "type", "site"),
	"GET /api/schedules/":                    docPage("schedules", "List schedules", "Schedule", "site_id", "space_id"),
	"POST /api/schedules/":                   docOne("schedules", "Create a schedule", "Schedule"),
	"GET /api/schedules/{}/":                 docOne("schedules", "Get a schedule", "Schedule"),
	"PATCH /api/schedules/{}/":               docOne("schedules", "Update a schedule", "Schedule"),
	"DELETE /api/schedules/{}/":              docOne("schedules", "Delete a schedule", ""),
	"POST /api/schedules/{}/run/":            docOne("schedules", "Run a schedule now", "Schedule").noBody(),
	"GET /api/schedules/{}/workflows/":       docPage("schedules", "List a schedule's workflows", "ScheduleWorkflow"),
	"POST /api/schedules/{}/workflows/":      docOne("schedules", "Add a workflow to a schedule", "ScheduleWorkflow"),
	"GET /api/schedules/{}/workflows/{}/":    docOne("schedules", "Get a schedule workflow", "ScheduleWorkflow"),
	"PATCH /api/schedules/{}/workflows/{}/":  docOne("schedules", "Update a schedule workflow", "ScheduleWorkflow"),
	"DELETE /api/schedules/{}/workflows/{}/": docOne("schedules", "Remove a workflow from a schedule", ""),
	"GET /api/automatedschedules/":           docPage("schedules", "List automated schedules", ""),
	"GET /api/policies/":                     docPage("policies", "List policies", "Policy"),
	"POST /api/policies/":                    docOne("policies", "Create a policy", "Policy"),
	"GET /api/policies/{}/":                  docOne("policies", "Get a policy", "Policy"),
	"PATCH /api/policies/{}/":                docOne("policies", "Update a policy", "Policy"),
	"DELETE /api/policies/{}/":               docOne("policies", "Delete a policy", ""),
	"POST /api/policies/{}/run/":             docOne("policies", "Run a policy now", "").with(http.StatusAccepted).noBody(),
	"GET /api/file/":                         docPage("files", "Browse a directory of a site", "", "path", "site", "details", "cache_ttl"),
	"GET /api/filesets/":                     docOne("files", "File sets", "", "site"),
	"GET /api/analytics/":                    docPage("files", "Storage analytics", "", "path", "site", "children", "cache_ttl", "custom_timeout", "raise_exception", "download"),
	"POST /api/search/":                      docOne("search", "Start a search", ""),
	"GET /api/search/{}/":                    docPage("search", "Results of a search", "", "sort", "group_by_name"),
	"DELETE /api/search/{}/":                 docOne("search", "Delete a search", ""),
	"PATCH /api/search/metadata/":            docOne("search", "Update search metadata", ""),
	"GET /api/search/metadata_fields/":       docPage("search", "List metadata fields", ""),
}

// schemaFields lists each component's fields as name:type, with a
// trailing ! for read-only ones. Types: string, integer, number, boolean,
// object, array, or any (no constraint).
var schemaFields = map[string]string{
	"TokenPair":           "access:string refresh:string",
	"ClientKey":           "id:integer! url:string! name:string user:string! api_key:string! created:string!",
	"User":                "id:integer! url:string! username:string password:string email:string first_name:string last_name:string date_joined:string last_login:string is_active:boolean groups:array nas_user:object profile:object",
	"Group":               "id:integer! url:string! name:string permissions:array users:array",
	"Permission":          "id:integer! app_label:string! codename:string! model:string! name:string!",
	"Health":              "overall_health:string! hub_status:object! site_status:array!",
	"Feature":             "name:string! description:string! enabled:boolean",
	"FileStatusType":      "key:string! label:string background_color:string text_color:string url:string!",
	"CertificateLifetime": "id:integer! url:string! name:string! description:string! days:integer updated_at:string! updated_by:integer!",
	"Tag":                 "name:string!",
	"Alert":               "id:integer! url:string! name:string! node:string! queue:string! severity:string! site:string! summary:string! suppressed:boolean timestamp:string! created:string!",
	"Action":              "id:integer! url:string! action:string state:string! results:string! user:integer! created:string!",
	"Node":                "id:integer! url:string! name:string site:string last_heartbeat:string online:boolean! has_default_queue:boolean!",
	"Queue":               "id:integer! url:string! name:string! label:string! last_heartbeat:string! online:boolean! nodes:array! site:string!",
	"Configuration":       "analytics_timeout:integer custom_statistics_tasks:object default_space_location:string force_local_managed_users:boolean health_timeout:integer initial_gid:integer initial_uid:integer jobs_ttl:integer maximum_external_results:integer node_health_last_heartbeat_interval:integer orchestrator_task_timeout:number schedules_enabled:boolean search_backend:string search_max_results:integer search_result_ttl:integer snapdiff_stream_timeout:integer snapshot_create_delete_retry_timeout:integer stat_refresh_period:integer stat_timeout:integer task_invalidation_timeout:integer alert_completed_failed_jobs:boolean alert_completed_has_failures_jobs:boolean alert_completed_success_jobs:boolean alert_inprogress_failing_jobs:boolean alert_notprogressed_jobs:boolean alert_notstarted_jobs:boolean alert_scheduled:boolean alert_unscheduled:boolean alert_email_address:array db_backup_dir:string db_backup_enabled:boolean db_backup_report:boolean db_backup_report_to:string db_backup_retain_versions:integer db_backup_schedule:string db_backup_type:string filebrowser_proxies_backend:string idp_jwks_timeout:integer notprogressed_job_threshold:integer notstarted_job_threshold:integer",
	"Setting":             "id:integer! key:string value:any desc:string! scope:string!",
	"SettingsPatch":       "values:array tasks:array! task_id:integer! site:string!",
	"SettingsTask":        "id:integer! url:string! task_id:string! tasktype:string! job:integer! site:string! started:string! state:string! completed:string! friendly_name:string! request:object! results:object! runtime:number!",
	"Workflow":            "id:integer! url:string! name:string label:string discovery:string discovery_options:object fields:object filter_rules:array icon_classes:any enabled:boolean visible:boolean schedule_only:boolean external_only:boolean preferred_queue:string builtin:boolean!",
	"Site":                "id:integer! url:string! name:string label:string shortcode:string type:string timezone:string public_url:string storage_search_url:string searchengine_url:string bandwidth:integer color:array am_i_configured:boolean ready_to_configure:boolean editable:string! addon_enabled:boolean directories_count:integer files_count:integer files_hydrated_count:integer files_stubbed_count:integer enable_auto_file_batch_sizing:boolean file_batch_gb:integer file_batch_size:integer fs_iscan_buckets:integer fs_iscan_threads:integer lock_threshold:integer include:object exclude:object spaces:array",
	"Space":               "id:integer! uuid:string! url:string! name:string mountpoint:string size:integer permission_mode:string color:array created:string! editable:string! is_ready:string! nested_shares:string! relationships:string! immutable:boolean on_sites:object sites:array snapshot_schedule:object",
	"SpaceFile":           "path:string name:string type:string site:string! size:integer data_size:integer disk_usage:integer path_depth:integer total_files:integer atime:string ctime:string mtime:string time_refreshed:string deleted:boolean restricted:boolean status:string children:string! error:string metadata:object remote_locations:object url:string!",
	"StoragePool":         "name:string! filesystem:string! capacity:integer! free_space:integer! used_space:integer! is_default:boolean! site:integer!",
	"Server":              "name:string! site:integer! list_of_interfaces:object!",
	"DataStore":           "id:integer! url:string! name:string type:string accesskey:string accesskeyid:string secretaccesskey:string bucket:string container:string credentialsfile:string endpoint:string region:string storageaccount:string",
	"IPAddress":           "id:integer! url:string! ipaddr:string datastore:any",
	"Bucket":              "id:integer! name:string label:string storage_type:string endpoint:string port:integer scheme:string region:string ssl_verify:boolean container:string storage_account:string migration_target_folder:string advanced_settings:object credentials_file:string access_key:string access_key_id:string secret_access_key:string credentials_json:any external_targets:array! soft_deleting:boolean!",
	"ExternalTarget":      "id:integer! name:string storage_type:string local_file_regex:string enabled:boolean backup_only:boolean backup_site:integer available_on_sites:array delete_on_recall:boolean bucket:any container:string storage_account:string endpoint:string port:integer scheme:string region:string ssl_verify:boolean migration_target_folder:string advanced_settings:object",
	"NFSShare":            "id:integer! uuid:string! name:string path:string space:integer clients:array",
	"SMBShare":            "id:integer! uuid:string! name:string space:integer path:string read_only:boolean visible:boolean guest_ok:boolean hsm_support:boolean multi_thread_reads:boolean multi_thread_writes:boolean root_share_locking:boolean create_mask:string directory_mask:string force_create_mode:string force_directory_mode:string admin_users:object allowed_users:object hosts_allow:object hosts_deny:object advanced_settings:object on_sites:object",
	"Job":                 "id:integer! url:string! workflow:string site:string queue:string discovery:string fields:object paths:any state:string created:string! started:string! completed:string! runtime:number! owner:object! clientkey:string! schedule:string! dir_walk_complete:boolean is_settings_job:boolean friendly_name:string progress:number! numfiles:integer! numprocessedfiles:integer! numfailedfiles:integer! numskippedfiles:integer! numabortedfiles:integer! numcancelledfiles:integer!",
	"JobStat":             "id:integer! job:integer task:integer path:string code:string message:string state:string url:string!",
	"Task":                "id:integer! url:string! job:integer site:string queue:string tasktype:string task_id:string state:string started:string dynamic_parents:array parents:string! completed:string friendly_name:string paths:string! result:object runtime:string!",
	"Schedule":            "id:integer! url:string! name:string site:string space:string enabled:boolean minute:string hour:string day_of_month:string day_of_week:string month_of_year:string discovery:string discovery_options:object managed_paths:object",
	"ScheduleWorkflow":    "id:integer! url:string! workflow:string site:string queue:string fields:object",
	"Policy":              "id:integer! created:string! name:string enabled:boolean policy_type:string filesystem:string site:integer spaces:array threads:integer run_immediately:boolean order:any schedule:object triggers:any condition_groups:array",
}

// openAPISchema renders a schemaFields entry as a JSON Schema object.
func openAPISchema(spec string) map[string]any {
	props := map[string]any{}
	for _, f := range strings.Fields(spec) {
		name, typ, _ := strings.Cut(f, ":")
		ro := strings.HasSuffix(typ, "!")
		typ = strings.TrimSuffix(typ, "!")
		p := map[string]any{}
		switch typ {
		case "any":
		case "array":
			p["type"], p["items"] = typ, map[string]any{}
		default:
			p["type"] = typ
		}
		if typ == "string" || typ == "integer" || typ == "object" {
			p["nullable"] = true
		}
		if ro {
			p["readOnly"] = true
		}
		props[name] = p
	}
	return map[string]any{"type": "object", "properties": props}
}

var (
	ginPathParam = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)
	braceParam   = regexp.MustCompile(`\{[^}]*\}`)
)

// routeDocKey normalises "GET /api/a/:id/" and "GET /api/a/{x}/" alike to
// "GET /api/a/{}/", so parameter names need not match the table.
func routeDocKey(method, ginPath string) string {
	p := ginPathParam.ReplaceAllString(ginPath, "{}")
	p = braceParam.ReplaceAllString(p, "{}")
	return method + " " + p
}

// lookupRouteDoc returns the table entry of a route, if any.
func lookupRouteDoc(method, ginPath string) (routeDoc, bool) {
	d, ok := routeDocs[routeDocKey(method, ginPath)]
	return d, ok
}

func openAPIRef(name string) map[string]any {
	if name == "" {
		return map[string]any{"type": "object"}
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// openAPIOperation builds the OpenAPI operation of one route.
func openAPIOperation(method, ginPath string) map[string]any {
	d, ok := lookupRouteDoc(method, ginPath)
	if !ok {
		// Undocumented: still listed, from the path alone, without a summary.
		d = routeDoc{Tag: strings.Split(strings.TrimPrefix(ginPath, "/api/"), "/")[0]}
	}
	op := map[string]any{"operationId": strings.ToLower(method) + strings.NewReplacer("/", "_", ":", "", "*", "", "-", "_").Replace(strings.TrimSuffix(ginPath, "/")),
		"tags": []string{d.Tag}}
	if d.Summary != "" {
		op["summary"] = d.Summary
	} else {
		op["x-undocumented"] = true
	}
	var params []any
	for _, m := range ginPathParam.FindAllStringSubmatch(ginPath, -1) {
		params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	query := d.Query
	if d.Shape == shapePage {
		query = append([]string{"page", "page_size"}, query...)
	}
	for _, q := range query {
		params = append(params, map[string]any{"name": q, "in": "query", "required": false, "schema": map[string]any{"type": "string"}})
	}
	if params != nil {
		op["parameters"] = params
	}
	if (method == http.MethodPost || method == http.MethodPatch || method == http.MethodPut) && !d.NoBody {
		op["requestBody"] = map[string]any{"required": method != http.MethodPatch,
			"content": map[string]any{"application/json": map[string]any{"schema": openAPIRef(d.Schema)}}}
	}
	status := d.Status
	if status == 0 {
		switch method {
		case http.MethodPost:
			status = http.StatusCreated
		case http.MethodDelete:
			status = http.StatusNoContent
		default:
			status = http.StatusOK
		}
	}
	resp := map[string]any{"description": http.StatusText(status)}
	if status != http.StatusNoContent {
		body := openAPIRef(d.Schema)
		switch d.Shape {
		case shapePage:
			body = map[string]any{"type": "object", "properties": map[string]any{
				"count": map[string]any{"type": "integer"}, "next": map[string]any{"type": "string", "nullable": true},
				"previous": map[string]any{"type": "string", "nullable": true}, "results": map[string]any{"type": "array", "items": body}}}
		case shapeArray:
			body = map[string]any{"type": "array", "items": body}
		}
		resp["content"] = map[string]any{"application/json": map[string]any{"schema": body}}
	}
	errBody := map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}
	responses := map[string]any{strconv.Itoa(status): resp}
	for code, text := range map[int]string{400: "Invalid input: {field: [messages]}", 404: "Not found"} {
		e := map[string]any{"description": text}
		for k, v := range errBody {
			e[k] = v
		}
		responses[strconv.Itoa(code)] = e
	}
	if d.Public {
		op["security"] = []any{}
	} else {
		responses["401"] = map[string]any{"description": "Not authenticated"}
		responses["403"] = map[string]any{"description": "Permission denied"}
	}
	op["responses"] = responses
	return op
}

// openAPIDocument builds the document over the routes the engine serves.
func openAPIDocument(routes gin.RoutesInfo) map[string]any {
	sort.Slice(routes, func(i, j int) bool {
		if routes[i].Path != routes[j].Path {
			return routes[i].Path < routes[j].Path
		}
		return routes[i].Method < routes[j].Method
	})
	paths := map[string]any{}
	used := map[string]bool{}
	for _, r := range routes {
		p := ginPathParam.ReplaceAllString(r.Path, "{$1}")
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		item[strings.ToLower(r.Method)] = openAPIOperation(r.Method, r.Path)
		if d, ok := lookupRouteDoc(r.Method, r.Path); ok && d.Schema != "" {
			used[d.Schema] = true
		}
	}
	schemas := map[string]any{}
	for name := range used {
		schemas[name] = openAPISchema(schemaFields[name])
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "Hub API", "version": "1",
			"description": "The hub's JSON API. Conventions (errors, pagination, statuses): docs/api-conventions.md."},
		"servers": []any{map[string]any{"url": "/"}},
		"paths":   paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearerAuth": map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
				"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": "Authorization",
					"description": "Client key, sent as: Api-Key <key>"},
			},
		},
		"security": []any{map[string]any{"bearerAuth": []any{}}, map[string]any{"apiKey": []any{}}},
	}
}

// docRoutes serves the OpenAPI document and the Swagger UI, both without
// authentication and without any network access: the UI's assets are
// embedded in the binary.
func (s *Server) docRoutes(api *gin.RouterGroup, engine *gin.Engine) {
	api.GET("/schema/", handle(func(c *gin.Context) error {
		doc := openAPIDocument(engine.Routes())
		if c.Query("format") == "yaml" {
			data, err := yaml.Marshal(doc)
			if err != nil {
				return err
			}
			c.Data(http.StatusOK, "application/yaml; charset=utf-8", data)
			return nil
		}
		c.JSON(http.StatusOK, doc)
		return nil
	}))
	api.GET("/docs/", func(c *gin.Context) { serveSwaggerFile(c, "index.html") })
	api.GET("/docs/:file", func(c *gin.Context) { serveSwaggerFile(c, c.Param("file")) })
}

// swaggerInitializer points the UI at the document, relative to
// /api/docs/ so it works behind a path-rewriting proxy too.
const swaggerInitializer = `window.onload = function() {
  window.ui = SwaggerUIBundle({
    url: "../schema/",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "StandaloneLayout"
  });
};
`

func serveSwaggerFile(c *gin.Context, name string) {
	if name == "swagger-initializer.js" {
		c.Data(http.StatusOK, "text/javascript; charset=utf-8", []byte(swaggerInitializer))
		return
	}
	data, err := fs.ReadFile(swaggerfiles.FS, path.Clean(name))
	if err != nil {
		web.NotFound(c)
		return
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	c.Header("Cache-Control", "public, max-age=3600")
	c.Data(http.StatusOK, ctype, data)
}
