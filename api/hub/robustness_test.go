package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/worker"
)

// TestNoServerErrorOnBadInput sends every route of the API garbage path
// parameters, bodies and query strings, as the superuser and as a plain
// user, and requires that none is answered with a 5xx or a non-JSON body:
// bad input is always the client's fault and must be told so clearly.
func TestNoServerErrorOnBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := apitest.New(t, "sqlite")
	site, err := models.EnsureSite(ctx, e.DB, "s1")
	require.NoError(t, err)
	e.StartHubWorker()
	e.StartSiteWorker(worker.SiteConfig{Site: "s1", Queue: "default", Node: "n", Root: t.TempDir(), HeartbeatInterval: time.Second})
	// Endpoints that run a short workflow answer 202 after this wait, which
	// bounds the run time of the test if a site is slow.
	e.API.WorkflowWait = 3 * time.Second
	plain := apitest.Bearer(e.CreateUser("plain"))
	admin := apitest.Bearer(e.Admin)
	rbSeed(t, e)

	routes := e.API.Handler().(*gin.Engine).Routes()
	rank := map[string]int{http.MethodGet: 0, http.MethodPost: 1, http.MethodPut: 2, http.MethodPatch: 3, http.MethodDelete: 4}
	// Deletes go last so that the records the other requests address
	// exist for as long as possible.
	sort.SliceStable(routes, func(i, j int) bool {
		if rank[routes[i].Method] != rank[routes[j].Method] {
			return rank[routes[i].Method] < rank[routes[j].Method]
		}
		return routes[i].Path < routes[j].Path
	})

	run := &rbRun{e: e, restore: rbRestore(t, e, site.ID), bodies: rbBodies(), gen: newRBGen(), failures: newRBFailures()}
	start := time.Now()
	for _, who := range []rbUser{{"plain", plain}, {"admin", admin}} {
		for _, rt := range routes {
			// DELETE /users/admin/ as admin is not skipped: the API refuses
			// to delete one's own account (409), which is what we check.
			paths, real := rbPaths(rt.Path)
			for i, p := range paths {
				run.route(who, rt, p, real[i])
			}
		}
	}
	t.Logf("%d requests over %d routes in %s", run.n, len(routes), time.Since(start).Round(time.Second))
	run.failures.report(t)
}

type rbUser struct{ name, auth string }

// rbRun sends the garbage and records the failures.
type rbRun struct {
	e        *apitest.Env
	restore  func(testing.TB)
	bodies   []string
	gen      *rbGen
	failures *rbFailures
	n        int
}

func (run *rbRun) send(who rbUser, rt gin.RouteInfo, path string, body *string) apitest.Response {
	var b any
	if body != nil && *body != "" {
		b = *body
	}
	r := run.e.Do(rt.Method, path, who.auth, b)
	run.n++
	run.failures.check(who.name, rt.Method, rt.Path, path, body, r)
	if r.Status < 300 && rt.Method != http.MethodGet {
		run.restore(run.e.T)
	}
	return r
}

// route sends every input to one path of a route. A path that cannot name
// a record (real false) gets only a few inputs: they show that the bad
// path wins cleanly, and the large inputs are kept for the paths where
// they reach the validation, which keeps the runtime short. So does a
// route that refuses the user (403): its permission check runs before
// any input is read.
func (run *rbRun) route(who rbUser, rt gin.RouteInfo, p string, real bool) {
	queries := rbQueries(rt.Method)
	if run.send(who, rt, p+queries[1], nil).Status == http.StatusForbidden {
		real = false
	}
	if rt.Method == http.MethodGet || rt.Method == http.MethodDelete {
		if !real {
			queries = queries[:2]
		}
		for _, q := range queries {
			if q != queries[1] {
				run.send(who, rt, p+q, nil)
			}
		}
		return
	}
	bodies := run.bodies
	if !real {
		bodies = []string{"", "{", `{"name": 5}`, rbAllFields("-1")}
	}
	for _, b := range bodies {
		run.send(who, rt, p, &b)
	}
	if !real {
		return
	}
	for class := range rbClasses {
		for _, anchored := range []bool{false, true} {
			// Learn the route's field types from its 400s so that the body
			// gets past decoding, then leave out the fields the validation
			// refuses until the rest is accepted: the values no rule
			// catches reach the database. Anchored bodies name real
			// records (site, workflow, space...) so that creates get there
			// too.
			key, dropped := rt.Method+" "+rt.Path, map[string]bool{}
			for try := 0; try < 25; try++ {
				b := run.gen.body(key, class, dropped, anchored)
				r := run.send(who, rt, p, &b)
				if r.Status != http.StatusBadRequest || (!run.gen.learn(key, r.Body) && !rbDrop(r.Body, dropped)) {
					break
				}
			}
		}
	}
}

