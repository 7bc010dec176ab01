package hub

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// LoadJobPlan reads the job, its definition snapshot, the site's batching
// and glob settings and the targets available at the site.
func (a *Activities) LoadJobPlan(ctx context.Context, jobID int64) (*workflows.JobPlan, error) {
	j, err := models.GetJob(ctx, a.DB, jobID)
	if err != nil {
		return nil, notFoundIsFinal(err)
	}
	s, err := jobSite(ctx, a.DB, j)
	if err != nil {
		return nil, err
	}
	conf, err := models.GetConfiguration(ctx, a.DB)
	if err != nil {
		return nil, err
	}
	// A resubmit reruns failures only when the first discovery completed;
	// otherwise the job is discovered again from scratch. The paths stay
	// here: discovery reads them a page at a time (JobPathsPage).
	p := &workflows.JobPlan{JobID: j.ID, Workflow: j.Workflow, Site: s.Name, Queue: j.Queue, Run: j.Run, Resubmit: j.Run > 1 && j.DirWalkComplete,
		Discovery: deref(j.Discovery), BatchSize: int(s.FileBatchSize),
		BatchBytes: s.FileBatchGB << 30, AutoBatch: s.EnableAutoFileBatchSizing,
		StepTimeout: time.Duration(conf.TaskInvalidationTimeout) * time.Minute, Leftover: j.Leftover, State: j.State,
		Policy: policySelect(j.Definition.Policy)}
	if !p.Resubmit && p.Discovery != "" {
		// Discovered again from scratch, a walk (recursive, snapdiff,
		// policy) finds the paths of the batches an earlier run left
		// again: running those too would act on them twice. A list of
		// paths skips them instead (DiscoverInput.Skip).
		p.Leftover = nil
	}
	if p.Resubmit {
		p.Snapdiff = j.SnapdiffPending
	}
	p.Include = append(globs(s.Include, j.IgnoreSiteIncludes), j.Include...)
	p.Exclude = append(globs(s.Exclude, j.IgnoreSiteExcludes), j.Exclude...)
	if p.Targets, err = a.siteTargets(ctx, s.ID); err != nil {
		return nil, err
	}
	for _, r := range j.Definition.FilterRules {
		p.Rules = append(p.Rules, site.RuleFilter{Type: r.Type, State: r.State})
		var chain []workflows.StepPlan
		for _, st := range r.Action {
			sp := workflows.StepPlan{Name: st.Name, Params: resolveParams(st.Params, j.Fields)}
			if st.Name == "send" || st.Name == "site_sync" {
				if err := a.planTransfer(ctx, &sp, s.ID, p.Targets, j.Definition.DestSites); err != nil {
					return nil, err
				}
			}
			chain = append(chain, sp)
		}
		p.Chains = append(p.Chains, chain)
	}
	return p, nil
}

// jobSite loads job j's site by id (a renamed site keeps its jobs); a site
// that is gone is final.
func jobSite(ctx context.Context, db bun.IDB, j *models.Job) (*models.Site, error) {
	s, err := models.GetJobSite(ctx, db, j)
	if errors.Is(err, models.ErrNotFound) {
		err = fmt.Errorf("the job's site %q (id %d) no longer exists: %w", j.Site, j.SiteID, err)
	}
	return s, notFoundIsFinal(err)
}

// JobSite names job jobID's site as it is called now: its task queues
// follow a rename.
func (a *Activities) JobSite(ctx context.Context, jobID int64) (workflows.SiteRef, error) {
	j, err := models.GetJob(ctx, a.DB, jobID)
	if err != nil {
		return workflows.SiteRef{}, notFoundIsFinal(err)
	}
	s, err := jobSite(ctx, a.DB, j)
	if err != nil {
		return workflows.SiteRef{}, err
	}
	return workflows.SiteRef{ID: s.ID, Name: s.Name}, nil
}

// Bounds of a page of paths (JobPathsPage, FailedPathsPage) when the
// request sets none: a page, and the discovery outcomes it yields, stay
// far below Temporal's 2 MB payload limit whatever the paths' lengths.
const (
	pathsPageLimit = 1000
	pathsPageBytes = 256 << 10
)

