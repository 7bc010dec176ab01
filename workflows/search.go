package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// Names of the search workflows.
const (
	SearchWorkflowName        = "SearchWorkflow"
	SetMetadataWorkflowName   = "SetMetadataWorkflow"
	ScanFileIndexWorkflowName = "ScanFileIndexWorkflow"
)

// SearchWorkflowID is the workflow ID of search id.
func SearchWorkflowID(id int64) string { return fmt.Sprintf("search-%d", id) }

// Statuses of a site in a search (models keeps the same words).
const (
	SearchSiteAnswered = "answered"
	SearchSiteFailed   = "failed"
	SearchSiteTimedOut = "timed_out"
	SearchSiteStopped  = "stopped"
)

// SearchInput is a search across sites.
type SearchInput struct {
	SearchID int64
	Sites    []string
	// Query is asked of every site (its After and Limit are the
	// workflow's).
	Query site.SearchFilesInput
	// MaxResults caps the results of the whole search.
	MaxResults int64
	// Timeout bounds how long the search waits for any site: a site
	// without a worker is timed out then, and the search ends partial.
	Timeout time.Duration
}

// SearchPage is a page of a site's results for the hub to store.
type SearchPage struct {
	SearchID int64
	Site     string
	Files    []site.FoundFile
	// More: the site has results after these.
	More bool
}

// SearchSiteResult is how a site ended in a search.
type SearchSiteResult struct {
	SearchID int64
	Site     string
	Status   string
	Error    string
	Scanned  time.Time // when the site's index was last scanned in full
}

// Hub activity names of the search.
const (
	actStoreSearchPage  = "StoreSearchPage"
	actFinishSearchSite = "FinishSearchSite"
	actFinishSearch     = "FinishSearch"
)

// searchPageSize is the entries one site activity returns: small enough
// for a payload (a few hundred KB), big enough that a capped search of
// 100,000 results takes 100 round trips, not thousands.
const searchPageSize = 1000

// searchHeartbeat: the first search of a site builds its index, which
// heartbeats; a worker dying mid-scan is noticed this soon.
const searchHeartbeat = 30 * time.Second

// SearchWorkflow asks each site, in parallel on its own default queue,
// for the entries matching the query, page by page from the site's file
// index, and has the hub store each page as it comes, so results are
// readable while later sites are still answering. Each site ends
// answered, failed, timed out (no answer before Timeout) or stopped (the
// cap was reached); then the search is finished. A deleted search stops
// the workflow at its next page.
func SearchWorkflow(ctx workflow.Context, in SearchInput) error {
	hub := workflow.WithActivityOptions(ctx, hubOptions)
	deadline := workflow.Now(ctx).Add(in.Timeout)
	room := in.MaxResults
	gone := false
	wg := workflow.NewWaitGroup(ctx)
	for _, name := range in.Sites {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			res := searchSite(ctx, hub, in, name, deadline, &room, &gone)
			if gone || ctx.Err() != nil {
				return
			}
			if err := workflow.ExecuteActivity(hub, actFinishSearchSite, res).Get(ctx, nil); isGone(err) {
				gone = true
			}
		})
	}
	wg.Wait(ctx)
	if gone {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := workflow.ExecuteActivity(hub, actFinishSearch, in.SearchID).Get(ctx, nil)
	if isGone(err) {
		return nil
	}
	return err
}

func isGone(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == vocab.ErrNotFound
}

