package site

import (
	"context"
	"fmt"
	"strings"
)

// PolicyFiring says whether a policy's triggers fire now, and why.
type PolicyFiring struct {
	Fired bool
	Why   string
}

// PolicyTriggered measures the pools a policy's triggers name (as its
// scan does): the policy fires when any is fuller than its trigger's
// upper threshold.
func (a *Activities) PolicyTriggered(ctx context.Context, triggers []PolicyTrigger) (*PolicyFiring, error) {
	c, report, err := a.measure(ctx, triggers)
	if err != nil {
		return nil, err
	}
	why := make([]string, len(report))
	for i, u := range report {
		rel := "not above"
		if u.Above {
			rel = "above"
		}
		why[i] = fmt.Sprintf("pool %s is %.1f%% full, %s %.1f%%", u.Pool, u.Percent, rel, triggers[i].Upper)
	}
	return &PolicyFiring{Fired: c.fired, Why: strings.Join(why, "; ")}, nil
}