// JobPathsPage returns a page of job in.JobID's paths for its discovery:
// a job may name more paths than one Temporal payload holds, so they stay
// in the database and travel a page at a time.
func (a *Activities) JobPathsPage(ctx context.Context, in workflows.JobPathsRequest) (workflows.JobPathsPage, error) {
	j, err := models.GetJob(ctx, a.DB, in.JobID)
	if err != nil {
		return workflows.JobPathsPage{}, notFoundIsFinal(err)
	}
	s, err := jobSite(ctx, a.DB, j)
	if err != nil {
		return workflows.JobPathsPage{}, err
	}
	paths := distinctPaths(j.Paths, deref(j.Discovery) == models.DiscoveryRecursive)
	if in.Limit <= 0 {
		in.Limit = pathsPageLimit
	}
	if in.MaxBytes <= 0 {
		in.MaxBytes = pathsPageBytes
	}
	start := min(max(in.Next, 0), len(paths))
	page := pagePaths(paths[start:], in.Limit, in.MaxBytes)
	next := start + len(page)
	return workflows.JobPathsPage{Paths: page, Next: next, Done: next >= len(paths), Site: s.Name}, nil
}

// pagePaths is the longest prefix of paths holding at most limit paths of
// at most maxBytes bytes together, and at least one path.
func pagePaths(paths []string, limit, maxBytes int) []string {
	n, size := 0, 0
	for n < len(paths) && n < limit {
		size += len(paths[n])
		if n > 0 && size > maxBytes {
			break
		}
		n++
	}
	return paths[:n]
}

// distinctPaths is paths with each path once ("/a" and "/a/" are one
// path), in the order given; with nested, a path inside another
// given path is dropped too, as the walk of that other path covers it.
func distinctPaths(paths []string, nested bool) []string {
	clean := make([]string, len(paths))
	given := make(map[string]bool, len(paths))
	for i, p := range paths {
		clean[i] = path.Clean("/" + p)
		given[clean[i]] = true
	}
	inside := func(c string) bool {
		for d := c; d != "/"; {
			d = path.Dir(d)
			if given[d] {
				return true
			}
		}
		return false
	}
	seen := make(map[string]bool, len(paths))
	out := make([]string, 0, len(paths))
	for i, p := range paths {
		c := clean[i]
		if seen[c] || (nested && inside(c)) {
			continue
		}
		seen[c] = true
		out = append(out, p)
	}
	return out
}

// planTransfer resolves a send/site_sync step's destination (by the id
// recorded when the job was made, else by name) and the targets
// available on both sites.
func (a *Activities) planTransfer(ctx context.Context, sp *workflows.StepPlan, srcID int64, src []site.TargetSpec, ids map[string]int64) error {
	sp.DestSite, _ = sp.Params["destination_site"].(string)
	sp.DestQueue, _ = sp.Params["destination_queue"].(string)
	if sp.DestQueue == "" {
		sp.DestQueue = vocab.DefaultQueue
	}
	var dest *models.Site
	var err error
	if id, ok := ids[sp.DestSite]; ok {
		dest, err = models.GetSite(ctx, a.DB, id)
	} else {
		dest, err = models.GetSiteByName(ctx, a.DB, sp.DestSite)
	}
	if err != nil {
		return notFoundIsFinal(fmt.Errorf("destination site %q: %w", sp.DestSite, err))
	}
	sp.DestSite = dest.Name
	if dest.ID == srcID {
		return temporal.NewNonRetryableApplicationError("the destination site is the job's own site", vocab.ErrBadInput, nil)
	}
	ts, err := models.JobTargets(ctx, a.DB, dest.ID)
	if err != nil {
		return err
	}
	for _, t := range ts {
		for _, s := range src {
			if s.Name == t.Name {
				sp.Shared = append(sp.Shared, s)
			}
		}
	}
	return nil
}

// siteTargets describes the site's enabled targets for its worker.
func (a *Activities) siteTargets(ctx context.Context, siteID int64) ([]site.TargetSpec, error) {
	ts, err := models.JobTargets(ctx, a.DB, siteID)
	if err != nil {
		return nil, err
	}
	specs := make([]site.TargetSpec, len(ts))
	for i, t := range ts {
		specs[i] = targetSpec(t)
	}
	return specs, nil
}

