package worker

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/site"
)

// rootGuard runs none of a site worker's activities while the root's path
// leads to another folder than the one the worker opened (site.Root.Check):
// the activity fails, to be retried, instead of writing half of its work
// on the local disk under an empty mountpoint.
type rootGuard struct {
	interceptor.WorkerInterceptorBase
	root *site.Root
}

func (g *rootGuard) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &rootGuardInbound{root: g.root}
	i.Next = next
	return i
}

type rootGuardInbound struct {
	interceptor.ActivityInboundInterceptorBase
	root *site.Root
}

func (i *rootGuardInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if err := i.root.Check(); err != nil {
		activity.GetLogger(ctx).Error("activity refused: restart the worker once the site's volume is mounted", "error", err)
		return nil, temporal.NewApplicationError(err.Error(), "RootMoved")
	}
	return i.Next.ExecuteActivity(ctx, in)
}
