package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// StoreAnalytics keeps a site's complete analytics answer for reuse
// (GET /analytics/?cache_ttl=): one row per site and path, replaced by a
// newer answer and never by an older one.
func (a *Activities) StoreAnalytics(ctx context.Context, in workflows.StoreAnalyticsInput) error {
	if in.Answer == nil {
		return nil
	}
	body, err := json.Marshal(in.Answer)
	if err != nil {
		return fmt.Errorf("analytics answer: %w", err)
	}
	return models.PutSiteAnswer(ctx, a.DB, &models.SiteAnswer{Kind: models.AnswerAnalytics, Site: in.Site,
		Path: in.Answer.Path, ComputedAt: in.Answer.Computed, Body: string(body)})
}