// rbRestore returns a function that puts back the admin and the real
// site: a request may legitimately change them (a PATCH that passes
// validation), and the remaining requests must still reach the handlers'
// validation instead of a 401 or a 404.
func rbRestore(t testing.TB, e *apitest.Env, siteID int64) func(t testing.TB) {
	ctx := context.Background()
	adminUser, err := models.GetUser(ctx, e.DB, "admin")
	require.NoError(t, err)
	return func(t testing.TB) {
		_, err := e.DB.NewUpdate().Model((*models.User)(nil)).
			Set("username = ?, is_active = ?, is_superuser = ?", "admin", true, true).
			Where("id = ?", adminUser.ID).Exec(ctx)
		require.NoError(t, err)
		_, err = e.DB.NewUpdate().Model((*models.Site)(nil)).Set("name = ?", "s1").Where("id = ?", siteID).Exec(ctx)
		require.NoError(t, err)
	}
}

// rbSeed creates one record of each kind so that id 1 addresses a real
// record and bodies reach the validation of updates.
func rbSeed(t testing.TB, e *apitest.Env) {
	ctx := context.Background()
	post := func(path string, body map[string]any) {
		r := e.AsAdmin(http.MethodPost, path, body)
		require.Less(t, r.Status, 300, "seed %s: %s", path, r.Body)
	}
	post("/api/datastores/", map[string]any{"name": "ds", "type": "nfs"})
	post("/api/ipaddresses/", map[string]any{"ipaddr": "10.0.0.1", "datastore": 1})
	post("/api/buckets/", map[string]any{"name": "b", "storage_type": "filesystem"})
	post("/api/external_targets/", map[string]any{"name": "t", "storage_type": "filesystem", "local_file_regex": ".*",
		"migration_target_folder": t.TempDir(), "available_on_sites": []int64{1}})
	post("/api/spaces/", map[string]any{"name": "sp", "mountpoint": "/spaces/sp"})
	post("/api/nfsshares/", map[string]any{"name": "nfs", "space": 1, "clients": []any{map[string]any{"hosts": "10.0.0.0/24"}}})
	post("/api/smbshares/", map[string]any{"name": "smb", "space": 1, "read_only": false, "visible": true})
	post("/api/auth/clientkeys/", map[string]any{"name": "k"})
	post("/api/actions/", map[string]any{"action": "maintenance"})
	// A real job on the real site: it runs on its own, the test never
	// waits for it.
	post("/api/file/workflow/", map[string]any{"site": "s1", "workflow": "premigrate", "paths": []string{"/"}})
	_, err := models.RaiseAlert(ctx, e.DB, models.Alert{Name: "al", Site: "s1", Severity: models.AlertSeverities[0]})
	require.NoError(t, err)
}

var rbParam = regexp.MustCompile(`[:*][A-Za-z_]+`)

// rbPaths returns the route's path with every parameter replaced by each
// garbage or real value in turn; real tells the paths that may name an
// existing record: id 1 of the seeded records for an :id, the real user
// for a :username, and the real site, user or id 1 for other parameters.
func rbPaths(route string) (paths []string, real []bool) {
	params := rbParam.FindAllString(route, -1)
	if len(params) == 0 {
		return []string{route}, []bool{true}
	}
	values := []string{"1", "0", "-1", "abc", "99999999999999999999", "%2e%2e", strings.Repeat("p", 300), "s1", "admin", "a%00b"}
	for _, v := range values {
		paths = append(paths, rbParam.ReplaceAllString(route, v))
		switch params[len(params)-1] {
		case ":id":
			real = append(real, v == "1")
		case ":username":
			real = append(real, v == "admin")
		default:
			real = append(real, v == "1" || v == "s1" || v == "admin")
		}
	}
	return paths, real
}

