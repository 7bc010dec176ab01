package hub_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// policySpace makes space name at /spaces/<name> on site (the site's
// worker makes its folder) and returns its id.
func policySpace(t *testing.T, e *apitest.Env, site, root, name string) int64 {
	t.Helper()
	r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": name, "mountpoint": "/spaces/" + name,
		"sites": []any{map[string]any{"name": site, "label": name}}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(root, "spaces", name))
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the space's folder is made")
	return recordID(t, r)
}

// labSpace makes space "lab" on the given sites, recorded only (no
// worker makes its folder), and returns its id.
func labSpace(t *testing.T, e *apitest.Env, sites ...string) int64 {
	t.Helper()
	var on []any
	for _, s := range sites {
		on = append(on, map[string]any{"name": s, "label": s[:1]})
	}
	r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": "lab", "mountpoint": "/spaces/lab", "sites": on})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	return recordID(t, r)
}

func TestPolicyRecords(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		s := newJobSite(t, e, "south")
		site, err := models.GetSiteByName(context.Background(), e.DB, "south")
		require.NoError(t, err)
		space := policySpace(t, e, "south", s.root, "projects")
		group := map[string]any{"name": "old", "date_conditions": []any{map[string]any{"age": "30d", "date_field": "atime", "older_or_newer": "older"}}}
		valid := func() map[string]any {
			return map[string]any{"name": "p", "site": site.ID, "spaces": []int64{space}, "condition_groups": []any{group}}
		}
		with := func(k string, v any) map[string]any { b := valid(); b[k] = v; return b }

		for field, body := range map[string]map[string]any{
			"site":                        with("site", 9999),
			"spaces":                      with("spaces", []int64{}),
			"spaces[0]":                   with("spaces", []int64{9999}),
			"policy_type":                 with("policy_type", "delete"),
			"order.by":                    with("order", map[string]any{"by": "color"}),
			"threads":                     with("threads", -1),
			"triggers[0].lower_threshold": with("triggers", []any{map[string]any{"pool_name": "system", "lower_threshold": -5, "upper_threshold": 80}}),
			"triggers[0].upper_threshold": with("triggers", []any{map[string]any{"pool_name": "system", "lower_threshold": 50, "upper_threshold": 180}}),
			"triggers[0].pool_name":       with("triggers", []any{map[string]any{"lower_threshold": 50, "upper_threshold": 80}}),
			"condition_groups[0].name":    with("condition_groups", []any{map[string]any{"name": "empty"}}),
			"schedule.minute":             with("schedule", map[string]any{"minute": "99"}),
			"schedule.timezone":           with("schedule", map[string]any{"timezone": "Mars/Olympus"}),
			"schedule.time":               with("schedule", map[string]any{"time": "25:00"}),
			"condition_groups[0].date_conditions[0].age": with("condition_groups", []any{map[string]any{"name": "g",
				"date_conditions": []any{map[string]any{"age": "ten days", "date_field": "atime", "older_or_newer": "older"}}}}),
			"condition_groups[0].filesize_conditions[0].greater_or_less": with("condition_groups", []any{map[string]any{"name": "g",
				"filesize_conditions": []any{map[string]any{"greater_or_less": "around", "size": 10}}}}),
		} {
			r := e.AsAdmin(http.MethodPost, "/api/policies/", body)
			require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", field, r.Body)
			require.Contains(t, r.Map(), field, "%s", r.Body)
		}

		body := valid()
		body["name"] = "archive-old"
		body["order"] = map[string]any{"by": "size", "reverse": true}
		body["schedule"] = map[string]any{"time": "03:15", "day_of_week": "SUN", "timezone": "America/New_York"}
		body["triggers"] = []any{map[string]any{"pool_name": "system", "lower_threshold": 60, "upper_threshold": 80, "premigrate_threshold": 40}}
		r := e.AsAdmin(http.MethodPost, "/api/policies/", body)
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		p := r.Map()
		id := int64(p["id"].(float64))
		require.Equal(t, "migration", p["policy_type"])
		require.Equal(t, map[string]any{"id": float64(id), "by": "size", "reverse": true}, p["order"])
		require.IsType(t, "", p["triggers"], "triggers read as a string")
		var trig []map[string]any
		require.NoError(t, json.Unmarshal([]byte(p["triggers"].(string)), &trig))
		require.Equal(t, float64(80), trig[0]["upper_threshold"])
		sch := p["schedule"].(map[string]any)
		require.Equal(t, "15", sch["minute"])
		require.Equal(t, "3", sch["hour"])
		g := p["condition_groups"].([]any)[0].(map[string]any)
		require.Equal(t, float64(id), g["policy"])
		require.Equal(t, true, g["date_conditions"].([]any)[0].(map[string]any)["include"], "include defaults to true")

		// One Temporal Schedule, in the policy's timezone.
		d := describeSchedule(t, e, workflows.PolicyTemporalID(id))
		require.NotNil(t, d)
		require.Equal(t, "America/New_York", d.Schedule.Spec.TimeZoneName)
		require.Len(t, d.Schedule.Spec.Intervals, 1, "triggers are checked on a schedule of their own")
		require.Equal(t, 10*time.Minute, d.Schedule.Spec.Intervals[0].Every)
		require.Len(t, d.Schedule.Spec.Calendars, 1, "beside the policy's own schedule")
		cal := d.Schedule.Spec.Calendars[0]
		require.Equal(t, []client.ScheduleRange{{Start: 15, End: 15, Step: 1}}, cal.Minute, "%+v", cal)
		require.Equal(t, []client.ScheduleRange{{Start: 3, End: 3, Step: 1}}, cal.Hour, "%+v", cal)
		require.Equal(t, []client.ScheduleRange{{Start: 0, End: 0, Step: 1}}, cal.DayOfWeek, "%+v", cal)

		// PATCH, the list, the automated list, disabling, deleting.
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", id), map[string]any{"enabled": false, "threads": 4})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Equal(t, float64(4), r.Map()["threads"])
		require.True(t, describeSchedule(t, e, workflows.PolicyTemporalID(id)).Schedule.State.Paused)
		require.EqualValues(t, 1, e.AsAdmin(http.MethodGet, "/api/policies/", nil).Map()["count"])
		auto := e.AsAdmin(http.MethodGet, "/api/automatedschedules/", nil).Map()
		require.EqualValues(t, 1, auto["count"], auto)
		a := auto["results"].([]any)[0].(map[string]any)
		require.Equal(t, "policy", a["schedule_type"])
		require.Equal(t, "projects", a["spaces"])
		require.Equal(t, "south", a["site_name"])
		r = e.AsAdmin(http.MethodDelete, fmt.Sprintf("/api/policies/%d/", id), nil)
		require.Equal(t, http.StatusNoContent, r.Status, string(r.Body))
		require.Nil(t, describeSchedule(t, e, workflows.PolicyTemporalID(id)))
	})
}

