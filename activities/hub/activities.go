// Package hub holds the activities that touch the hub database. They run on
// the hub task queue, never at a site.
package hub

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
	"go.temporal.io/sdk/activity"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// Activities are the hub-side activities; register a *Activities.
type Activities struct {
	DB *bun.DB
	// Secrets opens the target credentials sealed in the database.
	Secrets *vocab.Cipher
}

// RecordHeartbeat stores a node's heartbeat at the hub's clock, so that
// liveness is judged against one clock whatever the nodes' drift.
func (a *Activities) RecordHeartbeat(ctx context.Context, hb workflows.Heartbeat) error {
	err := models.RecordHeartbeat(ctx, a.DB, models.Heartbeat{
		Site: hb.Site, Node: hb.Node, Queue: hb.Queue, WorkerVersion: hb.WorkerVersion,
		EngineVersion: hb.EngineVersion, AnalyticsVersion: hb.AnalyticsVersion, SearchVersion: hb.SearchVersion,
		At: time.Now().UTC(),
	})
	if err != nil {
		return fmt.Errorf("record heartbeat of %s/%s/%s: %w", hb.Site, hb.Queue, hb.Node, err)
	}
	return nil
}

// ClaimChange claims an intent a workflow received (see
// activities/changes): true the first time only.
func (a *Activities) ClaimChange(ctx context.Context, intentID int64) (bool, error) {
	return changes.Claim(ctx, a.DB, intentID)
}

// DeliverChanges delivers the intents of committed changes that are due
// (activities/changes), then brings every schedule's and policy's Temporal
// Schedule in step with its record: the outbox reconciler's one activity.
func (a *Activities) DeliverChanges(ctx context.Context) (int, error) {
	s := a.changes(ctx)
	s.Progress = func(n int) { activity.RecordHeartbeat(ctx, n) }
	n, err := s.DeliverDue(ctx)
	if err != nil {
		return n, err
	}
	synced, err := s.ReconcileSchedules(ctx)
	if err != nil {
		// Logged, not failed: one schedule Temporal refuses must not
		// hold back the delivery of everything else every minute.
		activity.GetLogger(ctx).Warn("reconciling schedules", "error", err)
	}
	return n + synced, nil
}

// changes is the write mechanism, for activities that change records.
func (a *Activities) changes(ctx context.Context) *changes.Service {
	return &changes.Service{DB: a.DB, Temporal: activity.GetClient(ctx), Log: slog.Default()}
}