// rbQueries returns the query strings to send: none, all the garbage
// parameters at once, every known name set to garbage, and (but for
// DELETE) each garbage parameter alone.
func rbQueries(method string) []string {
	params := [][2]string{{"page", "-1"}, {"page", "500000000000000000"}, {"page", "abc"}, {"page_size", "1e9"}, {"state", "??"}, {"site_id", "x"},
		{"created", "nonsense"}, {"custom_timeout", "-5"}, {"path", "../../etc"}, {"details", "maybe"}, {"flat", "2"}}
	all := url.Values{}
	for _, p := range params {
		all.Set(p[0], p[1]) // page=abc wins over page=-1
	}
	// Every known name as a parameter: with NUL, with NUL in the text
	// filters only (so that no other check answers first), and with a
	// non-number.
	nul, nulText, wrong := url.Values{}, url.Values{}, url.Values{}
	for name, kind := range rbFieldKinds {
		nul.Set(name, "a\x00b")
		if kind == "s" {
			nulText.Set(name, "a\x00b")
		}
		wrong.Set(name, "x")
	}
	out := []string{"", "?" + all.Encode(), "?" + nul.Encode(), "?" + nulText.Encode(), "?" + wrong.Encode()}
	if method == http.MethodDelete {
		return out
	}
	for _, p := range params {
		out = append(out, "?"+url.Values{p[0]: {p[1]}}.Encode())
	}
	return out
}

