package hub

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// FireSchedule starts the jobs of one firing of a schedule: one per
// schedule workflow (one per workflow and managed path with snapdiff
// discovery, which keeps a manifest per managed path), through the same
// validation as POST /file/workflow/, owned by the system, with the
// schedule set. Each job carries the firing's key, so a retry finds the
// jobs an earlier attempt started. A schedule deleted since fires nothing.
func (a *Activities) FireSchedule(ctx context.Context, in workflows.Fire) (*workflows.FireResult, error) {
	sch, err := models.GetSchedule(ctx, a.DB, in.ID)
	if errors.Is(err, models.ErrNotFound) {
		return &workflows.FireResult{}, nil
	} else if err != nil {
		return nil, err
	}
	if why, err := a.pausedSince(ctx, in, workflows.ScheduleTemporalID(in.ID)); why != "" || err != nil {
		return &workflows.FireResult{Skipped: why}, err
	}
	paths, skip, err := a.managedPaths(ctx, sch)
	if skip != "" || err != nil {
		return &workflows.FireResult{Skipped: skip}, err
	}
	groups := [][]string{paths}
	if sch.Discovery == "snapdiff" {
		groups = nil
		for _, p := range paths {
			groups = append(groups, []string{p})
		}
	}
	res := &workflows.FireResult{}
	var refused []string
	svc := a.changes(ctx)
	for _, w := range sch.Workflows {
		for _, g := range groups {
			// A retry finds the jobs an earlier attempt started, even
			// when the managed paths changed in between: a snapdiff
			// firing's job is keyed by its path, another's by the
			// workflow alone (/0, as earlier versions keyed it).
			key := fmt.Sprintf("%s/%d/0", in.Key, w.ID)
			if sch.Discovery == "snapdiff" {
				key = fmt.Sprintf("%s/%d/%x", in.Key, w.ID, sha256.Sum256([]byte(g[0])))
			}
			queue, discovery := w.Queue, sch.Discovery
			// A schedule's workflows run on its site (moved with it).
			req := changes.JobRequest{Site: sch.Site.Name, Workflow: w.Workflow, Discovery: &discovery, Fields: w.Fields,
				Paths: g, Queue: &queue, IdempotencyKey: &key, PathsField: "managed_paths",
				Owner: changes.JobOwner{ScheduleID: &sch.ID, ScheduleName: sch.Name}}
			j, _, err := svc.SubmitJob(ctx, req)
			var bad models.FieldErrors
			if errors.As(err, &bad) {
				refused = append(refused, fmt.Sprintf("workflow %s: %s", w.Workflow, bad.Messages()))
				continue
			} else if err != nil {
				return nil, err
			}
			res.Jobs = append(res.Jobs, j.ID)
		}
	}
	if len(refused) > 0 {
		activity.GetLogger(ctx).Warn("schedule firing refused", "schedule", sch.Name, "why", refused)
		if len(res.Jobs) == 0 {
			return nil, temporal.NewNonRetryableApplicationError(
				"schedule "+sch.Name+" started no job: "+strings.Join(refused, "; "), vocab.ErrBadInput, nil)
		}
	}
	return res, nil
}

// managedPaths are a schedule's managed paths, in order; a schedule of a
// space without any manages the space's folder on the schedule's site.
// There is none (skip says why) when the space was deleted or the site
// left it since: its folder there is gone, and a job would fail on it.
func (a *Activities) managedPaths(ctx context.Context, sch *models.Schedule) (paths []string, skip string, err error) {
	for p := range sch.ManagedPaths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	if len(paths) == 0 && sch.SpaceID != nil {
		sp, err := models.GetSpace(ctx, a.DB, *sch.SpaceID, models.SpaceFilter{})
		switch {
		case errors.Is(err, models.ErrNotFound):
			return nil, "its space no longer exists", nil
		case err != nil:
			return nil, "", err
		case !sp.OnSite(sch.SiteID):
			return nil, fmt.Sprintf("its site has left its space %s", sp.Name), nil
		}
		paths = []string{sp.Mountpoint}
	}
	return paths, "", nil
}

// waitJobsEvery is how often WaitJobs looks at its jobs.
const waitJobsEvery = 5 * time.Second

// WaitJobs returns once every job has ended (or was deleted), heartbeating
// while it waits.
func (a *Activities) WaitJobs(ctx context.Context, ids []int64) error {
	for {
		running, err := models.CountUnfinishedJobs(ctx, a.DB, ids)
		if err != nil {
			return err
		}
		if running == 0 {
			return nil
		}
		activity.RecordHeartbeat(ctx, running)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(waitJobsEvery):
		}
	}
}

// PolicyPlan tells a policy's firing its site and triggers.
func (a *Activities) PolicyPlan(ctx context.Context, id int64) (*workflows.PolicyPlan, error) {
	p, err := models.GetPolicy(ctx, a.DB, id)
	if errors.Is(err, models.ErrNotFound) {
		return &workflows.PolicyPlan{}, nil
	} else if err != nil {
		return nil, err
	}
	if p.Site == nil {
		return &workflows.PolicyPlan{}, nil
	}
	return &workflows.PolicyPlan{Found: true, Site: p.Site.Name, Triggers: policyTriggers(p.Triggers)}, nil
}

