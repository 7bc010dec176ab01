package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Search states.
const (
	SearchRunning  = "running"
	SearchFinished = "finished"
)

// Statuses of a site in a search.
const (
	SearchSitePending  = "pending"   // asked, not answered yet
	SearchSiteAnswered = "answered"  // every result it has is stored
	SearchSiteFailed   = "failed"    // it answered with an error
	SearchSiteTimedOut = "timed_out" // no answer in time (no worker, say)
	SearchSiteStopped  = "stopped"   // the search's cap was reached first
)

// Search is a recorded search across sites; its results are SearchResults.
type Search struct {
	bun.BaseModel `bun:"table:searches,alias:sr"`

	ID             int64          `bun:"id,pk,autoincrement"`
	OwnerID        *int64         `bun:"owner_id"`
	Path           string         `bun:"path"`
	Recursive      bool           `bun:"recursive"`
	Filters        map[string]any `bun:"filters,type:jsonb"`
	MetadataFields []string       `bun:"metadata_fields,type:jsonb"`
	MaxResults     int64          `bun:"max_results"`
	State          string         `bun:"state"`
	Total          int64          `bun:"total"`
	Truncated      bool           `bun:"truncated"`
	CreatedAt      time.Time      `bun:"created_at"`
	FinishedAt     *time.Time     `bun:"finished_at"`

	Sites []SearchSite `bun:"rel:has-many,join:id=search_id"`
}

// SearchSite is where one site stands in a search.
type SearchSite struct {
	bun.BaseModel `bun:"table:search_sites,alias:ss"`

	ID           int64      `bun:"id,pk,autoincrement"`
	SearchID     int64      `bun:"search_id"`
	Site         string     `bun:"site"`
	Status       string     `bun:"status"`
	Error        string     `bun:"error"`
	Results      int64      `bun:"results"`
	IndexScanned *time.Time `bun:"index_scanned"`
	UpdatedAt    time.Time  `bun:"updated_at"`
}

// SearchResult is one entry a site found.
type SearchResult struct {
	bun.BaseModel `bun:"table:search_results,alias:rs"`

	ID       int64          `bun:"id,pk,autoincrement"`
	SearchID int64          `bun:"search_id"`
	Site     string         `bun:"site"`
	Path     string         `bun:"path"`
	Name     string         `bun:"name"`
	Type     string         `bun:"type"`
	Size     int64          `bun:"size"`
	Mtime    time.Time      `bun:"mtime"`
	Atime    time.Time      `bun:"atime"`
	Ctime    time.Time      `bun:"ctime"`
	State    string         `bun:"state"`
	Metadata map[string]any `bun:"metadata,type:jsonb"`
}

// MetadataField is a user metadata field name some file carries.
type MetadataField struct {
	bun.BaseModel `bun:"table:metadata_fields,alias:mf"`

	ID        int64     `bun:"id,pk,autoincrement"`
	Name      string    `bun:"name"`
	CreatedAt time.Time `bun:"created_at"`
}

// CreateSearch records s (running) and a pending row for each site.
func CreateSearch(ctx context.Context, db bun.IDB, s *Search, sites []string) error {
	s.State, s.CreatedAt = SearchRunning, time.Now().UTC()
	if _, err := db.NewInsert().Model(s).Returning("id").Exec(ctx); err != nil {
		return dbErr(err)
	}
	for _, name := range sites {
		ss := SearchSite{SearchID: s.ID, Site: name, Status: SearchSitePending, UpdatedAt: s.CreatedAt}
		if _, err := db.NewInsert().Model(&ss).Exec(ctx); err != nil {
			return dbErr(err)
		}
		s.Sites = append(s.Sites, ss)
	}
	return nil
}

// GetSearch loads a search with its sites (in name order).
func GetSearch(ctx context.Context, db bun.IDB, id int64) (*Search, error) {
	s := new(Search)
	err := db.NewSelect().Model(s).Where("sr.id = ?", id).
		Relation("Sites", func(q *bun.SelectQuery) *bun.SelectQuery { return q.Order("ss.site") }).Scan(ctx)
	return s, dbErr(err)
}

// ErrSearchGone is returned to a search workflow whose search was deleted.
var ErrSearchGone = errors.New("the search was deleted")

