package worker

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"

	"github.com/thehub/hub/internal/fault"
)

// activityDone puts a fault point at the end of every activity the worker
// runs, regular or local: "<activity name>.done", reached once the
// activity has done its work (committed, for the hub's bookkeeping) and
// before its result is reported. Killed there, the work is done and its
// caller does not know: the activity runs again, and must find it done.
type activityDone struct {
	interceptor.WorkerInterceptorBase
}

func (*activityDone) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &activityDoneInbound{}
	i.Next = next
	return i
}

type activityDoneInbound struct {
	interceptor.ActivityInboundInterceptorBase
}

func (i *activityDoneInbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := i.Next.ExecuteActivity(ctx, in)
	if err == nil {
		fault.Point(activity.GetInfo(ctx).ActivityType.Name + ".done")
	}
	return out, err
}
