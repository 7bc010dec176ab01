package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// StartSettingsTasks moves the settings tasks a SettingsWorkflow serves
// from PENDING to STARTED.
func (a *Activities) StartSettingsTasks(ctx context.Context, ids []int64) error {
	if err := models.StartSettingsTasks(ctx, a.DB, ids); err != nil {
		return fmt.Errorf("start settings tasks %v: %w", ids, err)
	}
	return nil
}

// SettingsTaskOutcome is the final state and results of one settings task.
type SettingsTaskOutcome struct {
	TaskID  int64
	State   string // SUCCESS or FAILURE
	Results json.RawMessage
}

// FinishSettingsTask records a settings task's outcome.
func (a *Activities) FinishSettingsTask(ctx context.Context, o SettingsTaskOutcome) error {
	if err := models.FinishSettingsTask(ctx, a.DB, o.TaskID, o.State, o.Results); err != nil {
		return fmt.Errorf("finish settings task %d: %w", o.TaskID, err)
	}
	return nil
}

// ImportSiteSettingsInput is what a site reported applying.
type ImportSiteSettingsInput struct {
	Site    string
	Applied map[string]json.RawMessage
}

// ImportSiteSettingsResult lists the keys created in the hub and the
// malformed keys left out.
type ImportSiteSettingsResult struct {
	Created []string `json:"created"`
	Skipped []string `json:"skipped"`
}

// ImportSiteSettings creates, as the site's own settings, the keys the site
// applies that the hub does not know for it. Keys already known are left
// as the hub has them.
func (a *Activities) ImportSiteSettings(ctx context.Context, in ImportSiteSettingsInput) (ImportSiteSettingsResult, error) {
	site, err := models.GetSiteByName(ctx, a.DB, in.Site)
	if err != nil {
		return ImportSiteSettingsResult{}, fmt.Errorf("import settings of site %s: %w", in.Site, err)
	}
	var created, skipped []string
	err = a.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		created, skipped, err = models.ImportSiteSettings(ctx, tx, site.ID, in.Applied)
		return err
	})
	if err != nil {
		return ImportSiteSettingsResult{}, fmt.Errorf("import settings of site %s: %w", in.Site, err)
	}
	if created == nil {
		created = []string{}
	}
	if skipped == nil {
		skipped = []string{}
	}
	return ImportSiteSettingsResult{Created: created, Skipped: skipped}, nil
}