// TestPolicyRunSelectsByItsConditions runs a policy through the API over a
// space whose files have chosen ages, sizes and types: its job migrates
// exactly the files a condition group selects, and nothing else moves.
func TestPolicyRunSelectsByItsConditions(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		e.StartHubWorker()
		s := newJobSite(t, e, "south")
		site, err := models.GetSiteByName(context.Background(), e.DB, "south")
		require.NoError(t, err)
		space := policySpace(t, e, "south", s.root, "lab")
		old := time.Now().Add(-90 * 24 * time.Hour)
		files := map[string]struct {
			size int
			old  bool
			want bool
		}{
			"old-big.dat":   {5000, true, true},   // old and big: group 1
			"old-small.dat": {10, true, false},    // old but small
			"new-big.dat":   {5000, false, false}, // big but new
			"report.pdf":    {10, false, true},    // a pdf: group 2
			"notes.txt":     {10, true, false},
			"sub/old.log":   {4000, true, true},
		}
		for name, f := range files {
			p := filepath.Join(s.root, "spaces", "lab", name)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("x", f.size)), 0o644))
			if f.old {
				require.NoError(t, os.Chtimes(p, old, old))
			}
		}
		r := e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "tidy", "site": site.ID, "spaces": []int64{space},
			"policy_type": "premigration",
			"condition_groups": []any{
				map[string]any{"name": "old and big",
					"date_conditions":     []any{map[string]any{"age": "30d", "date_field": "mtime", "older_or_newer": "older"}},
					"filesize_conditions": []any{map[string]any{"greater_or_less": "greater", "size": 1000}}},
				map[string]any{"name": "documents", "filetype_conditions": []any{map[string]any{"filetypes": []string{"PDF"}}}},
			}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		id := recordID(t, r)
		require.Nil(t, describeSchedule(t, e, workflows.PolicyTemporalID(id)), "no schedule, no triggers: runs only when asked")

		r = e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/policies/%d/run/", id), nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		job := waitJob(t, e, recordID(t, r))
		require.Equal(t, vocab.JobSuccess, job["state"], job)
		require.EqualValues(t, 3, job["numprocessedfiles"], job)
		require.Equal(t, "system", job["owner"].(map[string]any)["type"])

		stats := e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/jobstats/?job=%d&page_size=100", int64(job["id"].(float64))), nil).Map()
		var done []string
		for _, x := range stats["results"].([]any) {
			done = append(done, x.(map[string]any)["path"].(string))
		}
		var want []string
		for name, f := range files {
			if f.want {
				want = append(want, "/spaces/lab/"+name)
			}
		}
		require.ElementsMatch(t, want, done)

		// On a schedule, a firing (PolicyWorkflow) runs the same job and
		// lasts until it ends.
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", id), map[string]any{"schedule": map[string]any{"minute": "0", "hour": "4"}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		h := e.Temporal.ScheduleClient().GetHandle(context.Background(), workflows.PolicyTemporalID(id))
		require.NoError(t, h.Trigger(context.Background(), client.ScheduleTriggerOptions{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL}))
		require.Eventually(t, func() bool {
			resp, err := e.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
				Namespace: e.Namespace, Query: "WorkflowType = 'PolicyWorkflow' AND ExecutionStatus = 'Completed'"})
			return err == nil && len(resp.GetExecutions()) == 1
		}, time.Minute, 200*time.Millisecond, "the firing ends once its job has")
		jobs := e.AsAdmin(http.MethodGet, "/api/jobs/?state=SUCCESS", nil).Map()
		require.EqualValues(t, 2, jobs["count"], jobs)
		apitest.RecordHistories(t, e.Temporal)

		// null removes the schedule (it was taken for absent: the policy
		// kept running on its cron), and with it the Temporal Schedule.
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", id), map[string]any{"schedule": nil, "triggers": nil})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		require.Nil(t, r.Map()["schedule"], string(r.Body))
		require.Equal(t, "[]", r.Map()["triggers"], "read as a string, as the spec says: %s", r.Body)
		require.Eventually(t, func() bool { return describeSchedule(t, e, workflows.PolicyTemporalID(id)) == nil },
			30*time.Second, 100*time.Millisecond, "no schedule, no triggers: no Temporal Schedule")
	})
}

