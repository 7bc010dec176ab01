package hub

import (
	"context"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// CollectPlan lists every target available on some site, each once, with
// the first such site by name.
func (a *Activities) CollectPlan(ctx context.Context) ([]workflows.CollectTarget, error) {
	sites, err := a.ListSites(ctx)
	if err != nil {
		return nil, err
	}
	var out []workflows.CollectTarget
	seen := map[string]bool{}
	for _, s := range sites {
		ts, err := models.JobTargets(ctx, a.DB, s.ID)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, workflows.CollectTarget{Site: s.Name, Target: targetSpec(t)})
			}
		}
	}
	return out, nil
}
