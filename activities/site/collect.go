package site

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// CollectInput asks a site to collect one target.
type CollectInput struct {
	Target TargetSpec
	// Grace overrides DefaultCollectGrace when positive.
	Grace time.Duration
}

// CollectTarget frees the target's content that no record refers to any
// more (see Collect). It heartbeats while it lists.
func (a *Activities) CollectTarget(ctx context.Context, in CollectInput) (CollectResult, error) {
	d, err := newDriverSet([]TargetSpec{in.Target}, a.Cipher).get(in.Target.Name)
	if err != nil {
		return CollectResult{}, err
	}
	n := 0
	return Collect(ctx, d, CollectOptions{Grace: in.Grace, Progress: func() {
		if n++; n%100 == 0 {
			activity.RecordHeartbeat(ctx, n)
		}
	}})
}

// CollectTargetBothLayouts is CollectTarget under the name the hub has
// called since reference markers moved to refs/<aa>/<sha256>.<ref>. A
// site worker of an earlier version, whose collector knows only the old
// layout and would free content that only new markers keep, does not
// have this activity, so its task fails there instead of collecting.
func (a *Activities) CollectTargetBothLayouts(ctx context.Context, in CollectInput) (CollectResult, error) {
	return a.CollectTarget(ctx, in)
}
