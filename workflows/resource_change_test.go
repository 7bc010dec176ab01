package workflows_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/thehub/hub/workflows"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/workflows/vocab"
)

// changeEnv runs workflows.ResourceChangeWorkflow with mocked activities over a fake
// item whose generation the test moves on, as the API would.
type changeEnv struct {
	env      *testsuite.TestWorkflowEnvironment
	gen      int64    // the item's generation in the "database"
	deleted  bool     // whether the newest change is a deletion
	applied  int      // site applications
	finished []string // outcomes recorded: "<gen>:ok" or "<gen>:<error>"
}

func newChangeEnv(t *testing.T, siteErr error) *changeEnv {
	var suite testsuite.WorkflowTestSuite
	ce := &changeEnv{env: suite.NewTestWorkflowEnvironment(), gen: 1}
	var hub *hubact.Activities
	var st *site.Activities
	ce.env.RegisterActivity(hub)
	ce.env.RegisterActivity(st)
	ce.env.OnActivity(hub.CJPrepareChange, mock.Anything, int64(7)).Return(
		func(context.Context, int64) (workflows.CJPlan, error) {
			return workflows.CJPlan{Found: true, ItemID: 7, Generation: ce.gen, Delete: ce.deleted, SiteWork: true,
				Change: site.CJChange{Type: "spaces", ItemID: 7, Name: "s", Delete: ce.deleted, Space: &site.CJSpace{Name: "s"}}}, nil
		})
	ce.env.OnActivity(hub.CJStartChange, mock.Anything, mock.Anything).Return(nil)
	ce.env.OnActivity(st.CJApply, mock.Anything, mock.Anything).After(10 * time.Second).Return(
		func(_ context.Context, ch site.CJChange) (site.CJResult, error) {
			ce.applied++
			return site.CJResult{Message: "ok"}, siteErr
		})
	ce.env.OnActivity(hub.CJFinishChange, mock.Anything, mock.Anything).Return(
		func(_ context.Context, out workflows.CJOutcome) error {
			res := "ok"
			if out.Error != "" {
				res = out.Error
			}
			ce.finished = append(ce.finished, strconv.FormatInt(out.Generation, 10)+":"+res)
			return nil
		})
	return ce
}

// change records a new generation and signals it at delay.
func (ce *changeEnv) change(delay time.Duration, deleted bool) {
	ce.env.RegisterDelayedCallback(func() {
		ce.gen++
		ce.deleted = deleted
		ce.env.SignalWorkflow(workflows.ResourceChangeSignal, workflows.ResourceChange{Generation: ce.gen})
	}, delay)
}

func TestResourceChangeCoalescesAndKeepsOrder(t *testing.T) {
	t.Parallel()
	ce := newChangeEnv(t, nil)
	// Generation 1 starts the workflow (as SignalWithStart delivers it);
	// 2 and 3 arrive while it is being applied, 4 (a deletion) while 2-3 are.
	ce.change(time.Second, false)
	ce.change(2*time.Second, false)
	ce.change(15*time.Second, true)
	ce.env.ExecuteWorkflow(workflows.ResourceChangeWorkflow, workflows.ResourceChangeInput{Site: "site1", Type: "spaces", ItemID: 7, Wanted: 1})
	require.True(t, ce.env.IsWorkflowCompleted())
	require.NoError(t, ce.env.GetWorkflowError())
	require.Equal(t, 3, ce.applied, "2 and 3 were applied as one")
	require.Equal(t, []string{"1:ok", "3:ok", "4:ok"}, ce.finished, "none was lost, in order")
}

func TestResourceChangeRecordsSiteFailure(t *testing.T) {
	t.Parallel()
	ce := newChangeEnv(t, temporal.NewNonRetryableApplicationError("cannot create spaces/s: a file is in the way", vocab.ErrCJ, nil))
	ce.env.ExecuteWorkflow(workflows.ResourceChangeWorkflow, workflows.ResourceChangeInput{Site: "site1", Type: "spaces", ItemID: 7, Wanted: 1})
	require.NoError(t, ce.env.GetWorkflowError(), "a failed change fails the item, not the workflow")
	require.Equal(t, []string{"1:cannot create spaces/s: a file is in the way"}, ce.finished)
}
