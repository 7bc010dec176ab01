package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Site is a storage site managed by the hub.
type Site struct {
	bun.BaseModel `bun:"table:sites,alias:s"`

	ID                        int64          `bun:"id,pk,autoincrement"`
	Name                      string         `bun:"name"`
	Label                     string         `bun:"label"`
	Shortcode                 string         `bun:"shortcode"`
	Type                      string         `bun:"type"`
	Timezone                  string         `bun:"timezone"`
	PublicURL                 string         `bun:"public_url"`
	StorageSearchURL          string         `bun:"storage_search_url"`
	SearchengineURL           string         `bun:"searchengine_url"`
	Bandwidth                 int64          `bun:"bandwidth"`
	Color                     []int64        `bun:"color,type:jsonb"`
	AmIConfigured             bool           `bun:"am_i_configured"`
	ReadyToConfigure          bool           `bun:"ready_to_configure"`
	AddonEnabled              bool           `bun:"addon_enabled"`
	DirectoriesCount          int64          `bun:"directories_count"`
	FilesCount                int64          `bun:"files_count"`
	FilesHydratedCount        int64          `bun:"files_hydrated_count"`
	FilesStubbedCount         int64          `bun:"files_stubbed_count"`
	EnableAutoFileBatchSizing bool           `bun:"enable_auto_file_batch_sizing"`
	FileBatchGB               int64          `bun:"file_batch_gb"`
	FileBatchSize             int64          `bun:"file_batch_size"`
	FSIscanBuckets            int64          `bun:"fs_iscan_buckets"`
	FSIscanThreads            int64          `bun:"fs_iscan_threads"`
	LockThreshold             int64          `bun:"lock_threshold"`
	Include                   map[string]any `bun:"include,type:jsonb"`
	Exclude                   map[string]any `bun:"exclude,type:jsonb"`
	CreatedAt                 time.Time      `bun:"created_at"`
}

// NewSite returns a site with the hub's defaults.
func NewSite(name string) *Site {
	return &Site{Name: name, Label: name, Timezone: "UTC", FileBatchGB: 10, FileBatchSize: 1000,
		Color: []int64{}, Include: map[string]any{}, Exclude: map[string]any{}}
}

// EnsureSite creates the named site when missing and returns it.
func EnsureSite(ctx context.Context, db bun.IDB, name string) (*Site, error) {
	s := NewSite(name)
	s.CreatedAt = time.Now().UTC()
	if _, err := db.NewInsert().Model(s).On("CONFLICT (name) DO NOTHING").Exec(ctx); err != nil {
		return nil, dbErr(err)
	}
	return GetSiteByName(ctx, db, name)
}

// GetSiteByName loads a site by name.
func GetSiteByName(ctx context.Context, db bun.IDB, name string) (*Site, error) {
	s := new(Site)
	err := db.NewSelect().Model(s).Where("name = ?", name).Scan(ctx)
	return s, dbErr(err)
}

// SitesQuery selects sites into dest, ordered by name.
func SitesQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Order("s.name")
}