// rbFieldKinds maps every field name of the spec and of the handlers'
// inputs to the kind the spec gives it: s string, i integer, n number,
// b boolean, o object, a<kind> array of kind.
var rbFieldKinds = map[string]string{
	"access": "s", "access_key": "s", "access_key_id": "s", "accesskey": "s", "accesskeyid": "s", "action": "s",
	"addon_enabled": "b", "admin_users": "o", "advanced_settings": "o", "age": "s",
	"alert_completed_failed_jobs": "b", "alert_completed_has_failures_jobs": "b", "alert_completed_success_jobs": "b",
	"alert_email_address": "as", "alert_inprogress_failing_jobs": "b", "alert_notprogressed_jobs": "b",
	"alert_notstarted_jobs": "b", "alert_scheduled": "b", "alert_unscheduled": "b", "allow_ssh": "b", "allowed_users": "o",
	"am_i_configured": "b", "analytics_timeout": "i", "analytics_version": "s", "anonymous_group_id": "i",
	"anonymous_user_id": "i", "api_key": "s", "app_label": "s", "asynchronous": "b", "atime": "s",
	"available_on_sites": "ai", "background_color": "s", "backup_only": "b", "backup_site": "i", "bandwidth": "i",
	"bucket": "s", "by": "s", "cache_ttl": "i", "capacity": "i", "check_available_sites": "b", "children": "s",
	"clientkey": "s", "clientkey_ids": "ai", "clients": "ao", "code": "s", "codename": "s", "color": "ai", "completed": "s",
	"completed_time_from": "s", "completed_time_to": "s", "condition_group": "i", "condition_groups": "ao",
	"container": "s", "count": "i", "country": "s", "create_mask": "s", "created": "s", "created_time_from": "s",
	"created_time_to": "s", "credentials_file": "s", "credentials_json": "o", "credentialsfile": "s", "csr": "s",
	"ctime": "s", "custom_refresh_period": "i", "custom_statistics_tasks": "o", "custom_timeout": "i", "data_size": "i",
	"datastore": "i", "date_conditions": "ao", "date_field": "s", "date_joined": "s", "day_of_month": "s",
	"day_of_week": "s", "days": "i", "db_backup_dir": "s", "db_backup_enabled": "b", "db_backup_report": "b",
	"db_backup_report_to": "s", "db_backup_retain_versions": "i", "db_backup_schedule": "s", "db_backup_type": "s",
	"default_site": "i", "default_space_location": "s", "delete_on_recall": "b", "deleted": "b", "department": "s",
	"desc": "s", "description": "s", "details": "b", "dir_walk_complete": "b", "directories_count": "i",
	"directory_mask": "s", "discovery": "s", "discovery_id": "i", "discovery_managed_paths": "s", "discovery_name": "s",
	"discovery_options": "o", "discovery_workflow": "s", "disk_usage": "i", "download": "s", "duration": "s",
	"dynamic_parents": "ai", "editable": "s", "email": "s", "enable_auto_file_batch_sizing": "b", "enabled": "b",
	"endpoint": "s", "engine_version": "s", "error": "s", "exclude": "o", "external_only": "b", "external_targets": "ai",
	"fields": "o", "file_batch_gb": "i", "file_batch_size": "i", "filebrowser_proxies_backend": "s", "files_count": "i",
	"files_hydrated_count": "i", "files_stubbed_count": "i", "filesize_conditions": "ao", "filesystem": "s",
	"filetype_conditions": "ao", "filetypes": "as", "filter_rules": "o", "filters": "o", "first_name": "s",
	"first_occur": "b", "force_all_user_id": "b", "force_create_mode": "s", "force_directory_mode": "s",
	"force_local_managed_users": "b", "force_root_user_id": "b", "free_space": "i", "frequency": "s",
	"friendly_name": "s", "fs_iscan_buckets": "i", "fs_iscan_threads": "i", "fsid": "i", "greater_or_less": "s",
	"group_by_name": "b", "groups": "as", "guest_ok": "b", "has_default_queue": "b", "health": "s", "health_timeout": "i",
	"hide_noop": "b", "history": "b", "home_site": "i", "hosts": "s", "hosts_allow": "o", "hosts_deny": "o", "hour": "s",
	"href": "s", "hsm_support": "b", "icon_classes": "o", "id": "i", "id_token": "s", "idp_jwks_timeout": "i",
	"ignore_site_excludes": "b", "ignore_site_includes": "b", "image_preview": "s", "immutable": "b", "include": "o",
	"initial_gid": "i", "initial_uid": "i", "input_paths_prefix": "s", "insecure_ports": "b", "internal": "s",
	"ipaddr": "s", "is_active": "b", "is_cloud": "b", "is_default": "b", "is_ready": "s", "is_settings_job": "b",
	"job": "i", "job_id": "i", "jobs_ttl": "i", "jobtype": "s", "key": "s", "label": "s", "last_heartbeat": "s",
	"last_login": "s", "last_name": "s", "line_manager": "s", "list_of_interfaces": "o", "local_file_regex": "s",
	"lock_threshold": "i", "lower_threshold": "n", "managed_paths": "o", "marker": "s", "max_items": "i",
	"max_utilisation": "n", "maximum_external_results": "i", "merge": "b", "message": "s", "metadata": "o",
	"metadata_fields": "o", "migration_target_folder": "s", "minute": "s", "model": "s", "month_of_year": "s",
	"mountpoint": "s", "mtime": "s", "multi_thread_reads": "b", "multi_thread_writes": "b", "name": "s", "nas_user": "o",
	"nested_shares": "s", "new_password": "s", "nfs_share": "i", "node": "s",
	"node_health_last_heartbeat_interval": "i", "nodes": "s", "notprogressed_job_threshold": "i",
	"notstarted_job_threshold": "i", "numabortedfiles": "i", "numcancelledfiles": "i", "numfailedfiles": "i",
	"numfiles": "i", "numprocessedfiles": "i", "numskippedfiles": "i", "old_password": "s", "older_or_newer": "s",
	"on_sites": "o", "online": "b", "orchestrator_task_timeout": "n", "order": "o", "overall_health": "s", "owner": "o",
	"owner_ids": "ai", "page": "i", "page_size": "i", "parents": "s", "password": "s", "path": "s", "path_depth": "i",
	"paths": "as", "permission_mode": "s", "permissions": "as", "phone": "s", "policy": "i", "policy_id": "i",
	"policy_name": "s", "policy_type": "s", "pool": "s", "pool_name": "s", "port": "i", "preferred_queue": "s",
	"premigrate_threshold": "n", "primary_group": "s", "profile": "o", "proxies": "o", "public_url": "s", "queue": "s",
	"queue_id": "i", "raise_exception": "b", "read_only": "b", "ready_to_configure": "b", "recursive": "b",
	"refresh": "s", "region": "s", "relationships": "s", "remote_locations": "o", "restricted": "b", "result": "o",
	"results": "s", "reverse": "b", "root_share_locking": "b", "run_immediately": "b", "runtime": "n", "schedule": "o",
	"schedule_ids": "ai", "schedule_only": "b", "schedule_type": "s", "schedules_enabled": "b", "scheme": "s",
	"search_backend": "s", "search_keyword": "s", "search_max_results": "i", "search_result_ttl": "i",
	"search_version": "s", "searchengine_url": "s", "secret_access_key": "s", "secretaccesskey": "s", "severity": "s",
	"shortcode": "s", "site": "s", "site_id": "i", "site_name": "s", "sites": "ao", "size": "i",
	"snapdiff_stream_timeout": "i", "snapshot_create_delete_retry_timeout": "i", "snapshot_schedule": "o",
	"soft_deleting": "b", "space": "i", "space_id": "i", "spaces": "as", "ssl_verify": "b", "start_date_time": "s",
	"started": "s", "stat_refresh_period": "i", "stat_timeout": "i", "state": "s", "status": "s", "storage_account": "s",
	"storage_search_url": "s", "storage_type": "s", "storageaccount": "s", "subtree_check": "b", "summary": "s",
	"suppressed": "b", "task": "i", "task_id": "s", "task_invalidation_timeout": "i", "tasktype": "s", "text_color": "s",
	"threads": "i", "thumbnail": "s", "time": "s", "time_refreshed": "s", "timestamp": "s", "timezone": "s", "token": "s",
	"total_files": "i", "triggers": "ao", "type": "s", "uid": "i", "updated_at": "s", "updated_by": "i",
	"upper_threshold": "n", "url": "s", "usage": "ai", "used_space": "i", "user": "s", "username": "s", "users": "s",
	"uuid": "s", "value": "o", "values": "ao", "video_preview": "s", "visible": "b", "worker_version": "s",
	"workflow": "s", "write_delay": "b",
}