// targetSpec describes a target for the site. A field set on the target
// wins over its bucket's. Secrets stay sealed: they cross Temporal history
// encrypted and only the site worker, holding the same secret key, opens
// them.
func targetSpec(t models.ExternalTarget) site.TargetSpec {
	spec := site.TargetSpec{Name: t.Name, LocalFileRegex: t.LocalFileRegex, DeleteOnRecall: t.DeleteOnRecall,
		SecretsTable: "external_targets", Secrets: map[string]string{}}
	loc, storage := t.TargetLocation, t.StorageType
	bucketName := ""
	if b := t.Bucket; b != nil {
		bucketName = b.Name
		if loc.Endpoint == "" {
			loc.Endpoint, loc.Port, loc.Scheme, loc.SSLVerify = b.Endpoint, b.Port, b.Scheme, b.SSLVerify
		}
		if loc.Region == "" {
			loc.Region = b.Region
		}
		if loc.MigrationTargetFolder == "" {
			loc.MigrationTargetFolder = b.MigrationTargetFolder
		}
		if t.SecretAccessKeyEnc == "" && t.AccessKeyIDEnc == "" {
			spec.SecretsTable = "buckets"
			t.TargetSecrets = b.TargetSecrets
		}
	}
	for _, f := range models.SecretFields {
		if v := *t.TargetSecrets.Field(f); v != "" {
			spec.Secrets[f] = v
		}
	}
	port := 0
	if loc.Port != nil {
		port = int(*loc.Port)
	}
	spec.Config = targets.Config{StorageType: storage, MigrationTargetFolder: loc.MigrationTargetFolder,
		Endpoint: loc.Endpoint, Port: port, Scheme: loc.Scheme, Region: loc.Region, SSLVerify: loc.SSLVerify,
		Bucket: bucketName}
	if !strings.EqualFold(storage, "filesystem") {
		// An object store's folder is its key prefix, as the hub's own
		// listing of the target reads it (TargetDriverConfig).
		spec.Config.Prefix = loc.MigrationTargetFolder
	}
	return spec
}

// globs reads a site's include/exclude object: {"globs": [...]} or
// {"<name>": "<glob>", ...}.
func globs(m map[string]any, ignore bool) []string {
	if ignore || len(m) == 0 {
		return nil
	}
	var out []string
	for k, v := range m {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, g := range x {
				if s, ok := g.(string); ok {
					out = append(out, s)
				}
			}
		default:
			out = append(out, k)
		}
	}
	return out
}

// resolveParams replaces "$field" values with the job's runtime field.
func resolveParams(params map[string]any, fields map[string]any) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		if s, ok := v.(string); ok && strings.HasPrefix(s, "$") {
			v = fields[strings.TrimPrefix(s, "$")]
		}
		out[k] = v
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// notFoundIsFinal makes a missing record (models.ErrNotFound, wrapped or
// not) a non-retryable error: retrying cannot bring it back.
func notFoundIsFinal(err error) error {
	if errors.Is(err, models.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrNotFound, err)
	}
	return err
}

// unlessGone is err, made final (notFoundIsFinal) when job id no longer
// exists: a call run again for a job deleted meanwhile (its end was
// recorded, then its worker died before the workflow learnt it) fails on
// the rows it would add for the job, and retrying cannot help.
func (a *Activities) unlessGone(ctx context.Context, id int64, err error) error {
	if err == nil {
		return nil
	}
	if _, gerr := models.GetJob(ctx, a.DB, id); errors.Is(gerr, models.ErrNotFound) {
		return notFoundIsFinal(gerr)
	}
	return err
}

// inAnotherRun tells whether err, from an update made only in run
// (models.JobUpdate.InRun), means that the job is no longer in that run
// (resubmitted since, or deleted): a call of an old run, made again, that
// has nothing to record.
func inAnotherRun(err error, run int) bool {
	return run != 0 && errors.Is(err, models.ErrNotFound)
}

// SetJobState records a job's state, unless the job has moved on to
// another run than c's (the call run again after a resubmit).
func (a *Activities) SetJobState(ctx context.Context, c workflows.JobStateChange) error {
	if c.Completed || vocab.JobFinished(c.State) {
		err := models.UpdateJob(ctx, a.DB, c.JobID, models.JobUpdate{InRun: c.Run, State: c.State, Started: c.Started, Completed: c.Completed})
		if inAnotherRun(err, c.Run) {
			return nil
		}
		return err
	}
	return models.SetRunningState(ctx, a.DB, c.JobID, c.Run, c.State, c.Started)
}

