package site

import (
	"context"
	"sync/atomic"
	"time"
)

// CollectInput asks a site to collect one target.
type CollectInput struct {
	Target TargetSpec
	// Grace overrides DefaultCollectGrace when positive.
	Grace time.Duration
}

// CollectTarget frees the target's content that no record refers to any
// more (see Collect). It heartbeats every few seconds while it runs, also
// through a long copy or listing: an attempt whose heartbeats stopped is
// retried, and two collections of one target at once can free content a
// new reference needs (on filesystem and S3 targets a lock stops the second).
func (a *Activities) CollectTarget(ctx context.Context, in CollectInput) (CollectResult, error) {
	d, err := a.drivers([]TargetSpec{in.Target}).get(in.Target.Name)
	if err != nil {
		return CollectResult{}, err
	}
	var seen atomic.Int64
	var res CollectResult
	err = beatWhile(ctx, func() any { return seen.Load() }, func() (err error) {
		res, err = Collect(ctx, d, CollectOptions{Grace: in.Grace, Progress: func() { seen.Add(1) }})
		return err
	})
	return res, err
}

// CollectTargetBothLayouts is CollectTarget under the name the hub has
// called since reference markers moved to refs/<aa>/<sha256>.<ref>. A
// site worker of an earlier version, whose collector knows only the old
// layout and would free content that only new markers keep, does not
// have this activity, so its task fails there instead of collecting.
func (a *Activities) CollectTargetBothLayouts(ctx context.Context, in CollectInput) (CollectResult, error) {
	return a.CollectTarget(ctx, in)
}
