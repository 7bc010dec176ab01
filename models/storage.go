package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// StoragePool is a filesystem of a site as its worker last reported it.
type StoragePool struct {
	bun.BaseModel `bun:"table:storage_pools,alias:pool"`

	ID         int64     `bun:"id,pk,autoincrement"`
	SiteID     int64     `bun:"site_id"`
	Name       string    `bun:"name"`
	Filesystem string    `bun:"filesystem"`
	Capacity   int64     `bun:"capacity"`
	FreeSpace  int64     `bun:"free_space"`
	UsedSpace  int64     `bun:"used_space"`
	IsDefault  bool      `bun:"is_default"`
	UpdatedAt  time.Time `bun:"updated_at"`
}

// Server is a host of a site as its worker last reported it.
type Server struct {
	bun.BaseModel `bun:"table:servers,alias:srv"`

	ID               int64          `bun:"id,pk,autoincrement"`
	SiteID           int64          `bun:"site_id"`
	Name             string         `bun:"name"`
	ListOfInterfaces map[string]any `bun:"list_of_interfaces,type:jsonb"`
	UpdatedAt        time.Time      `bun:"updated_at"`
}

// StoragePoolsQuery selects pools, of one site when siteID is non-nil.
func StoragePoolsQuery(db bun.IDB, dest any, siteID *int64) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).Order("pool.site_id", "pool.name")
	if siteID != nil {
		q = q.Where("pool.site_id = ?", *siteID)
	}
	return q
}

// GetStoragePool loads one pool.
func GetStoragePool(ctx context.Context, db bun.IDB, id int64) (*StoragePool, error) {
	p := new(StoragePool)
	return p, dbErr(db.NewSelect().Model(p).Where("pool.id = ?", id).Scan(ctx))
}

// ServersQuery selects servers, of one site when siteID is non-nil.
func ServersQuery(db bun.IDB, dest any, siteID *int64) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).Order("srv.site_id", "srv.name")
	if siteID != nil {
		q = q.Where("srv.site_id = ?", *siteID)
	}
	return q
}

// GetServer loads one server.
func GetServer(ctx context.Context, db bun.IDB, id int64) (*Server, error) {
	s := new(Server)
	return s, dbErr(db.NewSelect().Model(s).Where("srv.id = ?", id).Scan(ctx))
}
