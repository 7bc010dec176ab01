package hub

import (
	"context"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
)

// CollectTarget names a target to collect and the site that runs the
// collection (one the target is available on, so a folder target is
// mounted there and the site can open its credentials).
type CollectTarget struct {
	Site   string
	Target site.TargetSpec
}

// CollectPlan lists every target available on some site, each once, with
// the first such site by name.
func (a *Activities) CollectPlan(ctx context.Context) ([]CollectTarget, error) {
	sites, err := a.ListSites(ctx)
	if err != nil {
		return nil, err
	}
	var out []CollectTarget
	seen := map[string]bool{}
	for _, s := range sites {
		ts, err := models.JobTargets(ctx, a.DB, s.ID)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, CollectTarget{Site: s.Name, Target: targetSpec(t)})
			}
		}
	}
	return out, nil
}
