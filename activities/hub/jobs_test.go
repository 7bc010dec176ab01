package hub_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.temporal.io/sdk/temporal"

	hubact "github.com/thehub/hub/activities/hub"
	siteact "github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/models/dbtest"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

func createJob(t *testing.T, db *bun.DB, site *models.Site, discovery string, paths []string) *models.Job {
	j := &models.Job{Workflow: "premigrate", Site: site.Name, SiteID: site.ID, Queue: vocab.DefaultQueue,
		Paths: paths, OwnerType: models.OwnerSystem, Definition: models.JobDefinition{Name: "premigrate"}}
	if discovery != "" {
		j.Discovery = &discovery
	}
	require.NoError(t, models.CreateJob(context.Background(), db, j))
	return j
}

// ensureSite returns site name, created if missing.
func ensureSite(t *testing.T, db *bun.DB, name string) *models.Site {
	site, err := models.EnsureSite(context.Background(), db, name)
	require.NoError(t, err)
	return site
}

// pages reads every page of job id's paths as discovery does.
func pages(t *testing.T, a *hubact.Activities, id int64, limit, maxBytes int) [][]string {
	var out [][]string
	next := 0
	for {
		p, err := a.JobPathsPage(context.Background(), workflows.JobPathsRequest{JobID: id, Next: next, Limit: limit, MaxBytes: maxBytes})
		require.NoError(t, err)
		require.NotEmpty(t, p.Paths, "a page holds at least one path")
		out = append(out, p.Paths)
		next = p.Next
		if p.Done {
			return out
		}
		require.Less(t, len(out), 1000, "paging never ends")
	}
}

// TestJobPathsPage: discovery gets each of a job's paths once, in the
// order given, in pages bounded by count and bytes.
func TestJobPathsPage(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site := ensureSite(t, db, "pager")
		a := &hubact.Activities{DB: db}
		given := []string{"/a", "/b/c", "/a/", "/b", "/b/c/d", "//a", "/e"}

		none := createJob(t, db, site, "", given)
		require.Equal(t, [][]string{{"/a", "/b/c"}, {"/b", "/b/c/d"}, {"/e"}}, pages(t, a, none.ID, 2, 1000),
			"each path once (/a, /a/ and //a are one path)")
		rec := createJob(t, db, site, models.DiscoveryRecursive, given)
		require.Equal(t, [][]string{{"/a", "/b"}, {"/e"}}, pages(t, a, rec.ID, 2, 1000),
			"a recursive job leaves a path inside another given path to that one's walk")
		require.Equal(t, [][]string{{"/a"}, {"/b"}, {"/e"}}, pages(t, a, rec.ID, 10, 3), "pages are bounded in bytes")
		long := strings.Repeat("x", 100)
		wide := createJob(t, db, site, "", []string{"/" + long, "/y"})
		require.Equal(t, [][]string{{"/" + long}, {"/y"}}, pages(t, a, wide.ID, 10, 50), "a path longer than the bound is a page")

		many := make([]string, 2500)
		for i := range many {
			many[i] = fmt.Sprintf("/dir/%05d", i)
		}
		big := createJob(t, db, site, models.DiscoveryRecursive, many)
		var got []string
		for _, p := range pages(t, a, big.ID, 0, 0) {
			require.LessOrEqual(t, len(p), 1000, "the default page")
			got = append(got, p...)
		}
		require.Equal(t, many, got)

		_, err := a.JobPathsPage(ctx, workflows.JobPathsRequest{JobID: 999999})
		require.ErrorContains(t, err, "not found")
	})
}

// TestJobSiteFollowsRename: a job's site is found by id, under its name
// now; the plan names the site so, and a job whose site is gone says so.
func TestJobSiteFollowsRename(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site := ensureSite(t, db, "old-name")
		j := createJob(t, db, site, "", []string{"/a"})
		_, err := db.NewUpdate().Model((*models.Site)(nil)).Set("name = ?", "new-name").Where("id = ?", site.ID).Exec(ctx)
		require.NoError(t, err)
		a := &hubact.Activities{DB: db}
		ref, err := a.JobSite(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, workflows.SiteRef{ID: site.ID, Name: "new-name"}, ref)
		plan, err := a.LoadJobPlan(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, "new-name", plan.Site)
		require.Equal(t, vocab.JobPending, plan.State)
		require.Empty(t, plan.Paths, "the paths stay in the database")
		page, err := a.JobPathsPage(ctx, workflows.JobPathsRequest{JobID: j.ID})
		require.NoError(t, err)
		require.Equal(t, "new-name", page.Site)
	})
}