// pausedSince says why a Temporal Schedule's firing of record in.ID
// (Temporal Schedule id) starts nothing: the record, or the hub, paused
// it since the firing began (it may wait long for a worker); or, around
// a daylight-saving change, its time (in.At) is the second of a local
// time the clocks went back over, or a local time the record's cron does
// not name (changes.Service.ClockWhy). A run asked for now always fires,
// and so does the retry of an attempt that started jobs.
func (a *Activities) pausedSince(ctx context.Context, in workflows.Fire, id string) (string, error) {
	if in.Now {
		return "", nil
	}
	svc := a.changes(ctx)
	why, err := svc.PausedWhy(ctx, id)
	if err != nil {
		return "", err
	}
	if why != "" {
		why = "not fired: " + why
	} else if why, err = svc.ClockWhy(ctx, id, in.At, in.Key); why == "" || err != nil {
		return "", err
	}
	// An attempt after one that started jobs goes on: a retry finds them
	// (idempotency keys), and its firing waits for them.
	if started, err := models.FiringStarted(ctx, a.DB, in.Key); started || err != nil {
		return "", err
	}
	activity.GetLogger(ctx).Info("firing starts nothing", "schedule", id, "firing", in.Key, "why", why)
	return why, nil
}

// FirePolicy starts the job of one firing of a policy (changes.RunPolicy),
// once per firing whatever the retries.
func (a *Activities) FirePolicy(ctx context.Context, in workflows.Fire) (*workflows.FireResult, error) {
	if why, err := a.pausedSince(ctx, in, workflows.PolicyTemporalID(in.ID)); why != "" || err != nil {
		return &workflows.FireResult{Skipped: why}, err
	}
	j, err := a.changes(ctx).RunPolicy(ctx, in.ID, in.Key)
	var bad models.FieldErrors
	switch {
	case errors.Is(err, models.ErrNotFound):
		return &workflows.FireResult{Skipped: "the policy no longer exists"}, nil
	case errors.As(err, &bad):
		return nil, temporal.NewNonRetryableApplicationError("the policy cannot run: "+bad.Messages(), vocab.ErrBadInput, nil)
	case err != nil:
		return nil, err
	}
	return &workflows.FireResult{Jobs: []int64{j.ID}}, nil
}

// policyTriggers are a policy's triggers as its site measures them.
func policyTriggers(ts []models.PolicyTrigger) []site.PolicyTrigger {
	out := make([]site.PolicyTrigger, 0, len(ts))
	for _, t := range ts {
		out = append(out, site.PolicyTrigger{Pool: t.PoolName, Lower: t.LowerThreshold, Upper: t.UpperThreshold,
			Premigrate: t.PremigrateThreshold, MaxUtilisation: t.MaxUtilisation})
	}
	return out
}

// policySelect is a policy job's selection as its site runs it.
func policySelect(p *models.PolicyRun) *site.PolicySelect {
	if p == nil {
		return nil
	}
	sel := &site.PolicySelect{OrderBy: p.OrderBy, Reverse: p.Reverse, Threads: p.Threads,
		Triggers: policyTriggers(p.Triggers), States: p.States}
	for _, g := range p.Groups {
		pg := site.PolicyGroup{Name: g.Name}
		for _, d := range g.DateConditions {
			pg.Dates = append(pg.Dates, site.DateCondition{Field: d.DateField, OlderOrNewer: d.OlderOrNewer, Age: d.Age, Include: d.Include})
		}
		for _, c := range g.FilesizeConditions {
			pg.Sizes = append(pg.Sizes, site.SizeCondition{GreaterOrLess: c.GreaterOrLess, Size: c.Size, Include: c.Include})
		}
		for _, c := range g.FiletypeConditions {
			pg.Types = append(pg.Types, site.FileTypeCondition{FileTypes: c.Filetypes, Include: c.Include})
		}
		sel.Groups = append(sel.Groups, pg)
	}
	return sel
}

// SnapshotPlan tells a space's snapshot firing what to do at each of the
// space's sites: nothing when the space or its schedule is gone.
func (a *Activities) SnapshotPlan(ctx context.Context, spaceID int64) (*workflows.SnapshotPlan, error) {
	sp, err := models.GetSpace(ctx, a.DB, spaceID, models.SpaceFilter{})
	if errors.Is(err, models.ErrNotFound) {
		return &workflows.SnapshotPlan{}, nil
	} else if err != nil {
		return nil, err
	}
	if sp.SnapshotSchedule == nil || sp.SnapshotSchedule.Frequency == "" {
		return &workflows.SnapshotPlan{}, nil
	}
	// Only Temporal Schedules fire these: one that began before the hub
	// paused its schedules takes nothing.
	if why, err := a.changes(ctx).PausedWhy(ctx, workflows.SnapshotTemporalID(spaceID)); why != "" || err != nil {
		return &workflows.SnapshotPlan{}, err
	}
	keep, err := site.ParseAge(sp.SnapshotSchedule.Duration)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError("the snapshot schedule's duration: "+err.Error(), vocab.ErrBadInput, nil)
	}
	plan := &workflows.SnapshotPlan{Found: true}
	for _, l := range sp.Links {
		if l.Site == nil {
			continue
		}
		ts, err := a.siteTargets(ctx, l.Site.ID)
		if err != nil {
			return nil, err
		}
		plan.Sites = append(plan.Sites, workflows.SnapshotAtSite{Site: l.Site.Name, Input: site.SpaceSnapshotInput{
			Space: snapshotKey(sp), Folder: sp.Mountpoint, KeepFor: keep, LockThreshold: l.Site.LockThreshold, Targets: ts}})
	}
	return plan, nil
}

// snapshotKey names a space's folder of snapshots (.snapshots/<key>): the
// name of its C+J space for a space at /spaces/<name> (its scheduled
// snapshots beside the C+J ones), else its UUID; never its hub name, a
// label that may change (two spaces renamed into each other's names shared
// a folder, and one's retention removed the other's snapshots) and may hold
// characters a folder name may not.
func snapshotKey(sp *models.Space) string {
	if name := models.CJSpaceName(sp.Mountpoint); name != "" {
		return name
	}
	return sp.UUID
}