// TestOneShotPolicyStaysSpent: a policy with first_occur runs once (a
// Temporal Schedule with one remaining action); once it fired, pausing
// and resuming it (or the hub's schedules) leaves it spent. Before, every
// update armed it again, and it ran again at its next time.
func TestOneShotPolicyStaysSpent(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		s := newJobSite(t, e, "south")
		site, err := models.GetSiteByName(ctx, e.DB, "south")
		require.NoError(t, err)
		space := policySpace(t, e, "south", s.root, "lab")
		r := e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "once", "site": site.ID, "spaces": []int64{space},
			"policy_type": "premigration", "schedule": map[string]any{"minute": "0", "hour": "4", "first_occur": true}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		id := recordID(t, r)
		tid := workflows.PolicyTemporalID(id)
		var d *client.ScheduleDescription
		require.Eventually(t, func() bool { d = describeSchedule(t, e, tid); return d != nil }, 30*time.Second, 100*time.Millisecond)
		require.True(t, d.Schedule.State.LimitedActions)
		require.EqualValues(t, 1, d.Schedule.State.RemainingActions)

		// It fired: Temporal counts its one action down.
		h := e.Temporal.ScheduleClient().GetHandle(ctx, tid)
		require.NoError(t, h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			in.Description.Schedule.State.RemainingActions = 0
			return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
		}}))
		for _, enabled := range []bool{false, true} {
			r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", id), map[string]any{"enabled": enabled})
			require.Equal(t, http.StatusOK, r.Status, string(r.Body))
			require.Eventually(t, func() bool { d = describeSchedule(t, e, tid); return d.Schedule.State.Paused == !enabled },
				30*time.Second, 100*time.Millisecond)
			require.True(t, d.Schedule.State.LimitedActions)
			require.Zero(t, d.Schedule.State.RemainingActions, "still spent (enabled %v)", enabled)
		}
	})
}

