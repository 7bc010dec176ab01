package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/workflows"
)

// EnsureSearchAttributes registers the hub's custom search attributes on
// the namespace when missing; it is idempotent and runs at start-up, so an
// external cluster needs no manual step.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range workflows.SearchAttributes {
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = typ
		case got != typ:
			return fmt.Errorf("search attribute %s is registered as %s, not %s; it cannot be changed in place", name, got, typ)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing})
	if err != nil {
		return fmt.Errorf("add search attributes: %w", err)
	}
	return nil
}

// EnsureSchedules creates the hub's Temporal schedules when missing:
// maintenance, the collection of unreferenced remote copies, and the
// outbox reconciler.
func EnsureSchedules(ctx context.Context, c client.Client) error {
	for _, s := range []struct {
		id, workflowID, workflow string
		every                    time.Duration
	}{
		{workflows.MaintenanceScheduleID, workflows.MaintenanceScheduleID, workflows.MaintenanceWorkflowName, workflows.MaintenanceEvery},
		{workflows.CollectScheduleID, workflows.CollectWorkflowID, workflows.CollectWorkflowName, workflows.CollectEvery},
		{workflows.OutboxScheduleID, workflows.OutboxWorkflowID, workflows.OutboxWorkflowName, workflows.OutboxEvery},
	} {
		_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
			ID:   s.id,
			Spec: client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: s.every}}},
			Action: &client.ScheduleWorkflowAction{ID: s.workflowID, Workflow: s.workflow,
				TaskQueue: workflows.HubTaskQueue},
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		})
		if err != nil && !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return fmt.Errorf("create schedule %s: %w", s.id, err)
		}
	}
	return nil
}
