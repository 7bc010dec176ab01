package models

import (
	"context"

	"github.com/uptrace/bun"
)

// JobTargets returns the enabled external targets available at a site,
// with their buckets, in name order (the order local_file_regex is tried).
func JobTargets(ctx context.Context, db bun.IDB, siteID int64) ([]ExternalTarget, error) {
	var ts []ExternalTarget
	err := db.NewSelect().Model(&ts).Relation("Bucket").
		Join("JOIN external_target_sites AS ets ON ets.external_target_id = et.id").
		Where("ets.site_id = ? AND et.enabled", siteID).Order("et.name").Scan(ctx)
	return ts, dbErr(err)
}
