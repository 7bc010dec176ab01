package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/thehub/hub/activities/site"
)

// BucketDeleteWorkflowName is the registered name of BucketDeleteWorkflow.
const BucketDeleteWorkflowName = "BucketDeleteWorkflow"

// BucketDeleteWorkflowID is one deletion per bucket.
func BucketDeleteWorkflowID(bucketID int64) string { return fmt.Sprintf("bucket-delete-%d", bucketID) }

// BucketDeleteInput names the bucket to delete.
type BucketDeleteInput struct {
	BucketID int64
	Name     string
}

// BucketDeleteResult lists the sites whose settings were removed.
type BucketDeleteResult struct {
	Sites []string
}

// bucketSiteOptions: removing one file is quick; a site whose workers stay
// down fails the deletion after ScheduleToClose, which makes the bucket
// editable again so the operator can retry.
func bucketSiteOptions(site string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              SiteTaskQueue(site, "default"),
		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: 30 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{MaximumInterval: time.Minute},
	}
}

// BucketDeleteWorkflow removes the bucket's settings from every site where
// it is available, concurrently, then deletes its record. When a site
// fails, the bucket is kept and its soft_deleting flag cleared.
func BucketDeleteWorkflow(ctx workflow.Context, in BucketDeleteInput) (BucketDeleteResult, error) {
	var res BucketDeleteResult
	var siteActs *site.Activities
	hctx := workflow.WithActivityOptions(ctx, catalogueHubOptions)
	var sites []string
	if err := workflow.ExecuteActivity(hctx, actBucketSites, in.BucketID).Get(ctx, &sites); err != nil {
		return res, err
	}
	futures := make([]workflow.Future, len(sites))
	for i, s := range sites {
		sctx := workflow.WithActivityOptions(ctx, bucketSiteOptions(s))
		futures[i] = workflow.ExecuteActivity(sctx, siteActs.RemoveBucketConfig, site.BucketConfigInput{Bucket: in.Name})
	}
	var failed error
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			failed = fmt.Errorf("site %s: %w", sites[i], err)
			continue
		}
		res.Sites = append(res.Sites, sites[i])
	}
	if failed != nil {
		if err := workflow.ExecuteActivity(hctx, actClearBucketSoftDeleting, in.BucketID).Get(ctx, nil); err != nil {
			return res, err
		}
		return res, fmt.Errorf("delete bucket %s: %w", in.Name, failed)
	}
	return res, workflow.ExecuteActivity(hctx, actDeleteBucketRecord, in.BucketID).Get(ctx, nil)
}