// TestPolicyFiletypesAreReadAsTheSiteReadsThem: a file type is checked
// as the site's scan reads it (blanks and a leading dot dropped): one
// that names no extension is a 400 naming it. Before, " " and ". " were
// accepted (201) and every run of the policy failed on the site.
func TestPolicyFiletypesAreReadAsTheSiteReadsThem(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, e.DB, "north")
		require.NoError(t, err)
		space := labSpace(t, e, "north")
		policy := func(name string, filetypes ...string) apitest.Response {
			return e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": name, "site": site.ID, "spaces": []int64{space},
				"condition_groups": []any{map[string]any{"name": "g", "filetype_conditions": []any{map[string]any{"filetypes": filetypes}}}}})
		}
		for _, ft := range []string{"", " ", ".", ". ", " . ", "\t.", "a/b"} {
			r := policy("bad", "pdf", ft)
			require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", ft, r.Body)
			require.Contains(t, r.Map(), "condition_groups[0].filetype_conditions[0].filetypes[1]", "%q: %s", ft, r.Body)
		}
		r := policy("good", "pdf", " .PDF ", "tar.gz")
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	})
}

// TestPolicyScheduleFollowsItsSitesTimezone: a policy's schedule without
// a timezone of its own (or with its site's) is in its site's timezone
// wherever the policy moves and whatever the site's timezone becomes: its
// time is the time on the policy's site. One with a timezone of its own
// keeps it. Its start_date_time (read only) is when it first starts
// after it was written, in its timezone. Before, the site's timezone was
// copied into the schedule when written and kept through moves, and
// start_date_time was never shown.
func TestPolicyScheduleFollowsItsSitesTimezone(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		sites := map[string]*models.Site{}
		for name, tz := range map[string]string{"north": "Europe/Paris", "south": "America/New_York"} {
			s, err := models.EnsureSite(ctx, e.DB, name)
			require.NoError(t, err)
			s.Timezone = tz
			_, err = e.DB.NewUpdate().Model(s).Column("timezone").WherePK().Exec(ctx)
			require.NoError(t, err)
			sites[name] = s
		}
		space := labSpace(t, e, "north", "south")

		// requireAt: the policy's schedule reads timezone tz, its Temporal
		// Schedule is in tz, and start_date_time is the next 03:00 there.
		requireAt := func(r apitest.Response, tz string) {
			t.Helper()
			require.Equal(t, http.StatusOK/100, r.Status/100, string(r.Body))
			sch := r.Map()["schedule"].(map[string]any)
			require.Equal(t, tz, sch["timezone"], "%v", sch)
			d := describeSchedule(t, e, workflows.PolicyTemporalID(recordID(t, r)))
			require.NotNil(t, d)
			require.Equal(t, tz, d.Schedule.Spec.TimeZoneName)
			start, err := time.Parse(time.RFC3339, fmt.Sprint(sch["start_date_time"]))
			require.NoError(t, err, "start_date_time: %v", sch)
			loc, err := time.LoadLocation(tz)
			require.NoError(t, err)
			_, offset := start.In(loc).Zone()
			_, given := start.Zone()
			require.Equal(t, offset, given, "start_date_time is written in the schedule's timezone: %v", sch)
			require.Equal(t, 3, start.In(loc).Hour(), "%v", sch)
			require.True(t, start.After(time.Now()) && start.Before(time.Now().Add(25*time.Hour)), "the next 03:00: %v", start)
			require.Equal(t, d.Info.NextActionTimes[0].UTC(), start.UTC(), "Temporal's next firing")
		}

		r := e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "follows", "site": sites["north"].ID,
			"spaces": []int64{space}, "schedule": map[string]any{"time": "03:00"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		follows := recordID(t, r)
		requireAt(r, "Europe/Paris")
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", follows), map[string]any{"site": sites["south"].ID})
		requireAt(r, "America/New_York")

		// Sent back as read (the site's timezone), it still follows the site.
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", follows), map[string]any{"schedule": r.Map()["schedule"]})
		requireAt(r, "America/New_York")
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", follows), map[string]any{"site": sites["north"].ID})
		requireAt(r, "Europe/Paris")

		// A timezone of its own stays through a move.
		r = e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "own", "site": sites["north"].ID,
			"spaces": []int64{space}, "schedule": map[string]any{"time": "03:00", "timezone": "Asia/Tokyo"}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		own := recordID(t, r)
		requireAt(r, "Asia/Tokyo")
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", own), map[string]any{"site": sites["south"].ID})
		requireAt(r, "Asia/Tokyo")

		// The site's timezone changes: the schedule that follows it
		// follows at once; the other keeps its own.
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/sites/%d/", sites["north"].ID), map[string]any{"timezone": "Australia/Sydney"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		requireAt(e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/policies/%d/", follows), nil), "Australia/Sydney")
		requireAt(e.AsAdmin(http.MethodGet, fmt.Sprintf("/api/policies/%d/", own), nil), "Asia/Tokyo")

		// A policy written before schedules followed their site holds a
		// copy of its site's timezone: it follows the site it moves to.
		p, err := models.GetPolicy(ctx, e.DB, follows)
		require.NoError(t, err)
		p.Schedule.Timezone = "Australia/Sydney"
		require.NoError(t, models.SavePolicy(ctx, e.DB, p))
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", follows), map[string]any{"site": sites["south"].ID})
		requireAt(r, "America/New_York")
	})
}