// rbSubFields gives the members of the spec's nested objects (and of the
// elements of arrays of objects); other objects get a generic member set.
var rbSubFields = map[string][]string{
	"profile":             {"country", "department", "line_manager", "phone", "timezone", "default_site", "home_site"},
	"nas_user":            {"allow_ssh", "primary_group", "uid"},
	"snapshot_schedule":   {"duration", "frequency", "time", "id", "space"},
	"schedule":            {"day_of_month", "day_of_week", "hour", "minute", "month_of_year", "first_occur", "time", "timezone"},
	"order":               {"by", "id", "reverse"},
	"sites":               {"id", "label", "name", "pool", "usage"},
	"clients":             {"nfs_share", "hosts", "advanced_settings", "on_sites", "anonymous_group_id", "anonymous_user_id", "fsid", "asynchronous", "force_all_user_id", "force_root_user_id", "insecure_ports", "read_only", "subtree_check", "write_delay"},
	"values":              {"key", "value"},
	"triggers":            {"pool_name", "is_cloud", "lower_threshold", "upper_threshold", "premigrate_threshold", "max_utilisation"},
	"condition_groups":    {"name", "policy", "date_conditions", "filesize_conditions", "filetype_conditions"},
	"date_conditions":     {"condition_group", "age", "date_field", "include", "older_or_newer"},
	"filesize_conditions": {"condition_group", "greater_or_less", "size", "include"},
	"filetype_conditions": {"condition_group", "filetypes", "include"},
}

// rbClasses are the value classes of the well-typed bodies: each field
// gets a value of the kind the handler decodes, but a bad one.
var rbClasses = []string{"empty", "negative", "huge", "weird"}

var rbDeepObject = json.RawMessage(strings.Repeat(`{"a":`, 2000) + "1" + strings.Repeat("}", 2000))

func rbScalar(kind string, class int) any {
	long := strings.Repeat("x", 10000)
	values := map[string][4]any{
		"s": {"", "-1", long, "../../etc/passwd%s%n'\"; --"},
		"i": {0, -1, int64(math.MaxInt64), int64(math.MinInt64)},
		"n": {0, -1.5, 1e308, -1e308},
		"b": {false, true, true, false},
	}
	return values[kind][class]
}

// rbGen builds well-typed bad bodies; the kinds it learns from each
// route's decoding errors override the spec's.
type rbGen struct {
	overrides map[string]map[string]string // route -> dotted field path -> kind ("-" omits it)
	retypes   map[string]map[string]int
	n         int // makes anchored names unique
}

// anchors are valid values of the fields that name other records or must
// be unique, for the anchored bodies.
func (g *rbGen) anchors() map[string]any {
	g.n++
	u := fmt.Sprintf("rb%d", g.n)
	return map[string]any{"site": "s1", "workflow": "premigrate", "jobtype": "premigrate", "space": 1, "datastore": 1,
		"bucket": "b", "storage_type": "filesystem", "local_file_regex": ".*", "type": "nfs", "ipaddr": "10.9.9.9",
		"name": u, "username": u, "label": u, "mountpoint": "/spaces/" + u, "password": "rb-Password-123",
		"new_password": "rb-Password-123", "timezone": "UTC", "action": u}
}