// TestJobStateKeepsACancel: a cancel the API records (CANCELLING) while
// the job's workflow is starting, pausing or resuming is not overwritten
// by the workflow's STARTED, PAUSING or PAUSED: the API answered the
// cancel with CANCELLING, and the workflow receives the cancel next. An
// ended job is not brought back either. Before, a job cancelled right
// after its submission was shown STARTED (TestClientWatchOnTerminal
// caught it under CI load).
func TestJobStateKeepsACancel(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site := ensureSite(t, db, "states")
		a := &hubact.Activities{DB: db}
		state := func(id int64) string {
			j, err := models.GetJob(ctx, db, id)
			require.NoError(t, err)
			return j.State
		}
		running := createJob(t, db, site, "", []string{"/a"})
		require.NoError(t, a.SetJobState(ctx, workflows.JobStateChange{JobID: running.ID, State: vocab.JobStarted, Started: true}))
		require.Equal(t, vocab.JobStarted, state(running.ID))
		require.NoError(t, a.SetJobState(ctx, workflows.JobStateChange{JobID: running.ID, State: vocab.JobPaused}))
		require.Equal(t, vocab.JobPaused, state(running.ID))

		cancelled := createJob(t, db, site, "", []string{"/a"})
		require.NoError(t, models.MarkCancelling(ctx, db, cancelled.ID))
		for _, s := range []string{vocab.JobStarted, vocab.JobPausing, vocab.JobPaused} {
			require.NoError(t, a.SetJobState(ctx, workflows.JobStateChange{JobID: cancelled.ID, State: s, Started: true}))
			require.Equal(t, vocab.JobCancelling, state(cancelled.ID), "after %s", s)
		}
		require.NoError(t, models.UpdateJob(ctx, db, cancelled.ID, models.JobUpdate{State: vocab.JobCancelled, Completed: true}))
		require.NoError(t, a.SetJobState(ctx, workflows.JobStateChange{JobID: cancelled.ID, State: vocab.JobStarted}))
		require.Equal(t, vocab.JobCancelled, state(cancelled.ID))
	})
}

// TestAnOldRunLeavesTheNextAlone: a run's state or end recorded again
// (the calls run once more after a hub worker died, or a workflow the hub
// had ended waking up) after the job was resubmitted records nothing over
// the new run, which would otherwise never start (its start finds the job
// no longer PENDING); nothing of the old run is to be cleaned up. The new
// run's end is recorded.
func TestAnOldRunLeavesTheNextAlone(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site := ensureSite(t, db, "runs")
		a := &hubact.Activities{DB: db}
		j := createJob(t, db, site, "", []string{"/a"})
		end := workflows.JobEnd{JobID: j.ID, Run: j.Run, State: vocab.JobFailure, Error: "broke",
			Aborted: []vocab.BatchRef{{Run: j.Run, Index: 0, N: 3}}}
		out, err := a.FinishJob(ctx, end)
		require.NoError(t, err)
		require.Equal(t, workflows.JobOutcome{State: vocab.JobFailure, HasFailures: true}, out)

		next := j.Run + 1 // resubmitted
		require.NoError(t, models.UpdateJob(ctx, db, j.ID, models.JobUpdate{State: vocab.JobPending, Run: &next}))
		before, err := models.GetJob(ctx, db, j.ID)
		require.NoError(t, err)
		for _, s := range []string{vocab.JobStarted, vocab.JobPaused, vocab.JobCancelled} {
			require.NoError(t, a.SetJobState(ctx, workflows.JobStateChange{JobID: j.ID, Run: j.Run, State: s, Started: true}))
		}
		require.NoError(t, a.RecordDiscovery(ctx, workflows.DiscoveryDone{JobID: j.ID, Run: j.Run, Files: 7, Final: true,
			Failed: []siteact.Outcome{{Path: "/gone", State: siteact.OutcomeFailure}}}))
		out, err = a.FinishJob(ctx, end)
		require.NoError(t, err)
		require.True(t, out.Superseded)
		require.Equal(t, vocab.JobPending, out.State)
		after, err := models.GetJob(ctx, db, j.ID)
		require.NoError(t, err)
		after.Updated = before.Updated // its counts were counted again, to the same
		require.Equal(t, before, after, "the new run is left as it was")

		out, err = a.FinishJob(ctx, workflows.JobEnd{JobID: j.ID, Run: next, State: vocab.JobSuccess})
		require.NoError(t, err)
		require.False(t, out.Superseded)
		after, err = models.GetJob(ctx, db, j.ID)
		require.NoError(t, err)
		require.Equal(t, vocab.JobSuccess, after.State)
		require.Equal(t, next, after.Run)

		// Resubmitted between FinishJob's read and its write: the write
		// applies only in the run it was read in.
		require.ErrorIs(t, models.UpdateJob(ctx, db, j.ID, models.JobUpdate{InRun: j.Run, State: vocab.JobFailure}), models.ErrNotFound)
	})
}