// searchSite pages through one site's answers until they end, the cap is
// reached, the deadline passes or the site fails.
func searchSite(ctx, hub workflow.Context, in SearchInput, name string, deadline time.Time, room *int64, gone *bool) SearchSiteResult {
	res := SearchSiteResult{SearchID: in.SearchID, Site: name}
	q := in.Query
	for {
		if *room <= 0 {
			res.Status = SearchSiteStopped
			return res
		}
		left := deadline.Sub(workflow.Now(ctx))
		if left <= 0 {
			res.Status, res.Error = SearchSiteTimedOut, "the site did not answer in time"
			return res
		}
		q.Limit = int(min(int64(searchPageSize), *room))
		sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: SiteTaskQueue(name, vocab.DefaultQueue),
			// One bound for queueing and running: a site without a worker
			// times out here, and the search goes on without it.
			ScheduleToCloseTimeout: left,
			HeartbeatTimeout:       searchHeartbeat,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3,
				NonRetryableErrorTypes: []string{vocab.ErrBadPath, vocab.ErrBadInput}},
		})
		var s *site.Activities
		var out site.SearchFilesOutput
		err := workflow.ExecuteActivity(sctx, s.SearchFiles, q).Get(ctx, &out)
		switch {
		case err != nil && temporal.IsTimeoutError(err):
			res.Status, res.Error = SearchSiteTimedOut, fmt.Sprintf("the site did not answer within %s (is a worker of site %s running?)", in.Timeout, name)
			return res
		case err != nil && temporal.IsCanceledError(err):
			return res
		case err != nil:
			res.Status, res.Error = SearchSiteFailed, activityMessage(err)
			return res
		}
		res.Scanned = out.Index.Scanned
		page := SearchPage{SearchID: in.SearchID, Site: name, Files: out.Files, More: out.Next != ""}
		var left2 int64
		if err := workflow.ExecuteActivity(hub, actStoreSearchPage, page).Get(ctx, &left2); err != nil {
			if isGone(err) {
				*gone = true
			}
			return res
		}
		*room = left2
		if out.Next == "" {
			res.Status = SearchSiteAnswered
			return res
		}
		q.After = out.Next
	}
}

// activityMessage is an activity failure's own message, without the
// SDK's wrapping.
func activityMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Error()
	}
	return err.Error()
}

// SetMetadataInput changes user metadata at a site.
type SetMetadataInput struct {
	Site    string
	Set     site.SetMetadataInput
	Timeout time.Duration
}

// SetMetadataWorkflow applies a metadata change on a site worker (the hub
// never touches a site's files) and returns each path's metadata.
func SetMetadataWorkflow(ctx workflow.Context, in SetMetadataInput) (*site.SetMetadataOutput, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: SiteTaskQueue(in.Site, vocab.DefaultQueue),
		// The caller waits: no worker within the timeout is an error.
		ScheduleToCloseTimeout: in.Timeout,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{vocab.ErrBadPath, vocab.ErrBadInput}},
	})
	var s *site.Activities
	var out site.SetMetadataOutput
	err := workflow.ExecuteActivity(ctx, s.SetMetadata, in.Set).Get(ctx, &out)
	return &out, err
}

// ScanFileIndexInput rebuilds a site's file index.
type ScanFileIndexInput struct {
	Site  string
	Paths []string
}

// IndexScanTemporalID is the ID of the Temporal Schedule that rescans
// site id's file index (configuration file_index_scan_schedule).
func IndexScanTemporalID(siteID int64) string { return fmt.Sprintf("indexscan-%d", siteID) }

// ScanFileIndexWorkflowID names a site's scan: one at a time per site.
func ScanFileIndexWorkflowID(siteName string) string { return "file-index-scan-" + siteName }

// ScanFileIndexWorkflow rebuilds a site's file index from a walk of its
// root. Operators run it on a Temporal Schedule (docs/search-analytics.md).
func ScanFileIndexWorkflow(ctx workflow.Context, in ScanFileIndexInput) (*site.ScanFileIndexOutput, error) {
	hub := workflow.WithActivityOptions(ctx, hubOptions)
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: SiteTaskQueue(in.Site, vocab.DefaultQueue),
		// A walk of millions of entries takes a while; the heartbeat
		// notices a dead worker.
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    searchHeartbeat,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3, NonRetryableErrorTypes: []string{vocab.ErrBadPath}},
	})
	var s *site.Activities
	var out site.ScanFileIndexOutput
	if err := workflow.ExecuteActivity(ctx, s.ScanFileIndex, site.ScanFileIndexInput{Paths: in.Paths}).Get(ctx, &out); err != nil {
		return nil, err
	}
	// Since version 1 the metadata keys and tags the scan found join the
	// hub's lists (GET /search/metadata_fields/, GET /tags/).
	if workflow.GetVersion(ctx, "record-index-fields", workflow.DefaultVersion, 1) == 1 &&
		len(out.MetadataFields)+len(out.Tags) > 0 {
		fields := IndexFields{MetadataFields: out.MetadataFields, Tags: out.Tags}
		if err := workflow.ExecuteActivity(hub, actRecordIndexFields, fields).Get(ctx, nil); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// IndexFields are metadata keys and tags a site's scan found.
type IndexFields struct {
	MetadataFields []string
	Tags           []string
}
