package models

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	// RefreshedAt is when a site worker last reported counts and pools.
	RefreshedAt *time.Time `bun:"refreshed_at"`

	Spaces []Space `bun:"m2m:space_sites,join:Site=Space"`
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

// SiteIDs lists every site's id.
func SiteIDs(ctx context.Context, db bun.IDB) ([]int64, error) {
	var ids []int64
	err := db.NewSelect().Model((*Site)(nil)).Column("id").Order("id").Scan(ctx, &ids)
	return ids, dbErr(err)
}

// ErrInUse means a record cannot be deleted while others depend on it.
var ErrInUse = errors.New("in use")

// GetSite loads a site by id with its spaces.
func GetSite(ctx context.Context, db bun.IDB, id int64) (*Site, error) {
	s := new(Site)
	err := db.NewSelect().Model(s).Relation("Spaces", orderSpaces).Where("s.id = ?", id).Scan(ctx)
	return s, dbErr(err)
}

func orderSpaces(q *bun.SelectQuery) *bun.SelectQuery { return q.Order("sp.name") }

// SitesWithSpacesQuery selects sites with their spaces into dest, ordered by name.
func SitesWithSpacesQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Relation("Spaces", orderSpaces).Order("s.name")
}

// CreateSite inserts s.
func CreateSite(ctx context.Context, db bun.IDB, s *Site) error {
	s.CreatedAt = time.Now().UTC()
	_, err := db.NewInsert().Model(s).Exec(ctx)
	return dbErr(err)
}

// UpdateSite writes every column of s.
func UpdateSite(ctx context.Context, db bun.IDB, s *Site) error {
	_, err := db.NewUpdate().Model(s).WherePK().Exec(ctx)
	return dbErr(err)
}

// DeleteSite removes a site, its nodes, queues, pools and servers. A site
// that still holds spaces is ErrInUse: its data would be orphaned.
func DeleteSite(ctx context.Context, db bun.IDB, id int64) error {
	return runInTx(ctx, db, func(ctx context.Context, tx bun.IDB) error {
		n, err := tx.NewSelect().Model((*SpaceSite)(nil)).Where("site_id = ?", id).Count(ctx)
		if err != nil {
			return dbErr(err)
		}
		if n > 0 {
			return fmt.Errorf("%w: the site holds %d space(s)", ErrInUse, n)
		}
		res, err := tx.NewDelete().Model((*Site)(nil)).Where("id = ?", id).Exec(ctx)
		return deleted(res, err)
	})
}

// deleted turns a delete's result into ErrNotFound when no row went.
func deleted(res sql.Result, err error) error {
	if err != nil {
		return dbErr(err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return ErrNotFound
	}
	return nil
}

// runInTx runs fn in a transaction, or in the caller's one when db already is.
func runInTx(ctx context.Context, db bun.IDB, fn func(ctx context.Context, tx bun.IDB) error) error {
	if tx, ok := db.(bun.Tx); ok {
		return fn(ctx, tx)
	}
	return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return fn(ctx, tx) })
}

// SiteInventory is what a site worker reports about its storage.
type SiteInventory struct {
	Directories, Files, Hydrated, Stubbed int64
	Pools                                 []StoragePool
	Server                                *Server
	At                                    time.Time
}

// StoreSiteInventory records counts on the site, replaces the site's pools
// with the reported ones (upserted by name, so ids stay stable) and
// upserts the reporting server.
func StoreSiteInventory(ctx context.Context, db bun.IDB, siteID int64, inv SiteInventory) error {
	return runInTx(ctx, db, func(ctx context.Context, tx bun.IDB) error {
		res, err := tx.NewUpdate().Model((*Site)(nil)).Where("id = ?", siteID).
			Set("directories_count = ?", inv.Directories).Set("files_count = ?", inv.Files).
			Set("files_hydrated_count = ?", inv.Hydrated).Set("files_stubbed_count = ?", inv.Stubbed).
			Set("refreshed_at = ?", inv.At).Exec(ctx)
		if err := deleted(res, err); err != nil {
			return err
		}
		names := make([]string, 0, len(inv.Pools))
		for i := range inv.Pools {
			p := inv.Pools[i]
			p.ID, p.SiteID, p.UpdatedAt = 0, siteID, inv.At
			names = append(names, p.Name)
			_, err := tx.NewInsert().Model(&p).On("CONFLICT (site_id, name) DO UPDATE").
				Set("filesystem = EXCLUDED.filesystem, capacity = EXCLUDED.capacity").
				Set("free_space = EXCLUDED.free_space, used_space = EXCLUDED.used_space").
				Set("is_default = EXCLUDED.is_default, updated_at = EXCLUDED.updated_at").Exec(ctx)
			if err != nil {
				return dbErr(err)
			}
		}
		q := tx.NewDelete().Model((*StoragePool)(nil)).Where("site_id = ?", siteID)
		if len(names) > 0 {
			q = q.Where("name NOT IN (?)", bun.In(names))
		}
		if _, err := q.Exec(ctx); err != nil {
			return dbErr(err)
		}
		if inv.Server != nil && inv.Server.Name != "" {
			srv := *inv.Server
			srv.ID, srv.SiteID, srv.UpdatedAt = 0, siteID, inv.At
			if srv.ListOfInterfaces == nil {
				srv.ListOfInterfaces = map[string]any{}
			}
			_, err := tx.NewInsert().Model(&srv).On("CONFLICT (site_id, name) DO UPDATE").
				Set("list_of_interfaces = EXCLUDED.list_of_interfaces, updated_at = EXCLUDED.updated_at").Exec(ctx)
			if err != nil {
				return dbErr(err)
			}
		}
		return nil
	})
}