// TestCallsForADeletedJobEndForGood: a task started or finished again for
// a job deleted meanwhile (its end was recorded, its worker died before
// the workflow learnt it, the user deleted it) fails for good rather
// than being retried for ever on rows that can no longer be added.
func TestCallsForADeletedJobEndForGood(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site := ensureSite(t, db, "gone")
		a := &hubact.Activities{DB: db}
		j := createJob(t, db, site, "", []string{"/a"})
		start := workflows.TaskStart{JobID: j.ID, Site: site.Name, Queue: vocab.DefaultQueue, Run: j.Run, Name: "premigrate", NumPaths: 2}
		taskID, err := a.StartTask(ctx, start)
		require.NoError(t, err)
		require.NoError(t, models.DeleteJob(ctx, db, j.ID))

		final := func(err error) {
			t.Helper()
			var app *temporal.ApplicationError
			require.ErrorAs(t, err, &app)
			require.True(t, app.NonRetryable(), "%v", err)
			require.Equal(t, vocab.ErrNotFound, app.Type())
		}
		_, err = a.FinishTask(ctx, workflows.TaskEnd{JobID: j.ID, TaskID: taskID, Outcomes: []siteact.Outcome{
			{Path: "/a/1", State: siteact.OutcomeSuccess}, {Path: "/a/2", State: siteact.OutcomeFailure}}})
		final(err)
		start.Batch = 1
		_, err = a.StartTask(ctx, start)
		final(err)
	})
}

// TestRerunOfAnUnfinishedWalkDropsItsLeftover: a job stopped before its
// discovery completed is discovered again in its next run. A walk finds
// the paths of the batches the stopped run left again, so those batches
// are not queued too (they would run twice); a list of paths keeps them
// and its discovery skips their paths. Once the walk completed, a
// resubmit runs the leftover and the failed paths.
func TestRerunOfAnUnfinishedWalkDropsItsLeftover(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site := ensureSite(t, db, "rerun")
		a := &hubact.Activities{DB: db}
		left := []vocab.BatchRef{{Run: 1, Index: 3, N: 10}}
		plan := func(discovery string, walked bool) *workflows.JobPlan {
			j := createJob(t, db, site, discovery, []string{"/a"})
			run := 2
			require.NoError(t, models.UpdateJob(ctx, db, j.ID, models.JobUpdate{Run: &run, DirWalkComplete: &walked, Leftover: &left}))
			p, err := a.LoadJobPlan(ctx, j.ID)
			require.NoError(t, err)
			return p
		}
		for _, mode := range []string{models.DiscoveryRecursive, "snapdiff", "policy"} {
			p := plan(mode, false)
			require.False(t, p.Resubmit)
			require.Empty(t, p.Leftover, "%s: walked again, the leftover would run twice", mode)
		}
		p := plan("", false)
		require.Equal(t, left, p.Leftover, "a list of paths runs its leftover and skips its paths")
		p = plan(models.DiscoveryRecursive, true)
		require.True(t, p.Resubmit)
		require.Equal(t, left, p.Leftover)
	})
}

// TestResubmitCommitsTheFirstRunsManifest: a snapdiff run that ends with
// failures keeps its pending manifest on the job, and the resubmit that
// retries those failures is handed it to commit; a walk from scratch
// makes its own.
func TestResubmitCommitsTheFirstRunsManifest(t *testing.T) {
	t.Parallel()
	dbtest.Run(t, func(t *testing.T, db *bun.DB) {
		ctx := context.Background()
		site := ensureSite(t, db, "manifest")
		a := &hubact.Activities{DB: db}
		const pending = "/site/.hub/manifests/0123.manifest.pending-0123456789abcdef"
		for _, walked := range []bool{true, false} {
			j := createJob(t, db, site, "snapdiff", []string{"/a"})
			_, err := a.FinishJob(ctx, workflows.JobEnd{JobID: j.ID, Run: 1, State: vocab.JobSuccess, Snapdiff: pending,
				Aborted: []vocab.BatchRef{{Run: 1, Index: 0, N: 1}}})
			require.NoError(t, err)
			run := 2
			require.NoError(t, models.UpdateJob(ctx, db, j.ID, models.JobUpdate{Run: &run, DirWalkComplete: &walked}))
			p, err := a.LoadJobPlan(ctx, j.ID)
			require.NoError(t, err)
			if walked {
				require.Equal(t, pending, p.Snapdiff, "the resubmit commits the first run's manifest")
			} else {
				require.Empty(t, p.Snapdiff, "a walk from scratch makes its own")
			}
		}
	})
}
