package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// Alert names the jobs engine raises.
const (
	alertJobSucceeded     = "job_completed_success"
	alertJobHasFailures   = "job_completed_has_failures"
	alertJobFailed        = "job_completed_failed"
	alertJobFailing       = "job_inprogress_failing"
	alertJobNotStarted    = "job_notstarted"
	alertJobNotProgressed = "job_notprogressed"
)

// alertWanted applies the configuration's alert_scheduled/alert_unscheduled
// restriction: with neither set every job may alert; with one set only
// jobs of that kind do.
func alertWanted(conf models.Configuration, j *models.Job) bool {
	if !conf.AlertScheduled && !conf.AlertUnscheduled {
		return true
	}
	if j.ScheduleID != nil {
		return conf.AlertScheduled
	}
	return conf.AlertUnscheduled
}

// raiseJobAlert records an alert about job j unless the same alert for it
// exists already (activities may be retried).
func raiseJobAlert(ctx context.Context, db bun.IDB, j *models.Job, name, severity, summary string) error {
	summary = fmt.Sprintf("job %d (%s on %s): %s", j.ID, j.Workflow, j.Site, summary)
	n, err := db.NewSelect().Model((*models.Alert)(nil)).Where("name = ? AND summary = ?", name, summary).Count(ctx)
	if err != nil || n > 0 {
		return err
	}
	_, err = models.RaiseAlert(ctx, db, models.Alert{Name: name, Severity: severity, Site: j.Site, Queue: j.Queue, Summary: summary})
	return err
}

// jobEndAlerts raises the alert the configuration asks for when a job
// ends, in the transaction (db) that records its end: nobody sees a job
// finished without its alert.
func jobEndAlerts(ctx context.Context, db bun.IDB, jobID int64) error {
	conf, err := models.GetConfiguration(ctx, db)
	if err != nil {
		return err
	}
	j, err := models.GetJob(ctx, db, jobID)
	if err != nil || !alertWanted(conf, j) {
		return err
	}
	switch {
	case j.State == vocab.JobFailure && conf.AlertCompletedFailedJobs:
		return raiseJobAlert(ctx, db, j, alertJobFailed, models.SeverityError, "failed")
	case j.State == vocab.JobSuccess && j.HasFailures && conf.AlertCompletedHasFailuresJobs:
		return raiseJobAlert(ctx, db, j, alertJobHasFailures, models.SeverityWarning,
			fmt.Sprintf("finished with %d failed, %d aborted, %d cancelled paths", j.NumFailedFiles, j.NumAbortedFiles, j.NumCancelledFiles))
	case j.State == vocab.JobSuccess && !j.HasFailures && conf.AlertCompletedSuccessJobs:
		return raiseJobAlert(ctx, db, j, alertJobSucceeded, models.SeverityInfo, "succeeded")
	}
	return nil
}

// failingAlert raises alert_inprogress_failing_jobs once per job run.
func (a *Activities) failingAlert(ctx context.Context, jobID int64) error {
	conf, err := models.GetConfiguration(ctx, a.DB)
	if err != nil || !conf.AlertInprogressFailingJobs {
		return err
	}
	j, err := models.GetJob(ctx, a.DB, jobID)
	if err != nil || !alertWanted(conf, j) {
		return err
	}
	return raiseJobAlert(ctx, a.DB, j, alertJobFailing, models.SeverityWarning, fmt.Sprintf("paths are failing (run %d)", j.Run))
}

// purgePerPass bounds the jobs one maintenance pass purges, so its
// result stays small; the next pass takes the rest.
const purgePerPass = 1000

// Maintain purges finished jobs older than jobs_ttl days and raises the
// not-started / not-progressed alerts for jobs stuck past their thresholds.
func (a *Activities) Maintain(ctx context.Context) (workflows.MaintenanceResult, error) {
	var res workflows.MaintenanceResult
	conf, err := models.GetConfiguration(ctx, a.DB)
	if err != nil {
		return res, err
	}
	now := time.Now().UTC()
	if conf.JobsTTL > 0 {
		if res.Purged, res.Cleanups, err = a.purgeJobs(ctx, now.Add(-time.Duration(conf.JobsTTL)*24*time.Hour)); err != nil {
			return res, err
		}
	}
	if conf.SearchResultTTL > 0 {
		// Searches and their results older than search_result_ttl days.
		if _, err := models.DeleteSearchesBefore(ctx, a.DB, now.Add(-time.Duration(conf.SearchResultTTL)*24*time.Hour), purgePerPass); err != nil {
			return res, err
		}
	}
	// Answers kept for cache_ttl (analytics, listings): a week back is
	// more than any cache_ttl worth asking for (docs/search-analytics.md).
	if _, err := models.PruneSiteAnswers(ctx, a.DB, now.Add(-models.SiteAnswersKept)); err != nil {
		return res, err
	}
	if res.PairedSpaces, err = a.pairCJSpaces(ctx); err != nil {
		return res, err
	}
	check := func(enabled bool, threshold int64, state []string, column, name, what string, count *int) error {
		if !enabled || threshold <= 0 {
			return nil
		}
		var stuck []models.Job
		err := a.DB.NewSelect().Model(&stuck).Where("state IN (?) AND "+column+" < ?", bun.In(state),
			now.Add(-time.Duration(threshold)*time.Second)).Scan(ctx)
		if err != nil {
			return err
		}
		for i := range stuck {
			if !alertWanted(conf, &stuck[i]) {
				continue
			}
			if err := raiseJobAlert(ctx, a.DB, &stuck[i], name, models.SeverityWarning, what); err != nil {
				return err
			}
			*count++
		}
		return nil
	}
	if err := check(conf.AlertNotstartedJobs, conf.NotstartedJobThreshold, []string{vocab.JobPending}, "created",
		alertJobNotStarted, fmt.Sprintf("not started after %d s", conf.NotstartedJobThreshold), &res.NotStarted); err != nil {
		return res, err
	}
	err = check(conf.AlertNotprogressedJobs, conf.NotprogressedJobThreshold, []string{vocab.JobStarted}, "updated",
		alertJobNotProgressed, fmt.Sprintf("no progress for %d s", conf.NotprogressedJobThreshold), &res.NotProgressed)
	return res, err
}

