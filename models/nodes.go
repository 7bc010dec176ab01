package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/workflows/vocab"
)

// Node is a worker host of a site, known from its heartbeats.
type Node struct {
	bun.BaseModel `bun:"table:nodes,alias:n"`

	ID               int64      `bun:"id,pk,autoincrement"`
	SiteID           int64      `bun:"site_id"`
	Site             *Site      `bun:"rel:belongs-to,join:site_id=id"`
	Name             string     `bun:"name"`
	LastHeartbeat    *time.Time `bun:"last_heartbeat"`
	WorkerVersion    string     `bun:"worker_version"`
	EngineVersion    string     `bun:"engine_version"`
	AnalyticsVersion string     `bun:"analytics_version"`
	SearchVersion    string     `bun:"search_version"`
	Queues           []Queue    `bun:"m2m:node_queues,join:Node=Queue"`
}

// Queue is a named task queue of a site (Temporal task queue site.<site>.<queue>).
type Queue struct {
	bun.BaseModel `bun:"table:queues,alias:q"`

	ID            int64      `bun:"id,pk,autoincrement"`
	SiteID        int64      `bun:"site_id"`
	Site          *Site      `bun:"rel:belongs-to,join:site_id=id"`
	Name          string     `bun:"name"`
	Label         string     `bun:"label"`
	LastHeartbeat *time.Time `bun:"last_heartbeat"`
	Nodes         []Node     `bun:"m2m:node_queues,join:Queue=Node"`
}

// NodeQueue records that a node serves a queue, and when it last said so.
type NodeQueue struct {
	bun.BaseModel `bun:"table:node_queues"`

	NodeID        int64     `bun:"node_id,pk"`
	Node          *Node     `bun:"rel:belongs-to,join:node_id=id"`
	QueueID       int64     `bun:"queue_id,pk"`
	Queue         *Queue    `bun:"rel:belongs-to,join:queue_id=id"`
	LastHeartbeat time.Time `bun:"last_heartbeat"`
}

// Heartbeat is what a site worker reports about itself.
type Heartbeat struct {
	Site, Node, Queue                                             string
	WorkerVersion, EngineVersion, AnalyticsVersion, SearchVersion string
	At                                                            time.Time
}

// RecordHeartbeat upserts the node, the queue and their link with the
// heartbeat time. Unknown sites are ErrNotFound: a worker cannot create sites.
func RecordHeartbeat(ctx context.Context, db bun.IDB, hb Heartbeat) error {
	site, err := GetSiteByName(ctx, db, hb.Site)
	if err != nil {
		return err
	}
	n := &Node{SiteID: site.ID, Name: hb.Node, LastHeartbeat: &hb.At, WorkerVersion: hb.WorkerVersion,
		EngineVersion: hb.EngineVersion, AnalyticsVersion: hb.AnalyticsVersion, SearchVersion: hb.SearchVersion}
	_, err = db.NewInsert().Model(n).On("CONFLICT (site_id, name) DO UPDATE").
		Set("last_heartbeat = EXCLUDED.last_heartbeat, worker_version = EXCLUDED.worker_version").
		Set("engine_version = EXCLUDED.engine_version, analytics_version = EXCLUDED.analytics_version").
		Set("search_version = EXCLUDED.search_version").Exec(ctx)
	if err != nil {
		return dbErr(err)
	}
	q := &Queue{SiteID: site.ID, Name: hb.Queue, Label: hb.Queue, LastHeartbeat: &hb.At}
	_, err = db.NewInsert().Model(q).On("CONFLICT (site_id, name) DO UPDATE").
		Set("last_heartbeat = EXCLUDED.last_heartbeat").Exec(ctx)
	if err != nil {
		return dbErr(err)
	}
	// RETURNING is not reliable on conflict paths across dialects: re-read ids.
	if err := db.NewSelect().Model(n).Column("id").Where("site_id = ? AND name = ?", site.ID, hb.Node).Scan(ctx); err != nil {
		return dbErr(err)
	}
	if err := db.NewSelect().Model(q).Column("id").Where("site_id = ? AND name = ?", site.ID, hb.Queue).Scan(ctx); err != nil {
		return dbErr(err)
	}
	_, err = db.NewInsert().Model(&NodeQueue{NodeID: n.ID, QueueID: q.ID, LastHeartbeat: hb.At}).
		On("CONFLICT (node_id, queue_id) DO UPDATE").Set("last_heartbeat = EXCLUDED.last_heartbeat").Exec(ctx)
	return dbErr(err)
}

// SiteNodes returns a site's nodes with the queues they serve.
func SiteNodes(ctx context.Context, db bun.IDB, siteID int64) ([]Node, error) {
	var ns []Node
	err := db.NewSelect().Model(&ns).Relation("Queues").Where("n.site_id = ?", siteID).Order("n.name").Scan(ctx)
	return ns, dbErr(err)
}

// SiteQueues returns a site's queues with the nodes serving them.
func SiteQueues(ctx context.Context, db bun.IDB, siteID int64) ([]Queue, error) {
	var qs []Queue
	err := db.NewSelect().Model(&qs).Relation("Nodes").Where("q.site_id = ?", siteID).Order("q.name").Scan(ctx)
	return qs, dbErr(err)
}

// SiteHasQueue reports whether queue is a known queue of the site:
// vocab.DefaultQueue, which every site has, or a queue one of its workers has
// reported in a heartbeat (a row of /api/queues/). A job on any other
// queue would wait for a worker that never comes.
func SiteHasQueue(ctx context.Context, db bun.IDB, siteID int64, queue string) (bool, error) {
	if queue == vocab.DefaultQueue {
		return true, nil
	}
	n, err := db.NewSelect().Model((*Queue)(nil)).Where("site_id = ? AND name = ?", siteID, queue).Count(ctx)
	return n > 0, dbErr(err)
}
