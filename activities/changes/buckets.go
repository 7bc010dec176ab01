package changes

import (
	"context"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// DeleteBucket flags bucket id (named name) soft_deleting and starts its
// BucketDeleteWorkflow, which removes its settings from every site where
// it is available and then the record. A bucket already being deleted is
// left to the workflow that runs. It returns that workflow's id.
func (s *Service) DeleteBucket(ctx context.Context, id int64, name string) (string, error) {
	wid := workflows.BucketDeleteWorkflowID(id)
	start, err := NewStart(wid, workflows.BucketDeleteWorkflowName, workflows.BucketDeleteInput{BucketID: id, Name: name})
	if err != nil {
		return "", err
	}
	return wid, s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		changed, err := models.SetBucketSoftDeleting(ctx, tx, id, true)
		if err != nil || !changed {
			return err // already being deleted: its workflow runs
		}
		return tx.Owe(ctx, KindBucketDelete, id, start)
	})
}
