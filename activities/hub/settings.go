package hub

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// StartSettingsTasks moves the settings tasks a SettingsWorkflow serves
// from PENDING to STARTED.
func (a *Activities) StartSettingsTasks(ctx context.Context, ids []int64) error {
	if err := models.StartSettingsTasks(ctx, a.DB, ids); err != nil {
		return fmt.Errorf("start settings tasks %v: %w", ids, err)
	}
	return nil
}

// FinishSettingsTask records a settings task's outcome, its error without
// Temporal's wording.
func (a *Activities) FinishSettingsTask(ctx context.Context, o workflows.SettingsTaskOutcome) error {
	if err := models.FinishSettingsTask(ctx, a.DB, o.TaskID, o.State, vocab.CleanErrorField(o.Results)); err != nil {
		return fmt.Errorf("finish settings task %d: %w", o.TaskID, err)
	}
	return nil
}

// ImportSiteSettings creates, as the site's own settings, the keys the site
// applies that the hub does not know for it. Keys already known are left
// as the hub has them.
func (a *Activities) ImportSiteSettings(ctx context.Context, in workflows.ImportSiteSettingsInput) (workflows.ImportSiteSettingsResult, error) {
	site, err := models.GetSiteByName(ctx, a.DB, in.Site)
	if err != nil {
		return workflows.ImportSiteSettingsResult{}, fmt.Errorf("import settings of site %s: %w", in.Site, err)
	}
	var created, skipped []string
	err = a.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		created, skipped, err = models.ImportSiteSettings(ctx, tx, site.ID, in.Applied)
		return err
	})
	if err != nil {
		return workflows.ImportSiteSettingsResult{}, fmt.Errorf("import settings of site %s: %w", in.Site, err)
	}
	if created == nil {
		created = []string{}
	}
	if skipped == nil {
		skipped = []string{}
	}
	return workflows.ImportSiteSettingsResult{Created: created, Skipped: skipped}, nil
}