// RecordDiscovery stores discovery's counts and failures, unless the job
// has moved on to another run than d's.
func (a *Activities) RecordDiscovery(ctx context.Context, d workflows.DiscoveryDone) error {
	u := models.JobUpdate{InRun: d.Run}
	if d.Final {
		t := true
		u.DirWalkComplete = &t
	}
	switch {
	case d.Paged:
		u.NumFiles = &d.Found // a total: a retried page sets the same
	case d.Final:
		u.NumFiles = &d.Files
	}
	if err := models.UpdateJob(ctx, a.DB, d.JobID, u); inAnotherRun(err, d.Run) {
		return nil
	} else if err != nil {
		return err
	}
	if len(d.Failed) == 0 {
		return nil
	}
	taskID := fmt.Sprintf("job-%d-r%d-discovery", d.JobID, d.Run)
	if d.Page > 0 {
		taskID += fmt.Sprintf("-p%d", d.Page)
	}
	t := &models.Task{JobID: d.JobID, TaskType: "discovery", TaskID: taskID,
		State: vocab.TaskFailure, Run: d.Run, NumPaths: int64(len(d.Failed))}
	if err := models.CreateTask(ctx, a.DB, t); err != nil {
		return err
	}
	if err := models.RecordOutcomes(ctx, a.DB, d.JobID, t.ID, outcomes(d.Failed)); err != nil {
		return err
	}
	if d.Final && !d.Paged {
		n := d.Files + int64(len(d.Failed))
		return models.UpdateJob(ctx, a.DB, d.JobID, models.JobUpdate{NumFiles: &n})
	}
	return nil
}

// StartTask records a STARTED task, idempotently, and returns its id.
func (a *Activities) StartTask(ctx context.Context, s workflows.TaskStart) (int64, error) {
	now := time.Now().UTC()
	t := &models.Task{JobID: s.JobID, Site: s.Site, Queue: s.Queue, TaskType: s.Name, State: vocab.TaskStarted,
		TaskID: fmt.Sprintf("job-%d-r%d-b%d-r%d-s%d", s.JobID, s.Run, s.Batch, s.BatchRun, s.Step),
		Run:    s.Run, Batch: s.Batch, Step: s.Step, NumPaths: int64(s.NumPaths), Started: &now,
		FriendlyName: fmt.Sprintf("%s of batch %d", s.Name, s.Batch)}
	if err := models.CreateTask(ctx, a.DB, t); err != nil {
		return 0, a.unlessGone(ctx, s.JobID, err)
	}
	return t.ID, nil
}

// FinishTask stores a task's outcomes (bulk) and final state.
func (a *Activities) FinishTask(ctx context.Context, e workflows.TaskEnd) (workflows.TaskCounts, error) {
	var c workflows.TaskCounts
	for _, o := range e.Outcomes {
		switch o.State {
		case site.OutcomeSuccess:
			c.Succeeded++
		case site.OutcomeFailure:
			c.Failed++
		default:
			c.Skipped++
		}
	}
	if err := models.RecordOutcomes(ctx, a.DB, e.JobID, e.TaskID, outcomes(e.Outcomes)); err != nil {
		return c, a.unlessGone(ctx, e.JobID, err)
	}
	state := e.State
	if state == "" {
		state = vocab.TaskSuccess
		if c.Failed > 0 {
			state = vocab.TaskFailure
		}
	}
	result := map[string]any{"succeeded": c.Succeeded, "failed": c.Failed, "skipped": c.Skipped}
	if e.Error != "" {
		result["error"] = vocab.CleanErrorText(e.Error)
	}
	if err := models.FinishTask(ctx, a.DB, e.TaskID, state, result); err != nil {
		return c, err
	}
	// Failed paths, or a step that failed for good (its batch is
	// aborted): the job is failing.
	if c.Failed > 0 || state == vocab.TaskError {
		return c, a.unlessGone(ctx, e.JobID, a.failingAlert(ctx, e.JobID))
	}
	return c, nil
}

func outcomes(in []site.Outcome) []models.PathOutcome {
	out := make([]models.PathOutcome, len(in))
	for i, o := range in {
		out[i] = models.PathOutcome{Path: o.Path, State: o.State, Code: codeOf(o.State), Message: o.Message, Size: o.Size}
	}
	return out
}