// purgeJobs deletes up to purgePerPass jobs finished before cutoff and
// says whose batch files to remove. The DELETE repeats the SELECT's
// conditions, so a job resubmitted in between is kept, and names what it
// deleted itself (RETURNING).
func (a *Activities) purgeJobs(ctx context.Context, cutoff time.Time) (int, []workflows.JobCleanup, error) {
	finished := bun.In([]string{vocab.JobSuccess, vocab.JobFailure, vocab.JobCancelled})
	var ids []int64
	err := a.DB.NewSelect().Model((*models.Job)(nil)).Column("id").
		Where("state IN (?) AND completed < ?", finished, cutoff).Order("id").Limit(purgePerPass).Scan(ctx, &ids)
	if err != nil || len(ids) == 0 {
		return 0, nil, err
	}
	var gone []models.Job
	err = a.DB.NewDelete().Model(&gone).Where("id IN (?) AND state IN (?) AND completed < ?", bun.In(ids), finished, cutoff).
		Returning("id, site, site_id, queue").Scan(ctx)
	if err != nil {
		return 0, nil, err
	}
	// A job keeps its site by id: the batch files are on the queue of
	// the site's name now, should it have been renamed.
	var siteIDs []int64
	for _, j := range gone {
		siteIDs = append(siteIDs, j.SiteID)
	}
	var sites []models.Site
	if err := a.DB.NewSelect().Model(&sites).Column("s.id", "s.name").Where("s.id IN (?)", bun.In(siteIDs)).Scan(ctx); err != nil {
		return 0, nil, err
	}
	names := map[int64]string{}
	for _, st := range sites {
		names[st.ID] = st.Name
	}
	var cleanups []workflows.JobCleanup
	bySiteQueue := map[[2]string]int{}
	for _, j := range gone {
		if name, ok := names[j.SiteID]; ok {
			j.Site = name
		}
		k := [2]string{j.Site, j.Queue}
		n, ok := bySiteQueue[k]
		if !ok {
			n = len(cleanups)
			bySiteQueue[k] = n
			cleanups = append(cleanups, workflows.JobCleanup{Site: j.Site, Queue: j.Queue})
		}
		cleanups[n].JobIDs = append(cleanups[n].JobIDs, j.ID)
	}
	return len(gone), cleanups, nil
}

// pairCJSpaces gives every live C+J space item its hub API space (made,
// or joined by the item's site) where it has none: one-sided records
// written before the two APIs shared spaces (docs/spaces-one-object.md).
// An item that cannot be paired (the name or folder is another hub
// space's) is logged and left alone. It returns how many it paired.
func (a *Activities) pairCJSpaces(ctx context.Context) (int, error) {
	var items []models.CJItem
	err := a.DB.NewSelect().Model(&items).Where("ci.type = ? AND NOT ci.deleted", models.CJSpaces).Order("ci.id").Scan(ctx)
	if err != nil {
		return 0, err
	}
	var sites []models.Site
	if err := a.DB.NewSelect().Model(&sites).Column("s.id", "s.name").Scan(ctx); err != nil {
		return 0, err
	}
	siteIDs := map[string]int64{}
	for _, s := range sites {
		siteIDs[s.Name] = s.ID
	}
	paired := 0
	for i := range items {
		it := &items[i]
		siteID, ok := siteIDs[it.Site]
		if !ok {
			continue // a C+J API for a site the hub has no record of
		}
		sp, err := models.SpaceByMountpoint(ctx, a.DB, models.CJSpaceMountpoint(it.Name))
		if err == nil && slices.ContainsFunc(sp.Links, func(l models.SpaceSite) bool { return l.SiteID == siteID }) {
			continue
		} else if err != nil && !errors.Is(err, models.ErrNotFound) {
			return paired, err
		}
		err = a.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return models.RelinkHubSpace(ctx, tx, it) })
		if err != nil {
			slog.WarnContext(ctx, "a C+J space has no hub API space and cannot be given one", "site", it.Site, "space", it.Name, "error", err)
			continue
		}
		paired++
	}
	return paired, nil
}