// StoreSearchResults adds a page of a site's results, as far as the
// search's cap allows, and returns how many more the search may take.
// Storing a page again (a retried activity) changes nothing.
func StoreSearchResults(ctx context.Context, db *bun.DB, searchID int64, site string, rows []SearchResult) (room int64, err error) {
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		s := new(Search)
		q := tx.NewSelect().Model(s).Where("sr.id = ?", searchID)
		if IsPostgres(tx) {
			q = q.For("UPDATE") // sites store in parallel: one at a time counts
		}
		if err := q.Scan(ctx); err != nil {
			if errors.Is(dbErr(err), ErrNotFound) {
				return ErrSearchGone
			}
			return err
		}
		room = s.MaxResults - s.Total
		var added int64
		for i := range rows {
			if room-added <= 0 {
				break
			}
			r := rows[i]
			r.SearchID, r.Site = searchID, site
			res, err := tx.NewInsert().Model(&r).On("CONFLICT (search_id, site, path) DO NOTHING").Exec(ctx)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			added += n
		}
		truncated := s.Truncated || added < int64(len(rows)) && room-added <= 0
		if _, err := tx.NewUpdate().Model((*Search)(nil)).Set("total = total + ?", added).Set("truncated = ?", truncated).
			Where("id = ?", searchID).Exec(ctx); err != nil {
			return err
		}
		_, err := tx.NewUpdate().Model((*SearchSite)(nil)).Set("results = results + ?", added).Set("updated_at = ?", time.Now().UTC()).
			Where("search_id = ? AND site = ?", searchID, site).Exec(ctx)
		room -= added
		return err
	})
	return room, err
}

// MarkSearchTruncated records that a site had more results than the cap
// left room for.
func MarkSearchTruncated(ctx context.Context, db bun.IDB, searchID int64) error {
	_, err := db.NewUpdate().Model((*Search)(nil)).Set("truncated = ?", true).Where("id = ?", searchID).Exec(ctx)
	return dbErr(err)
}

// SetSearchSite records where a site stands; a pending site only moves on
// (a late retry never turns an answered site back).
func SetSearchSite(ctx context.Context, db bun.IDB, searchID int64, site, status, msg string, scanned *time.Time) error {
	_, err := db.NewUpdate().Model((*SearchSite)(nil)).Set("status = ?", status).Set("error = ?", msg).
		Set("index_scanned = ?", scanned).Set("updated_at = ?", time.Now().UTC()).
		Where("search_id = ? AND site = ? AND status = ?", searchID, site, SearchSitePending).Exec(ctx)
	return dbErr(err)
}

// FinishSearch marks a search finished.
func FinishSearch(ctx context.Context, db bun.IDB, id int64) error {
	now := time.Now().UTC()
	_, err := db.NewUpdate().Model((*Search)(nil)).Set("state = ?", SearchFinished).Set("finished_at = ?", now).
		Where("id = ?", id).Exec(ctx)
	return dbErr(err)
}

// DeleteSearch removes a search with its sites and results.
func DeleteSearch(ctx context.Context, db bun.IDB, id int64) error {
	if _, err := db.NewDelete().Model((*SearchResult)(nil)).Where("search_id = ?", id).Exec(ctx); err != nil {
		return dbErr(err)
	}
	if _, err := db.NewDelete().Model((*SearchSite)(nil)).Where("search_id = ?", id).Exec(ctx); err != nil {
		return dbErr(err)
	}
	res, err := db.NewDelete().Model((*Search)(nil)).Where("id = ?", id).Exec(ctx)
	return affected(res, err)
}

// DeleteSearchesBefore removes searches created before t, at most limit,
// and returns how many it removed.
func DeleteSearchesBefore(ctx context.Context, db bun.IDB, t time.Time, limit int) (int, error) {
	var ids []int64
	if err := db.NewSelect().Model((*Search)(nil)).Column("id").Where("created_at < ?", t).Order("id").Limit(int64(limit)).Scan(ctx, &ids); err != nil {
		return 0, dbErr(err)
	}
	for _, id := range ids {
		if err := DeleteSearch(ctx, db, id); err != nil && !errors.Is(err, ErrNotFound) {
			return 0, err
		}
	}
	return len(ids), nil
}