// TestAPolicyScansOnlyTheSpacesStillOnItsSite: a site left one of its
// policy's spaces (its folder there removed); the policy's runs went on
// scanning the folder, and every run failed it as missing. A space no
// longer on the policy's site is passed over, as a deleted one is, and a
// policy left with none is refused (400) when it is run.
func TestAPolicyScansOnlyTheSpacesStillOnItsSite(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		site, err := models.EnsureSite(ctx, e.DB, "north")
		require.NoError(t, err)
		spaces := map[string]int64{}
		for _, name := range []string{"lab", "office"} {
			r := e.AsAdmin(http.MethodPost, "/api/spaces/", map[string]any{"name": name, "mountpoint": "/spaces/" + name,
				"sites": []any{map[string]any{"name": "north", "label": name}}})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
			spaces[name] = recordID(t, r)
		}
		r := e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "tidy", "site": site.ID,
			"spaces": []int64{spaces["lab"], spaces["office"]}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		run := fmt.Sprintf("/api/policies/%d/run/", recordID(t, r))

		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/spaces/%d/", spaces["lab"]), map[string]any{"sites": []any{}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPost, run, nil)
		require.Equal(t, http.StatusAccepted, r.Status, string(r.Body))
		job, err := models.GetJob(ctx, e.DB, recordID(t, r))
		require.NoError(t, err)
		require.Equal(t, []string{"/spaces/office"}, job.Paths)

		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/spaces/%d/", spaces["office"]), map[string]any{"sites": []any{}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		r = e.AsAdmin(http.MethodPost, run, nil)
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Body))
		require.Contains(t, r.Map(), "spaces", string(r.Body))
	})
}