func newRBGen() *rbGen {
	return &rbGen{overrides: map[string]map[string]string{}, retypes: map[string]map[string]int{}}
}

func (g *rbGen) kind(route, path, def string) string {
	if k, ok := g.overrides[route][path]; ok {
		return k
	}
	return def
}

func (g *rbGen) body(route string, class int, dropped map[string]bool, anchored bool) string {
	fields := make([]string, 0, len(rbFieldKinds))
	for name := range rbFieldKinds {
		if !dropped[name] {
			fields = append(fields, name)
		}
	}
	obj := g.object(route, "", fields, class, 0)
	if anchored {
		for name, v := range g.anchors() {
			if _, sent := obj[name]; sent {
				obj[name] = v
			}
		}
		if _, sent := obj["values"]; sent {
			// Settings: a well-formed key carrying the class's value.
			obj["values"] = []any{map[string]any{"key": fmt.Sprintf("rb:k%d", g.n), "value": g.value(route, "values.value", "value", "o", class, 1)}}
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (g *rbGen) object(route, prefix string, fields []string, class, depth int) map[string]any {
	out := map[string]any{}
	for _, name := range fields {
		path := prefix + name
		k := g.kind(route, path, rbFieldKinds[name])
		if k == "-" {
			continue
		}
		out[name] = g.value(route, path, name, k, class, depth)
	}
	return out
}

func (g *rbGen) value(route, path, name, kind string, class, depth int) any {
	switch {
	case kind == "o":
		if sub, ok := rbSubFields[name]; ok && depth < 3 {
			return g.object(route, path+".", sub, class, depth+1)
		}
		switch class {
		case 0:
			return map[string]any{}
		case 2:
			return map[string]any{"a": rbDeepObject, "b": rbScalar("s", class)}
		default:
			return map[string]any{"a": rbScalar("s", class), "b": []any{rbScalar("i", class), nil}, "": nil}
		}
	case strings.HasPrefix(kind, "a"):
		if class == 0 {
			return []any{}
		}
		return []any{g.value(route, path, name, kind[1:], class, depth), g.value(route, path, name, kind[1:], class, depth)}
	default:
		return rbScalar(kind, class)
	}
}

var rbTypeMsg = regexp.MustCompile(`^Expected (an? [a-z]+), got ([a-z]+)`)

// learn reads a 400 of web.Bind naming a field of the wrong type and fixes
// that field's kind for the route; it reports whether it changed anything.
func (g *rbGen) learn(route string, body []byte) bool {
	var fields map[string][]string
	if json.Unmarshal(body, &fields) != nil {
		return false
	}
	changed := false
	for path, msgs := range fields {
		for _, msg := range msgs {
			m := rbTypeMsg.FindStringSubmatch(msg)
			if m == nil {
				continue
			}
			if g.overrides[route] == nil {
				g.overrides[route], g.retypes[route] = map[string]string{}, map[string]int{}
			}
			name := path[strings.LastIndex(path, ".")+1:]
			cur := g.kind(route, path, rbFieldKinds[name])
			want := map[string]string{"an integer": "i", "a number": "n", "a boolean": "b", "a string": "s",
				"a list": "as", "an object": "o"}[m[1]]
			if strings.HasPrefix(cur, "a") && m[2] != "array" && want != "as" {
				want = "a" + want // the list was right, its elements were not
			}
			g.retypes[route][path]++
			if want == "" || want == cur || g.retypes[route][path] > 3 {
				want = "-" // a value out of range, or a type we cannot guess: leave it out
			}
			g.overrides[route][path] = want
			changed = true
		}
	}
	return changed
}

// rbDrop adds the top-level fields a 400 names to dropped; it reports
// whether there was a new one.
func rbDrop(body []byte, dropped map[string]bool) bool {
	var fields map[string]any
	if json.Unmarshal(body, &fields) != nil {
		return false
	}
	added := false
	for path := range fields {
		name := path
		if i := strings.IndexAny(path, ".["); i >= 0 {
			name = path[:i]
		}
		if _, known := rbFieldKinds[name]; known && !dropped[name] {
			dropped[name] = true
			added = true
		}
	}
	return added
}

// rbBodies are the fixed garbage bodies: malformed JSON, wrong top-level
// types, every known field set to each wrong value, and deep nesting.
func rbBodies() []string {
	bodies := []string{"", "{", "null", "[]", `"x"`, "123", `{"name": 5}`, `{"name": ["a"]}`, `{"paths": "x"}`, `{"site": {}}`}
	long, _ := json.Marshal(strings.Repeat("y", 10000))
	deep := string(rbDeepObject)
	for _, v := range []string{"1e308", "-1", "-1.5", "99999999999999999999", `""`, string(long), `"x"`, "{}", "[]",
		`{"a": 1}`, `["a"]`, "true", "null", `"a\u0000b"`} {
		bodies = append(bodies, rbAllFields(v))
	}
	return append(bodies, strings.Repeat("[", 2000)+strings.Repeat("]", 2000), deep)
}

// rbAllFields sets every known field to the JSON value v.
func rbAllFields(v string) string {
	names := make([]string, 0, len(rbFieldKinds))
	for name := range rbFieldKinds {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("{")
	for i, name := range names {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%s", name, v)
	}
	b.WriteString("}")
	return b.String()
}

// rbFailures groups the failed requests by route, status and answer.
type rbFailures struct {
	order  []string
	groups map[string]*rbGroup
}

type rbGroup struct {
	count    int
	examples []string
}

func newRBFailures() *rbFailures { return &rbFailures{groups: map[string]*rbGroup{}} }

var rbRequestID = regexp.MustCompile(`"request_id":"[0-9a-f]+"`)

func (f *rbFailures) check(who, method, route, path string, body *string, r apitest.Response) {
	var problem string
	switch {
	case r.Status >= 500:
		problem = fmt.Sprintf("status %d", r.Status)
	case len(r.Body) > 0 && !json.Valid(r.Body) && !rbNonJSON(route, path, r.Status):
		problem = fmt.Sprintf("status %d with a non-JSON body", r.Status)
	default:
		return
	}
	key := fmt.Sprintf("%s %s: %s: %s", method, route, problem, rbTrim(rbRequestID.ReplaceAllString(string(r.Body), ""), 300))
	g := f.groups[key]
	if g == nil {
		g = &rbGroup{}
		f.groups[key] = g
		f.order = append(f.order, key)
	}
	g.count++
	if len(g.examples) < 3 {
		sent := "(no body)"
		if body != nil {
			sent = rbTrim(*body, 200)
		}
		g.examples = append(g.examples, fmt.Sprintf("as %s: %s %s body=%s -> %d %s", who, method, rbTrim(path, 120), sent,
			r.Status, rbTrim(string(r.Body), 500)))
	}
}

func (f *rbFailures) report(t *testing.T) {
	for _, key := range f.order {
		g := f.groups[key]
		t.Errorf("%s (%d requests), e.g.:\n  %s", key, g.count, strings.Join(g.examples, "\n  "))
	}
}

// rbNonJSON tells the answers that are not JSON by design: the Swagger UI
// and the YAML form of the OpenAPI document.
func rbNonJSON(route, path string, status int) bool {
	if status >= 300 {
		return false
	}
	return strings.HasPrefix(route, "/api/docs/") || (route == "/api/schema/" && strings.Contains(path, "format=yaml"))
}

func rbTrim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(%d bytes)", len(s))
}

// TestNumbersNoFloatHoldsAreRefused: a number beyond float64 (1e999),
// anywhere in a body, is a 400 naming it. Before, one inside a free-form
// object (discovery_options, a field's default) was stored as given, and
// every later read of the record failed (500): GET /api/workflows/ broke
// for good.
func TestNumbersNoFloatHoldsAreRefused(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	for _, body := range []string{
		`{"name":"w","label":"W","discovery_options":{"n":1e999}}`,
		`{"name":"w","label":"W","fields":[{"name":"n","label":"N","type":"number","default":-1e999}]}`,
	} {
		r := e.AsAdmin(http.MethodPost, "/api/workflows/", body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", body, r.Body)
		require.Contains(t, string(r.Body), "A valid number is required", body)
	}
	r := e.AsAdmin(http.MethodGet, "/api/workflows/", nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Body))
}