// Sortable fields of search results, and of results grouped by name.
var (
	searchSortColumns = map[string]string{"site": "rs.site", "path": "rs.path", "name": "rs.name", "type": "rs.type",
		"size": "rs.size", "mtime": "rs.mtime", "atime": "rs.atime", "ctime": "rs.ctime", "state": "rs.state"}
	groupSortColumns = map[string]string{"name": "name", "count": "count", "size": "size", "mtime": "mtime"}
)

// SearchSortFields lists the fields sort accepts (grouped: by name).
func SearchSortFields(grouped bool) []string {
	if grouped {
		return []string{"name", "count", "size", "mtime"}
	}
	return []string{"site", "path", "name", "type", "size", "mtime", "atime", "ctime", "state"}
}

// orderBy turns "site,-size" into ORDER BY terms; an unknown field is an
// error naming it.
func orderBy(sort string, columns map[string]string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(sort, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		dir := " ASC"
		if strings.HasPrefix(f, "-") {
			f, dir = f[1:], " DESC"
		}
		col, ok := columns[f]
		if !ok {
			return nil, fmt.Errorf("unknown sort field %q", f)
		}
		out = append(out, col+dir)
	}
	return out, nil
}

// SearchResultsQuery selects a search's results in the given order
// ("site,-size"; the default is site then path).
func SearchResultsQuery(db bun.IDB, dest *[]SearchResult, searchID int64, sort string) (*bun.SelectQuery, error) {
	terms, err := orderBy(sort, searchSortColumns)
	if err != nil {
		return nil, err
	}
	if len(terms) == 0 {
		terms = []string{"rs.site ASC", "rs.path ASC"}
	}
	q := db.NewSelect().Model(dest).Where("rs.search_id = ?", searchID)
	for _, t := range terms {
		q = q.OrderExpr(t)
	}
	return q.OrderExpr("rs.id ASC"), nil
}

// SearchName is one name of a search's results, grouped.
type SearchName struct {
	Name  string    `bun:"name"`
	Count int64     `bun:"count"` // entries with this name
	Size  int64     `bun:"size"`  // their bytes
	Mtime time.Time `bun:"mtime"` // the newest of them
}

// SearchNamesQuery selects a search's results grouped by name (default
// order: name).
func SearchNamesQuery(db bun.IDB, dest *[]SearchName, searchID int64, sort string) (*bun.SelectQuery, error) {
	terms, err := orderBy(sort, groupSortColumns)
	if err != nil {
		return nil, err
	}
	q := db.NewSelect().Model((*SearchResult)(nil)).
		ColumnExpr("rs.name AS name, COUNT(*) AS count, SUM(rs.size) AS size, MAX(rs.mtime) AS mtime").
		Where("rs.search_id = ?", searchID).GroupExpr("rs.name")
	for _, t := range terms {
		q = q.OrderExpr(t)
	}
	return q.OrderExpr("name ASC"), nil
}

// SearchNameSites returns, for each of names, the sites holding an entry
// of that name (each site once, in order).
func SearchNameSites(ctx context.Context, db bun.IDB, searchID int64, names []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(names) == 0 {
		return out, nil
	}
	var rows []struct {
		Name string `bun:"name"`
		Site string `bun:"site"`
	}
	err := db.NewSelect().Model((*SearchResult)(nil)).ColumnExpr("DISTINCT rs.name AS name, rs.site AS site").
		Where("rs.search_id = ? AND rs.name IN (?)", searchID, bun.In(names)).OrderExpr("name, site").Scan(ctx, &rows)
	for _, r := range rows {
		out[r.Name] = append(out[r.Name], r.Site)
	}
	return out, dbErr(err)
}

// EnsureMetadataFields records field names, ignoring those known.
func EnsureMetadataFields(ctx context.Context, db bun.IDB, names ...string) error {
	now := time.Now().UTC()
	for _, n := range names {
		if n == "" {
			continue
		}
		if _, err := db.NewInsert().Model(&MetadataField{Name: n, CreatedAt: now}).On("CONFLICT (name) DO NOTHING").Exec(ctx); err != nil {
			return dbErr(err)
		}
	}
	return nil
}

// MetadataFieldsQuery selects the known metadata field names by name.
func MetadataFieldsQuery(db bun.IDB, dest *[]MetadataField) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Order("mf.name")
}
