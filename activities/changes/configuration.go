package changes

import (
	"context"

	"github.com/thehub/hub/models"
)

// Feature flags whose state the recurring records' Temporal Schedules
// follow.
const (
	FeatureSchedules = "schedules" // mirrors schedules_enabled
	FeaturePolicies  = "policies"
)

// SaveConfiguration stores the hub's configuration. The schedules feature
// flag follows schedules_enabled; when it changes, every schedule and
// policy is paused (or given back its own state), and when it or
// file_index_scan_schedule changes, every recurring record is synced.
func (s *Service) SaveConfiguration(ctx context.Context, conf models.Configuration) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		old, err := models.GetConfiguration(ctx, tx)
		if err != nil {
			return err
		}
		if err := models.SaveConfiguration(ctx, tx, conf); err != nil {
			return err
		}
		if old.SchedulesEnabled != conf.SchedulesEnabled {
			if err := models.SetFeatureEnabled(ctx, tx, FeatureSchedules, conf.SchedulesEnabled); err != nil {
				return err
			}
		} else if old.FileIndexScanSchedule == conf.FileIndexScanSchedule {
			return nil
		}
		return s.OweSyncAll(ctx, tx)
	})
}

// SetFeature switches feature flag name. The schedules flag is
// schedules_enabled by another name; it and the policies flag pause or
// restore the Temporal Schedules.
func (s *Service) SetFeature(ctx context.Context, name string, enabled bool) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := models.SetFeatureEnabled(ctx, tx, name, enabled); err != nil {
			return err
		}
		switch name {
		case FeatureSchedules:
			conf, err := models.GetConfiguration(ctx, tx)
			if err != nil {
				return err
			}
			conf.SchedulesEnabled = enabled
			if err := models.SaveConfiguration(ctx, tx, conf); err != nil {
				return err
			}
		case FeaturePolicies:
		default:
			return nil
		}
		return s.OweSyncAll(ctx, tx)
	})
}
