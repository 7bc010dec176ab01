package changes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
)

// settingsJob is the work of one settings task before it exists.
type settingsJob struct {
	site    *models.Site
	refresh bool
	values  []models.SettingValue
}

// createSettingsTasks records one PENDING settings task per job and
// returns the SettingsWorkflow input serving them all.
func createSettingsTasks(ctx context.Context, db bun.IDB, jobs []settingsJob) ([]models.SettingsTask, workflows.SettingsWorkflowInput, error) {
	var in workflows.SettingsWorkflowInput
	tasks := make([]models.SettingsTask, 0, len(jobs))
	for _, j := range jobs {
		t := models.SettingsTask{TaskType: models.SettingsTaskApply, Site: j.site.Name, Request: json.RawMessage(`{}`)}
		target := workflows.SettingsTarget{Site: j.site.Name, Refresh: j.refresh}
		if j.refresh {
			t.TaskType = models.SettingsTaskRefresh
			t.FriendlyName = "Refresh settings from " + j.site.Name
		} else {
			t.FriendlyName = fmt.Sprintf("Apply %d setting(s) to %s", len(j.values), j.site.Name)
			values := j.values
			if values == nil {
				values = []models.SettingValue{}
			}
			data, err := json.Marshal(map[string]any{"values": values})
			if err != nil {
				return nil, in, err
			}
			t.Request = data
			for _, v := range values {
				target.Values = append(target.Values, site.SettingValue{Key: v.Key, Value: v.Value})
			}
		}
		if err := models.CreateSettingsTask(ctx, db, &t); err != nil {
			return nil, in, err
		}
		target.TaskID = t.ID
		tasks = append(tasks, t)
		in.Targets = append(in.Targets, target)
	}
	if len(tasks) > 0 {
		ids := make([]int64, len(tasks))
		for i := range tasks {
			ids[i] = tasks[i].ID
		}
		wfID := workflows.SettingsWorkflowID(ids[0])
		if err := models.SetSettingsTasksWorkflow(ctx, db, ids, wfID); err != nil {
			return nil, in, err
		}
		for i := range tasks {
			tasks[i].TaskID = wfID
		}
	}
	return tasks, in, nil
}

// runSettings stores what store stores, creates the tasks of the jobs it
// returns and the SettingsWorkflow start they owe in the same
// transaction (KindSettings: the tasks fail if it never can start).
func (s *Service) runSettings(ctx context.Context, store func(ctx context.Context, tx bun.IDB) ([]settingsJob, error)) ([]models.SettingsTask, error) {
	var tasks []models.SettingsTask
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		jobs, err := store(ctx, tx)
		if err != nil {
			return err
		}
		var in workflows.SettingsWorkflowInput
		if tasks, in, err = createSettingsTasks(ctx, tx, jobs); err != nil || len(tasks) == 0 {
			return err
		}
		p := Settings{}
		if p.Start, err = NewStart(tasks[0].TaskID, workflows.SettingsWorkflowName, in); err != nil {
			return err
		}
		for _, t := range tasks {
			p.TaskIDs = append(p.TaskIDs, t.ID)
		}
		return tx.Owe(ctx, KindSettings, tasks[0].ID, p)
	})
	return tasks, err
}

func settingsSites(ctx context.Context, db bun.IDB) ([]models.Site, error) {
	var sites []models.Site
	err := models.SitesQuery(db, &sites).Scan(ctx)
	return sites, err
}

func settingKeys(values []models.SettingValue) []string {
	keys := make([]string, len(values))
	for i, v := range values {
		keys[i] = v.Key
	}
	return keys
}

// PutGlobalSettings stores global values (a null value deletes) and sends
// each site the keys' effective values for it, in one settings task per
// site: a site's own setting of a key keeps winning over the global one.
func (s *Service) PutGlobalSettings(ctx context.Context, values []models.SettingValue) ([]models.SettingsTask, error) {
	return s.runSettings(ctx, func(ctx context.Context, tx bun.IDB) ([]settingsJob, error) {
		if err := models.PutSettings(ctx, tx, nil, values); err != nil {
			return nil, err
		}
		sites, err := settingsSites(ctx, tx)
		if err != nil {
			return nil, err
		}
		jobs := make([]settingsJob, len(sites))
		for i := range sites {
			vals, err := models.SiteValuesFor(ctx, tx, sites[i].ID, settingKeys(values))
			if err != nil {
				return nil, err
			}
			jobs[i] = settingsJob{site: &sites[i], values: vals}
		}
		return jobs, nil
	})
}

// SyncSettings sends every site (or the one named siteName) all its
// effective settings again, one task per site.
func (s *Service) SyncSettings(ctx context.Context, siteName string) ([]models.SettingsTask, error) {
	return s.runSettings(ctx, func(ctx context.Context, tx bun.IDB) ([]settingsJob, error) {
		var sites []models.Site
		if siteName != "" {
			one, err := models.GetSiteByName(ctx, tx, siteName)
			if errors.Is(err, models.ErrNotFound) {
				return nil, models.Invalid("site", "Object with name="+siteName+" does not exist.")
			} else if err != nil {
				return nil, err
			}
			sites = []models.Site{*one}
		} else {
			var err error
			if sites, err = settingsSites(ctx, tx); err != nil {
				return nil, err
			}
		}
		jobs := make([]settingsJob, len(sites))
		for i := range sites {
			eff, err := models.EffectiveSiteSettings(ctx, tx, sites[i].ID)
			if err != nil {
				return nil, err
			}
			vals := make([]models.SettingValue, len(eff))
			for k, st := range eff {
				vals[k] = models.SettingValue{Key: st.Key, Value: st.Value}
			}
			jobs[i] = settingsJob{site: &sites[i], values: vals}
		}
		return jobs, nil
	})
}

// PutSiteSettings stores site siteID's own values (keys may have a target
// part; a null value deletes the site's, so the global one applies again)
// and sends the site the keys' effective values.
func (s *Service) PutSiteSettings(ctx context.Context, siteID int64, values []models.SettingValue) ([]models.SettingsTask, error) {
	return s.runSettings(ctx, func(ctx context.Context, tx bun.IDB) ([]settingsJob, error) {
		st, err := models.GetSite(ctx, tx, siteID)
		if err != nil {
			return nil, err
		}
		if err := models.PutSettings(ctx, tx, &st.ID, values); err != nil {
			return nil, err
		}
		vals, err := models.SiteValuesFor(ctx, tx, st.ID, settingKeys(values))
		if err != nil {
			return nil, err
		}
		return []settingsJob{{site: st, values: vals}}, nil
	})
}

// RefreshSiteSettings reads what site siteID applies and creates, as the
// site's own settings, the keys the hub does not know.
func (s *Service) RefreshSiteSettings(ctx context.Context, siteID int64) ([]models.SettingsTask, error) {
	return s.runSettings(ctx, func(ctx context.Context, tx bun.IDB) ([]settingsJob, error) {
		st, err := models.GetSite(ctx, tx, siteID)
		if err != nil {
			return nil, err
		}
		return []settingsJob{{site: st, refresh: true}}, nil
	})
}