func codeOf(state string) string {
	switch state {
	case site.OutcomeSuccess:
		return "ok"
	case site.OutcomeFailure:
		return "failed"
	}
	return "skipped"
}

// FinishJob records a run's end. A SUCCESS with failed, cancelled or
// aborted paths is stored as SUCCESS with has_failures; a run where every
// path failed is FAILURE. The end of a run the job has left (a call run
// again after the job was resubmitted) records nothing (Superseded).
func (a *Activities) FinishJob(ctx context.Context, e workflows.JobEnd) (workflows.JobOutcome, error) {
	if err := models.CancelOpenTasks(ctx, a.DB, e.JobID); err != nil {
		return workflows.JobOutcome{}, err
	}
	if err := models.RefreshJobCounts(ctx, a.DB, e.JobID); err != nil {
		return workflows.JobOutcome{}, err
	}
	j, err := models.GetJob(ctx, a.DB, e.JobID)
	if err != nil {
		return workflows.JobOutcome{}, notFoundIsFinal(err) // a deleted job has nothing to record
	}
	var cancelled, aborted int64
	for _, b := range e.Cancelled {
		cancelled += int64(b.N)
	}
	for _, b := range e.Aborted {
		aborted += int64(b.N)
	}
	leftover := append(append([]vocab.BatchRef{}, e.Cancelled...), e.Aborted...)
	out := workflows.JobOutcome{State: e.State, HasFailures: j.NumFailedFiles > 0 || aborted > 0 || cancelled > 0}
	reason := ""
	switch {
	case e.State == vocab.JobFailure:
		reason = e.Error
	case e.State == vocab.JobSuccess && j.NumProcessedFiles == 0 && j.NumSkippedFiles == 0 && (j.NumFailedFiles > 0 || aborted > 0):
		out.State = vocab.JobFailure
		if reason, err = a.everyPathFailed(ctx, j, aborted); err != nil {
			return workflows.JobOutcome{}, err
		}
	}
	reason = shorten(vocab.CleanErrorText(reason), maxJobError)
	err = a.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		err := models.UpdateJob(ctx, tx, e.JobID, models.JobUpdate{InRun: e.Run, State: out.State, Completed: true,
			HasFailures: &out.HasFailures, Leftover: &leftover, Cancelled: &cancelled, Aborted: &aborted, Error: &reason,
			SnapdiffPending: &e.Snapdiff})
		if err != nil {
			return err
		}
		return jobEndAlerts(ctx, tx, e.JobID)
	})
	if inAnotherRun(err, e.Run) {
		return workflows.JobOutcome{State: j.State, Superseded: true}, nil
	}
	return out, err
}

// maxJobError bounds the error recorded on a job, in bytes.
const maxJobError = 4096

// everyPathFailed says why job j, none of whose paths succeeded, failed:
// the first failures, with their reasons (all of them are in its job
// stats).
func (a *Activities) everyPathFailed(ctx context.Context, j *models.Job, aborted int64) (string, error) {
	first, err := models.FirstFailures(ctx, a.DB, j.ID, 3)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "every path failed: %d failed", j.NumFailedFiles)
	if aborted > 0 {
		fmt.Fprintf(&b, ", %d in batches aborted (their step failed for good, see the job's tasks)", aborted)
	}
	for i, f := range first {
		if i == 0 {
			b.WriteString("; first: ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", f.Path, f.Message)
	}
	if j.NumFailedFiles > int64(len(first)) && len(first) > 0 {
		b.WriteString("; … (see the job's stats)")
	}
	return b.String(), nil
}

// shorten cuts s to at most n bytes, on a rune boundary.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// FailedPathsPage returns up to limit paths of the job not yet done
// (failed, cancelled or aborted outcomes), after the given path, and at
// most pathsPageBytes of them: the page and its discovery's outcomes stay
// within Temporal's payload limit whatever the paths' lengths. The
// workflow pages on from the last path returned.
func (a *Activities) FailedPathsPage(ctx context.Context, jobID int64, after string, limit int) ([]string, error) {
	paths, err := models.UnfinishedPaths(ctx, a.DB, jobID, after, limit)
	if err != nil {
		return nil, err
	}
	return pagePaths(paths, len(paths), pathsPageBytes), nil
}
