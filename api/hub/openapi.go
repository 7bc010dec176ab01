package hub

import (
	"encoding/json"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"
	swaggerfiles "github.com/swaggo/files/v2"
	"sigs.k8s.io/yaml"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// The OpenAPI document is generated: its routes from the ones the engine
// really serves, so it never lists a route that does not exist nor misses
// one that does; its schemas from the Go types the handlers answer and
// bind (schema.go, responses.go). routeDocs adds what a route cannot say
// about itself: a tag, a summary, the type of its answer and of its body,
// its query parameters. Adding a route? Add one line to routeDocs, keyed
// "METHOD /api/path/{param}/" (the parameter names do not matter);
// TestOpenAPICoversEveryRoute fails until it is there. docs/openapi.md
// says more.

// Shapes of a response body.
const (
	shapeObject = iota // the body type itself
	shapePage          // the pagination envelope around a list of the type
	shapeList          // a bare array of the type
)

// routeDoc documents one route.
type routeDoc struct {
	Tag     string
	Summary string
	Body    any // a value of the answer's type (an anyOf for several); nil: no body
	Shape   int
	Status  int         // success status; 0 = by method (POST 201, DELETE 204, else 200)
	Also    map[int]any // other success statuses, with a value of their answer's type
	In      any         // a value of the request body's type; nil: no body
	Query   []string    // query parameters
	Public  bool        // served without authentication
	Errors  []int       // error statuses beyond those every route may answer
	Extra   any         // a struct whose fields a page adds beside count, next, previous and results
	Media   []string    // media types of the answer; none: JSON
}

func docOne(tag, summary string, body any, query ...string) routeDoc {
	return routeDoc{Tag: tag, Summary: summary, Body: body, Query: query}
}
func docPage(tag, summary string, item any, query ...string) routeDoc {
	return routeDoc{Tag: tag, Summary: summary, Body: item, Shape: shapePage, Query: query}
}
func docList(tag, summary string, item any, query ...string) routeDoc {
	return routeDoc{Tag: tag, Summary: summary, Body: item, Shape: shapeList, Query: query}
}

// docDelete documents a DELETE answering 204 without a body.
func docDelete(tag, summary string) routeDoc { return routeDoc{Tag: tag, Summary: summary} }

// with returns d answering status.
func (d routeDoc) with(status int) routeDoc { d.Status = status; return d }

// also adds another success status and its answer.
func (d routeDoc) also(status int, body any) routeDoc {
	d.Also = map[int]any{status: body}
	return d
}

// in sets the request body's type.
func (d routeDoc) in(body any) routeDoc { d.In = body; return d }

// public marks d as served without authentication.
func (d routeDoc) public() routeDoc { d.Public = true; return d }

// q adds query parameters.
func (d routeDoc) q(names ...string) routeDoc { d.Query = append(d.Query, names...); return d }

// errs adds error statuses.
func (d routeDoc) errs(statuses ...int) routeDoc { d.Errors = append(d.Errors, statuses...); return d }

// extra sets what a page adds to the envelope.
func (d routeDoc) extra(v any) routeDoc { d.Extra = v; return d }

// media sets the media types of the answer; any but JSON is documented as
// text.
func (d routeDoc) media(types ...string) routeDoc { d.Media = types; return d }

// Statuses many routes answer: 409 a write the record's state refuses, 502
// and 504 a site or target that failed or did not answer in time.
var (
	conflict  = []int{http.StatusConflict}
	siteWaits = []int{http.StatusBadGateway, http.StatusGatewayTimeout}
)

// routeDocs documents every route of the hub API, including routes of the
// spec that later features add (at the end, without types).
var routeDocs = map[string]routeDoc{
	// Auth and identity.
	"POST /api/auth/token/":            docOne("auth", "Obtain an access and a refresh token", tokenPairResponse{}).in(tokenInput{}).public().errs(http.StatusUnauthorized, http.StatusTooManyRequests),
	"POST /api/auth/token/refresh/":    docOne("auth", "Obtain a new access token from a refresh token", accessTokenResponse{}).in(refreshTokenInput{}).public().errs(http.StatusUnauthorized, http.StatusTooManyRequests),
	"POST /api/auth/token/verify/":     docOne("auth", "Verify a token (201 with an empty object when valid)", emptyResponse{}).in(verifyTokenInput{}).public().errs(http.StatusUnauthorized),
	"GET /api/auth/token/publickey/":   docOne("auth", "The public key that verifies tokens", publicKeyResponse{}).public(),
	"POST /api/auth/idp/token/":        docOne("auth", "Exchange an identity-provider token for hub tokens", idpTokenResponse{}).in(idpTokenInput{}).public().errs(http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusBadGateway),
	"GET /api/auth/clientkeys/":        docPage("auth", "List client keys", clientKeyResponse{}),
	"POST /api/auth/clientkeys/":       docOne("auth", "Create a client key (api_key shown once)", newClientKeyResponse{}).in(clientKeyInput{}),
	"GET /api/auth/clientkeys/{}/":     docOne("auth", "Get a client key", clientKeyResponse{}),
	"PATCH /api/auth/clientkeys/{}/":   docOne("auth", "Rename a client key", clientKeyResponse{}).in(clientKeyInput{}),
	"DELETE /api/auth/clientkeys/{}/":  docDelete("auth", "Revoke a client key"),
	"GET /api/users/":                  docPage("users", "List users", userResponse{}),
	"POST /api/users/":                 docOne("users", "Create a user", userResponse{}).in(changes.UserInput{}),
	"POST /api/users/change_password/": docOne("users", "Change the caller's password", detailResponse{}).in(changePasswordInput{}).errs(http.StatusTooManyRequests),
	"POST /api/users/sync/":            docOne("users", "Sync NAS users on each site", nasSyncResponse{}).with(http.StatusAccepted),
	"GET /api/users/{}/":               docOne("users", "Get a user", userResponse{}),
	"PATCH /api/users/{}/":             docOne("users", "Update a user", userResponse{}).in(changes.UserInput{}),
	"DELETE /api/users/{}/":            docDelete("users", "Delete a user (not oneself)").errs(conflict...),
	"POST /api/users/{}/activate/":     docOne("users", "Activate a user", userResponse{}),
	"POST /api/users/{}/deactivate/":   docOne("users", "Deactivate a user", userResponse{}),
	"GET /api/my-permissions/":         docList("users", "The caller's permissions (one element)", myPermissionsResponse{}),
	"GET /api/groups/":                 docPage("users", "List groups", groupResponse{}),
	"POST /api/groups/":                docOne("users", "Create a group", groupResponse{}).in(changes.GroupInput{}).errs(conflict...),
	"GET /api/groups/{}/":              docOne("users", "Get a group", groupResponse{}),
	"PATCH /api/groups/{}/":            docOne("users", "Update a group (not renaming a built-in one)", groupResponse{}).in(changes.GroupInput{}).errs(conflict...),
	"DELETE /api/groups/{}/":           docDelete("users", "Delete a group (not a built-in one)").errs(conflict...),
	"GET /api/permissions/":            docPage("users", "List permissions", permissionResponse{}),
	"GET /api/permissions/{}/":         docOne("users", "Get a permission", permissionResponse{}),
	"GET /api/health/":                 docOne("health", "Health of the hub, its sites, nodes and queues", healthResponse{}),

	// Reference.
	"GET /api/schema/": docOne("reference", "This OpenAPI document (JSON; ?format=yaml for YAML)", map[string]any{}).public().q("format").media("application/json", "application/yaml"),
	"GET /api/docs/":   docOne("reference", "Interactive API reference (Swagger UI)", "").public().media("text/html"),
	"GET /api/docs/{}": docOne("reference", "Assets of the interactive API reference", "").public().media("*/*"),

	// Catalogue: features, file status types, certificate lifetimes, tags.
	"GET /api/features/":             docPage("catalogue", "List feature flags", featureResponse{}),
	"GET /api/features/{}/":          docOne("catalogue", "Get a feature flag", featureResponse{}),
	"PATCH /api/features/{}/":        docOne("catalogue", "Switch a feature flag (enabled)", featureResponse{}).in(featurePatchInput{}),
	"GET /api/filestatustypes/":      docPage("catalogue", "List file status types", fileStatusTypeResponse{}),
	"GET /api/filestatustypes/{}/":   docOne("catalogue", "Get a file status type", fileStatusTypeResponse{}),
	"PATCH /api/filestatustypes/{}/": docOne("catalogue", "Change a file status type's label and colours", fileStatusTypeResponse{}).in(fileStatusTypePatchInput{}),
	"GET /api/pki/lifetime/":         docList("catalogue", "List certificate lifetimes", certificateLifetimeResponse{}),
	"GET /api/pki/lifetime/{}/":      docOne("catalogue", "Get a certificate lifetime", certificateLifetimeResponse{}),
	"PATCH /api/pki/lifetime/{}/":    docOne("catalogue", "Change a certificate lifetime (days)", certificateLifetimeResponse{}).in(certificateLifetimePatchInput{}),
	"POST /api/pki/site/":            docOne("catalogue", "Issue a client certificate for a site or node from the hub CA", siteCertificateResponse{}).in(siteCertificateInput{}),
	"GET /api/tags/":                 docList("catalogue", "List tags", tagResponse{}, "filter"),

	// Operations: alerts, actions, nodes, queues.
	"GET /api/alerts/":      docList("operations", "List alerts, newest first", alertResponse{}, "name", "node", "site", "severity", "summary", "timestamp", "suppressed"),
	"GET /api/alerts/{}/":   docOne("operations", "Get an alert", alertResponse{}),
	"PATCH /api/alerts/{}/": docOne("operations", "Suppress or unsuppress an alert", alertResponse{}).in(alertPatchInput{}),
	"GET /api/actions/":     docPage("operations", "List actions", actionResponse{}),
	"POST /api/actions/":    docOne("operations", "Record an action and start it", actionDetailResponse{}).in(actionInput{}),
	"GET /api/actions/{}/":  docOne("operations", "Get an action", actionDetailResponse{}),
	"GET /api/nodes/":       docPage("operations", "List worker nodes", nodeResponse{}, "site"),
	"GET /api/nodes/{}/":    docOne("operations", "Get a worker node", nodeResponse{}),
	"PATCH /api/nodes/{}/":  docOne("operations", "Update a worker node", nodeResponse{}).in(nodePatchInput{}),
	"DELETE /api/nodes/{}/": docDelete("operations", "Forget a worker node"),
	"GET /api/queues/":      docPage("operations", "List queues", queueResponse{}, "site"),
	"GET /api/queues/{}/":   docOne("operations", "Get a queue", queueResponse{}),

	// Configuration and settings.
	"GET /api/configurations/":             docOne("settings", "Get the configuration", models.Configuration{}),
	"PATCH /api/configurations/":           docOne("settings", "Change the configuration", models.Configuration{}).in(models.Configuration{}),
	"GET /api/settings/":                   docList("settings", "List global settings", settingResponse{}),
	"PATCH /api/settings/":                 docOne("settings", "Set or delete global settings and send them to every site", settingsTasksResponse{}).with(http.StatusAccepted).in(settingsInput{}),
	"POST /api/settings/sync/":             docOne("settings", "Send the settings to every site, or to ?site=", settingsTasksResponse{}).with(http.StatusAccepted).q("site"),
	"GET /api/sites/{}/settings/":          docOne("settings", "Settings in force at a site (?flat=true: key to value)", anyOf{[]settingResponse{}, map[string]json.RawMessage{}}, "flat"),
	"PATCH /api/sites/{}/settings/":        docOne("settings", "Set or delete a site's own settings and send them", settingsTaskRef{}).with(http.StatusAccepted).in(settingsInput{}),
	"POST /api/sites/{}/settings/refresh/": docOne("settings", "Import the settings a site applies that the hub lacks", settingsTaskRef{}).with(http.StatusAccepted),
	"GET /api/settingstasks/":              docPage("settings", "List settings tasks", settingsTaskResponse{}, "tasktype", "state", "job_id"),
	"GET /api/settingstasks/{}/":           docOne("settings", "Get a settings task", settingsTaskDetailResponse{}),

	// Workflow definitions.
	"GET /api/workflows/":       docPage("workflows", "List workflow definitions", workflowResponse{}, "enabled", "visible"),
	"POST /api/workflows/":      docOne("workflows", "Create a workflow definition", workflowResponse{}).in(changes.WorkflowDefInput{}),
	"GET /api/workflows/{}/":    docOne("workflows", "Get a workflow definition", workflowResponse{}),
	"PATCH /api/workflows/{}/":  docOne("workflows", "Update a workflow definition", workflowResponse{}).in(changes.WorkflowDefInput{}),
	"DELETE /api/workflows/{}/": docDelete("workflows", "Delete a workflow definition (not a built-in one)").errs(conflict...),

	// Sites and storage.
	"GET /api/sites/":                     docPage("sites", "List sites", siteResponse{}),
	"POST /api/sites/":                    docOne("sites", "Create a site", siteResponse{}).in(changes.SiteInput{}),
	"GET /api/sites/{}/":                  docOne("sites", "Get a site", siteResponse{}),
	"PATCH /api/sites/{}/":                docOne("sites", "Update a site", siteResponse{}).in(changes.SiteInput{}),
	"DELETE /api/sites/{}/":               docDelete("sites", "Delete a site (not one holding spaces)").errs(conflict...),
	"GET /api/sites/{}/health/":           docOne("sites", "Health of a site", siteHealthResponse{}),
	"POST /api/sites/{}/refresh/":         docOne("sites", "Refresh a site's counts and storage (202 when it takes longer than the wait)", siteResponse{}).with(http.StatusOK).also(http.StatusAccepted, taskRef{}).errs(siteWaits...),
	"GET /api/spaces/":                    docPage("spaces", "List spaces", spaceResponse{}, "site_id", "search_keyword"),
	"POST /api/spaces/":                   docOne("spaces", "Create a space", spaceResponse{}).in(changes.SpaceInput{}),
	"GET /api/spaces/{}/":                 docOne("spaces", "Get a space", spaceResponse{}, "site_id", "search_keyword"),
	"PATCH /api/spaces/{}/":               docOne("spaces", "Update a space", spaceResponse{}).in(changes.SpaceInput{}).errs(conflict...),
	"DELETE /api/spaces/{}/":              docDelete("spaces", "Delete a space (not an immutable or shared one)").errs(conflict...),
	"GET /api/spaces/{}/files/":           docPage("spaces", "Browse a space's files on its sites (a site that fails is an entry with its error)", anyOf{fileResponse{}, fileErrorResponse{}}, "path", "site", "details", "custom_timeout", "raise_exception", "type", "restricted", "cache_ttl", "custom_refresh_period", "check_available_sites").errs(siteWaits...),
	"GET /api/storagepools/":              docPage("storage", "List storage pools", storagePoolResponse{}, "site"),
	"GET /api/storagepools/{}/":           docOne("storage", "Get a storage pool", storagePoolResponse{}),
	"GET /api/servers/":                   docPage("storage", "List servers", serverResponse{}, "site"),
	"GET /api/servers/{}/":                docOne("storage", "Get a server", serverResponse{}),
	"GET /api/datastores/":                docPage("storage", "List data stores", datastoreResponse{}),
	"POST /api/datastores/":               docOne("storage", "Create a data store", datastoreResponse{}).in(changes.DatastoreInput{}).errs(http.StatusServiceUnavailable),
	"GET /api/datastores/{}/":             docOne("storage", "Get a data store", datastoreResponse{}),
	"PATCH /api/datastores/{}/":           docOne("storage", "Update a data store", datastoreResponse{}).in(changes.DatastoreInput{}).errs(http.StatusServiceUnavailable),
	"DELETE /api/datastores/{}/":          docDelete("storage", "Delete a data store"),
	"GET /api/ipaddresses/":               docPage("storage", "List IP addresses", ipAddressResponse{}, "datastore_id"),
	"POST /api/ipaddresses/":              docOne("storage", "Create an IP address", ipAddressResponse{}).in(changes.IPAddressInput{}),
	"GET /api/ipaddresses/{}/":            docOne("storage", "Get an IP address", ipAddressResponse{}),
	"PATCH /api/ipaddresses/{}/":          docOne("storage", "Update an IP address", ipAddressResponse{}).in(changes.IPAddressInput{}),
	"DELETE /api/ipaddresses/{}/":         docDelete("storage", "Delete an IP address"),
	"GET /api/buckets/":                   docPage("storage", "List buckets", bucketResponse{}),
	"POST /api/buckets/":                  docOne("storage", "Create a bucket", bucketResponse{}).in(changes.BucketInput{}).errs(http.StatusServiceUnavailable),
	"GET /api/buckets/{}/":                docOne("storage", "Get a bucket", bucketResponse{}),
	"PATCH /api/buckets/{}/":              docOne("storage", "Update a bucket (not one being deleted)", bucketResponse{}).in(changes.BucketInput{}).errs(http.StatusConflict, http.StatusServiceUnavailable),
	"DELETE /api/buckets/{}/":             docOne("storage", "Delete a bucket: its settings on every site, then the record", deletedBucketResponse{}).with(http.StatusAccepted),
	"GET /api/external_targets/":          docPage("storage", "List external targets", externalTargetResponse{}, "bucket"),
	"POST /api/external_targets/":         docOne("storage", "Create an external target", externalTargetResponse{}).in(changes.ExternalTargetInput{}).errs(http.StatusServiceUnavailable),
	"GET /api/external_targets/{}/":       docOne("storage", "Get an external target", externalTargetResponse{}),
	"PATCH /api/external_targets/{}/":     docOne("storage", "Update an external target", externalTargetResponse{}).in(changes.ExternalTargetInput{}).errs(http.StatusServiceUnavailable),
	"DELETE /api/external_targets/{}/":    docDelete("storage", "Delete an external target"),
	"GET /api/external_targets/{}/files/": docOne("storage", "List an external target's contents", targetListingResponse{}, "path", "max_items", "marker").errs(append(conflict, siteWaits...)...),
	"GET /api/nfsshares/":                 docList("storage", "List NFS shares", nfsShareResponse{}, "space"),
	"POST /api/nfsshares/":                docOne("storage", "Create an NFS share", nfsShareResponse{}).in(changes.NFSShareInput{}),
	"GET /api/nfsshares/{}/":              docOne("storage", "Get an NFS share", nfsShareResponse{}),
	"PATCH /api/nfsshares/{}/":            docOne("storage", "Update an NFS share", nfsShareResponse{}).in(changes.NFSShareInput{}),
	"DELETE /api/nfsshares/{}/":           docDelete("storage", "Delete an NFS share"),
	"GET /api/smbshares/":                 docList("storage", "List SMB shares", smbShareResponse{}, "space"),
	"POST /api/smbshares/":                docOne("storage", "Create an SMB share", smbShareResponse{}).in(changes.SMBShareInput{}),
	"GET /api/smbshares/{}/":              docOne("storage", "Get an SMB share", smbShareResponse{}),
	"PATCH /api/smbshares/{}/":            docOne("storage", "Update an SMB share", smbShareResponse{}).in(changes.SMBShareInput{}),
	"DELETE /api/smbshares/{}/":           docDelete("storage", "Delete an SMB share"),

	// Jobs and tasks.
	"POST /api/file/workflow/":       docOne("jobs", "Run a workflow on paths of a site (starts a job)", runWorkflowResponse{}).in(runWorkflowInput{}),
	"GET /api/jobs/":                 docPage("jobs", "List jobs", jobResponse{}, jobFilters...).extra(jobsPage{}),
	"POST /api/jobs/":                docOne("jobs", "Create a job (older revision body: jobtype)", jobResponse{}).in(runWorkflowInput{}),
	"GET /api/jobs/jobtype_choices/": docPage("jobs", "Custom job types", jobTypeChoice{}),
	"GET /api/jobs/recent/":          docList("jobs", "The most recent jobs", jobResponse{}, append([]string{"limit", "n"}, jobFilters...)...),
	"GET /api/jobs/stats/":           docOne("jobs", "Job statistics (same filters as the job list)", models.JobSummary{}, jobFilters...),
	"GET /api/jobs/{}/":              docOne("jobs", "Get a job", jobResponse{}),
	"DELETE /api/jobs/{}/":           docDelete("jobs", "Delete a finished job").errs(conflict...),
	"POST /api/jobs/{}/cancel/":      docOne("jobs", "Cancel a job's pending and started tasks", jobResponse{}).with(http.StatusAccepted).errs(conflict...),
	"POST /api/jobs/{}/pause/":       docOne("jobs", "Pause a job", jobResponse{}).with(http.StatusAccepted).errs(conflict...),
	"POST /api/jobs/{}/resume/":      docOne("jobs", "Resume a paused job", jobResponse{}).with(http.StatusAccepted).errs(conflict...),
	"POST /api/jobs/{}/resubmit/":    docOne("jobs", "Resubmit what a finished job failed (200: nothing to redo)", jobResponse{}).with(http.StatusAccepted).also(http.StatusOK, jobResponse{}),
	"GET /api/jobs/{}/files/":        docPage("jobs", "Files of a job", jobStatItem{}, "category"),
	"GET /api/jobs/{}/progress/":     docOne("jobs", "Completion percentage of a job", jobProgressResponse{}),
	"GET /api/jobs/{}/statistics/":   docOne("jobs", "Statistics of all files of a job", jobStatisticsResponse{}),
	"GET /api/jobstats/":             docPage("jobs", "List per-path job stats (?history=true: their history)", anyOf{jobStatItem{}, jobStatHistoryResponse{}}, "state", "job", "path", "history"),
	"GET /api/jobstats/{}/":          docOne("jobs", "Get a job stat", jobStatResponse{}),
	"GET /api/jobstats/{}/history/":  docPage("jobs", "History of a job stat's path", jobStatHistoryResponse{}, "state", "job", "path", "history"),
	"GET /api/tasks/":                docPage("jobs", "List tasks", taskResponse{}, "tasktype", "task_id", "state", "job_id", "internal"),
	"GET /api/tasks/{}/":             docOne("jobs", "Get a task", taskDetailResponse{}),
	"GET /api/tasks/{}/files/":       docOne("jobs", "A task with a page of the outcomes of its paths", taskFilesResponse{}, "page", "page_size", "state", "type", "site"),
	"GET /api/analytics/":            docPage("files", "What fills a folder of a site: files and bytes by state, age, size and type; its largest children (children=true); download=csv answers CSV", analyticsChildResponse{}, "path", "site", "children", "cache_ttl", "custom_timeout", "raise_exception", "download").extra(analyticsPage{}).media("application/json", "text/csv").errs(siteWaits...),
	"GET /api/file/":                 docPage("files", "Browse a directory of a site", fileResponse{}, "path", "site", "details", "custom_timeout", "type", "restricted", "cache_ttl").extra(browsePage{}).errs(siteWaits...),

	"GET /api/schedules/":                    docPage("schedules", "List schedules", scheduleResponse{}, "site_id", "space_id"),
	"POST /api/schedules/":                   docOne("schedules", "Create a schedule", scheduleResponse{}).in(changes.ScheduleInput{}),
	"GET /api/schedules/{}/":                 docOne("schedules", "Get a schedule", scheduleResponse{}),
	"PATCH /api/schedules/{}/":               docOne("schedules", "Update a schedule", scheduleResponse{}).in(changes.ScheduleInput{}),
	"DELETE /api/schedules/{}/":              docDelete("schedules", "Delete a schedule"),
	"POST /api/schedules/{}/run/":            docOne("schedules", "Run a schedule now", scheduleResponse{}).with(http.StatusOK),
	"GET /api/schedules/{}/workflows/":       docPage("schedules", "List a schedule's workflows", scheduleWorkflowResponse{}),
	"POST /api/schedules/{}/workflows/":      docOne("schedules", "Add a workflow to a schedule", scheduleWorkflowResponse{}).in(changes.ScheduleWorkflowInput{}),
	"GET /api/schedules/{}/workflows/{}/":    docOne("schedules", "Get a schedule workflow", scheduleWorkflowResponse{}),
	"PATCH /api/schedules/{}/workflows/{}/":  docOne("schedules", "Update a schedule workflow", scheduleWorkflowResponse{}).in(changes.ScheduleWorkflowInput{}),
	"DELETE /api/schedules/{}/workflows/{}/": docDelete("schedules", "Remove a workflow from a schedule"),
	"GET /api/automatedschedules/":           docPage("schedules", "List automated schedules", automatedScheduleResponse{}),
	"GET /api/policies/":                     docPage("policies", "List policies", policyResponse{}),
	"POST /api/policies/":                    docOne("policies", "Create a policy", policyResponse{}).in(changes.PolicyInput{}),
	"GET /api/policies/{}/":                  docOne("policies", "Get a policy", policyResponse{}),
	"PATCH /api/policies/{}/":                docOne("policies", "Update a policy", policyResponse{}).in(changes.PolicyInput{}),
	"DELETE /api/policies/{}/":               docDelete("policies", "Delete a policy"),
	"POST /api/policies/{}/run/":             docOne("policies", "Run a policy now", policyRunResponse{}).with(http.StatusAccepted),

	"GET /api/filesets/": docList("storage", "A site's filesets: its spaces' folders", filesetResponse{}, "site"),

	// Routes of the spec not served yet.
	"POST /api/search/":                docOne("search", "Start a search across sites", searchResponse{}).in(changes.SearchRequest{}),
	"GET /api/search/{}/":              docPage("search", "Results of a search so far (?group_by_name=true: one row per name)", anyOf{searchResultResponse{}, searchNameResponse{}}, "sort", "group_by_name").extra(searchPage{}),
	"DELETE /api/search/{}/":           docDelete("search", "Stop and delete a search"),
	"PATCH /api/search/metadata/":      docOne("search", "Set user metadata and tags on files of a site", metadataResponse{}).in(changes.MetadataRequest{}).errs(siteWaits...),
	"GET /api/search/metadata_fields/": docPage("search", "List the metadata fields in use", metadataFieldResponse{}),
}

// Parameters whose values are not plain text, by name (a name means the
// same wherever the API takes it); the rest are strings.
var (
	integerParams = []string{"id", "page", "page_size", "site_id", "space_id", "queue_id", "job_id", "job", "datastore_id",
		"cache_ttl", "custom_timeout", "analytics_timeout", "custom_refresh_period", "max_items"}
	booleanParams = []string{"hide_noop", "history", "group_by_name", "raise_exception", "restricted", "check_available_sites",
		"details", "flat", "internal", "recursive", "children"}
)

func paramSchema(name string) *openapi3.Schema {
	switch {
	case slices.Contains(integerParams, name):
		return openapi3.NewInt64Schema()
	case slices.Contains(booleanParams, name):
		return openapi3.NewBoolSchema()
	}
	return openapi3.NewStringSchema()
}

// jobFilters are the query parameters of the job list, which its
// statistics and recent jobs share.
var jobFilters = []string{"created", "created_time_from", "created_time_to", "completed_time_from", "completed_time_to",
	"workflow", "jobtype", "state", "owner_ids", "clientkey_ids", "schedule_ids", "site_id", "site", "input_paths_prefix",
	"search_keyword", "hide_noop", "queue", "queue_id"}

// errorStatuses describes the error statuses; every error body is the
// Error schema (docs/api-conventions.md).
var errorStatuses = map[int]string{
	http.StatusBadRequest:            "Invalid input: {field: [messages]}, or {detail} for a body that is not JSON",
	http.StatusUnauthorized:          "Not authenticated",
	http.StatusForbidden:             "Permission denied",
	http.StatusNotFound:              "Not found",
	http.StatusConflict:              "The record's state refuses the change",
	http.StatusRequestEntityTooLarge: "The body is over 8 MiB",
	http.StatusTooManyRequests:       "Too many failed attempts: retry after Retry-After seconds",
	http.StatusInternalServerError:   "Internal error, logged with the request_id answered",
	http.StatusBadGateway:            "A site, target or identity provider failed",
	http.StatusServiceUnavailable:    "The job engine (Temporal) did not answer in time, or the hub has no secret key configured to store secrets: try again shortly",
	http.StatusGatewayTimeout:        "A site or target did not answer in time",
}

// errorSchema is the body of every error: detail, request_id with a 500,
// or a list of messages per field that failed validation. It is written
// by hand: web renders errors from several types.
func errorSchema() *openapi3.Schema {
	s := openapi3.NewObjectSchema().
		WithProperty("detail", openapi3.NewStringSchema()).
		WithProperty("request_id", openapi3.NewStringSchema())
	s.Properties["request_id"].Value.Description = "With a 500: the id the cause is logged with."
	s.AdditionalProperties = openapi3.AdditionalProperties{Schema: arrayOf(inline(openapi3.NewStringSchema()))}
	s.Description = "An error: detail, or the messages of each field that failed validation ({\"name\": [\"This field is required.\"]})."
	return s
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

// successStatus is the status of d's answer.
func (d routeDoc) successStatus(method string) int {
	switch {
	case d.Status != 0:
		return d.Status
	case method == http.MethodPost:
		return http.StatusCreated
	case method == http.MethodDelete:
		return http.StatusNoContent
	}
	return http.StatusOK
}

// bodySchema is the schema of an answer of d's shape with body of body's
// type.
func (g *schemaGen) bodySchema(d routeDoc, body any) *openapi3.SchemaRef {
	item := g.response(body)
	switch d.Shape {
	case shapeList:
		return arrayOf(item)
	case shapePage:
		page := g.object(reflect.TypeFor[web.PageResponse](), false)
		page.Properties["results"] = arrayOf(item)
		if d.Extra != nil {
			extra := g.object(reflect.TypeOf(d.Extra), false)
			for name, p := range extra.Properties {
				page.Properties[name] = p
			}
			page.Required = append(page.Required, extra.Required...)
		}
		return inline(page)
	}
	return item
}

func arrayOf(item *openapi3.SchemaRef) *openapi3.SchemaRef {
	s := openapi3.NewArraySchema()
	s.Items = item
	return inline(s)
}

// content is the content of an answer: JSON with schema, and text in
// other media types d lists.
func (d routeDoc) content(schema *openapi3.SchemaRef) openapi3.Content {
	if d.Media == nil {
		return openapi3.NewContentWithJSONSchemaRef(schema)
	}
	out := openapi3.Content{}
	for _, m := range d.Media {
		out[m] = openapi3.NewMediaType().WithSchema(openapi3.NewStringSchema())
		if m == "application/json" {
			out[m] = openapi3.NewMediaType().WithSchemaRef(schema)
		}
	}
	return out
}

// openAPIOperation builds the OpenAPI operation of one route.
func (g *schemaGen) openAPIOperation(method, ginPath string) *openapi3.Operation {
	d, ok := lookupRouteDoc(method, ginPath)
	if !ok {
		// Undocumented: still listed, from the path alone, without a summary.
		d = routeDoc{Tag: strings.Split(strings.TrimPrefix(ginPath, "/api/"), "/")[0]}
	}
	op := openapi3.NewOperation()
	op.OperationID = strings.ToLower(method) + strings.NewReplacer("/", "_", ":", "", "*", "", "-", "_").Replace(strings.TrimSuffix(ginPath, "/"))
	op.Tags = []string{d.Tag}
	op.Summary = d.Summary
	if !ok {
		op.Extensions = map[string]any{"x-undocumented": true}
	}
	for _, m := range ginPathParam.FindAllStringSubmatch(ginPath, -1) {
		op.AddParameter(openapi3.NewPathParameter(m[1]).WithSchema(paramSchema(m[1])))
	}
	query := d.Query
	if d.Shape == shapePage {
		query = append([]string{"page", "page_size"}, query...)
	}
	for _, q := range query {
		op.AddParameter(openapi3.NewQueryParameter(q).WithSchema(paramSchema(q)))
	}
	if d.In != nil {
		op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().
			WithRequired(method != http.MethodPatch).WithJSONSchemaRef(g.request(d.In))}
	}

	op.Responses = openapi3.NewResponses()
	successes := map[int]any{d.successStatus(method): d.Body}
	for status, body := range d.Also {
		successes[status] = body
	}
	for status, body := range successes {
		resp := openapi3.NewResponse().WithDescription(http.StatusText(status))
		if body != nil {
			resp.Content = d.content(g.bodySchema(d, body))
		}
		op.AddResponse(status, resp)
	}
	errs := []int{http.StatusBadRequest, http.StatusNotFound, http.StatusInternalServerError}
	if !d.Public {
		// Any authenticated route may reach Temporal (a job's control, a
		// change's start, a site's answer), which may be down.
		errs = append(errs, http.StatusUnauthorized, http.StatusForbidden, http.StatusServiceUnavailable)
	}
	if d.In != nil {
		errs = append(errs, http.StatusRequestEntityTooLarge)
	}
	errorRef := openapi3.NewSchemaRef("#/components/schemas/Error", nil)
	for _, status := range append(errs, d.Errors...) {
		op.AddResponse(status, openapi3.NewResponse().WithDescription(errorStatuses[status]).
			WithContent(openapi3.NewContentWithJSONSchemaRef(errorRef)))
	}
	if d.Public {
		op.Security = openapi3.NewSecurityRequirements()
	}
	return op
}

// openAPIDocument builds the document over the routes the engine serves.
func openAPIDocument(routes gin.RoutesInfo) *openapi3.T {
	g := newSchemaGen()
	doc := &openapi3.T{
		OpenAPI: "3.0.3",
		Info: &openapi3.Info{Title: "Hub API", Version: "1",
			Description: "The hub's JSON API. Conventions (errors, pagination, statuses): docs/api-conventions.md; " +
				"how this document is made: docs/openapi.md."},
		Servers: openapi3.Servers{{URL: "/"}},
		Paths:   openapi3.NewPaths(),
		Components: &openapi3.Components{
			Schemas: g.schemas,
			SecuritySchemes: openapi3.SecuritySchemes{
				"bearerAuth": {Value: openapi3.NewJWTSecurityScheme()},
				"apiKey": {Value: openapi3.NewSecurityScheme().WithType("apiKey").WithIn("header").WithName("Authorization").
					WithDescription("Client key, sent as: Api-Key <key>")},
			},
		},
		Security: openapi3.SecurityRequirements{{"bearerAuth": []string{}}, {"apiKey": []string{}}},
	}
	g.schemas["Error"] = inline(errorSchema())
	var tags []string
	for _, r := range routes {
		op := g.openAPIOperation(r.Method, r.Path)
		doc.AddOperation(ginPathParam.ReplaceAllString(r.Path, "{$1}"), r.Method, op)
		if !slices.Contains(tags, op.Tags[0]) {
			tags = append(tags, op.Tags[0])
		}
	}
	slices.Sort(tags)
	for _, t := range tags {
		doc.Tags = append(doc.Tags, &openapi3.Tag{Name: t})
	}
	return doc
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