// TestAChangedPolicysUnscannedFiringsAreCancelled: a firing's job carries
// the policy as it was when it fired. One created while the site's worker
// was away ran, once it was back, with the old conditions, although the
// policy had been disabled and narrowed to select nothing since: it
// migrated every file (a reviewer's finding). Changing, disabling or
// deleting a policy now cancels its firings' jobs that have not finished
// their scan; a run an operator asked for goes on.
func TestAChangedPolicysUnscannedFiringsAreCancelled(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		ctx := context.Background()
		e.StartHubWorker()
		s := newJobSite(t, e, "east")
		site, err := models.GetSiteByName(ctx, e.DB, "east")
		require.NoError(t, err)
		space := policySpace(t, e, "east", s.root, "lab")
		for i := range 5 {
			require.NoError(t, os.WriteFile(filepath.Join(s.root, "spaces", "lab", fmt.Sprintf("f%d.bin", i)), make([]byte, 1000), 0o644))
		}
		r := e.AsAdmin(http.MethodPost, "/api/policies/", map[string]any{"name": "tidy", "site": site.ID, "spaces": []int64{space},
			"policy_type": "migration", "schedule": map[string]any{"minute": "0", "hour": "4"},
			"condition_groups": []any{map[string]any{"name": "all", "filesize_conditions": []any{map[string]any{"greater_or_less": "greater", "size": 0}}}}})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		policy := recordID(t, r)

		s.stopWorker() // the site's worker is away
		_, err = e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "policy-firing-1", TaskQueue: workflows.HubTaskQueue},
			workflows.PolicyWorkflowName, workflows.Fire{ID: policy})
		require.NoError(t, err)
		var fired models.Job
		require.Eventually(t, func() bool {
			return e.DB.NewSelect().Model(&fired).Where("policy_id = ?", policy).Scan(ctx) == nil
		}, time.Minute, 100*time.Millisecond)
		now := e.AsAdmin(http.MethodPost, fmt.Sprintf("/api/policies/%d/run/", policy), nil)
		require.Equal(t, http.StatusAccepted, now.Status, string(now.Body))

		// A change of what does not choose the files (its name, its
		// conditions sent again as they are) cancels nothing.
		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", policy), map[string]any{"name": "tidy up",
			"condition_groups": []any{map[string]any{"name": "all", "filesize_conditions": []any{map[string]any{"greater_or_less": "greater", "size": 0}}}}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		j, err := models.GetJob(ctx, e.DB, fired.ID)
		require.NoError(t, err)
		require.NotContains(t, []string{"CANCELLING", "CANCELLED"}, j.State, "a rename cancels nothing")

		r = e.AsAdmin(http.MethodPatch, fmt.Sprintf("/api/policies/%d/", policy), map[string]any{"enabled": false,
			"condition_groups": []any{map[string]any{"name": "none", "filesize_conditions": []any{map[string]any{"greater_or_less": "greater", "size": int64(1) << 50}}}}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Body))
		s.startWorker()

		ended := waitJob(t, e, fired.ID)
		require.Equal(t, "CANCELLED", ended["state"], ended)
		asked := waitJob(t, e, int64(now.Map()["id"].(float64)))
		require.Equal(t, "SUCCESS", asked["state"], "the run an operator asked for goes on: %v", asked)
		require.Equal(t, float64(5), asked["numprocessedfiles"], asked)
	})
}
