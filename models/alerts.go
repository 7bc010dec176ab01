package models

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/workflows/vocab"
)

// Alert severities, mildest first.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityError    = "error"
	SeverityCritical = "critical"
)

// AlertSeverities lists the accepted severities.
var AlertSeverities = []string{SeverityInfo, SeverityWarning, SeverityError, SeverityCritical}

// Alert is something the hub or a site wants an operator to see.
type Alert struct {
	bun.BaseModel `bun:"table:alerts,alias:al"`

	ID         int64     `bun:"id,pk,autoincrement"`
	Name       string    `bun:"name"`
	Node       string    `bun:"node"`
	Queue      string    `bun:"queue"`
	Severity   string    `bun:"severity"`
	Site       string    `bun:"site"`
	Summary    string    `bun:"summary"`
	Suppressed bool      `bun:"suppressed"`
	Timestamp  time.Time `bun:"timestamp"`
	Created    time.Time `bun:"created"`
}

// RaiseAlert records an alert. Name and a known severity are required; a
// zero Timestamp means now. The jobs engine and hub activities call it.
func RaiseAlert(ctx context.Context, db bun.IDB, a Alert) (*Alert, error) {
	if strings.TrimSpace(a.Name) == "" {
		return nil, fmt.Errorf("raise alert: name is required")
	}
	if !slices.Contains(AlertSeverities, a.Severity) {
		return nil, fmt.Errorf("raise alert %s: unknown severity %q", a.Name, a.Severity)
	}
	// Microseconds: what PostgreSQL keeps, so a timestamp read back
	// filters equal to itself on every database.
	a.Created = time.Now().UTC().Truncate(time.Microsecond)
	if a.Timestamp.IsZero() {
		a.Timestamp = a.Created
	}
	a.Timestamp = a.Timestamp.UTC().Truncate(time.Microsecond)
	a.ID = 0
	if _, err := db.NewInsert().Model(&a).Returning("id").Exec(ctx); err != nil {
		return nil, dbErr(err)
	}
	return &a, nil
}

// AlertFilter narrows an alert listing; zero values do not filter.
type AlertFilter struct {
	Name, Node, Site, Severity string
	// Summary matches alerts whose summary contains it (case-insensitive).
	Summary string
	// From and To bound the alert timestamp: From <= timestamp < To.
	From, To   time.Time
	Suppressed *bool
}

// Alerts returns the alerts matching f, newest first.
func Alerts(ctx context.Context, db bun.IDB, f AlertFilter) ([]Alert, error) {
	var as []Alert
	q := db.NewSelect().Model(&as).OrderExpr("al.timestamp DESC, al.id DESC")
	for _, eq := range []struct{ col, v string }{{"al.name", f.Name}, {"al.node", f.Node}, {"al.site", f.Site}, {"al.severity", f.Severity}} {
		if eq.v != "" {
			q = q.Where("? = ?", bun.Safe(eq.col), eq.v)
		}
	}
	if f.Summary != "" {
		q = q.Where("LOWER(al.summary) LIKE ? ESCAPE '!'", likeContains(f.Summary))
	}
	if !f.From.IsZero() {
		q = q.Where("al.timestamp >= ?", f.From.UTC())
	}
	if !f.To.IsZero() {
		q = q.Where("al.timestamp < ?", f.To.UTC())
	}
	if f.Suppressed != nil {
		q = q.Where("al.suppressed = ?", *f.Suppressed)
	}
	err := q.Scan(ctx)
	return as, dbErr(err)
}

// GetAlert loads an alert by id.
func GetAlert(ctx context.Context, db bun.IDB, id int64) (*Alert, error) {
	a := new(Alert)
	err := db.NewSelect().Model(a).Where("al.id = ?", id).Scan(ctx)
	return a, dbErr(err)
}

// SetAlertSuppressed suppresses or unsuppresses an alert.
func SetAlertSuppressed(ctx context.Context, db bun.IDB, id int64, suppressed bool) error {
	res, err := db.NewUpdate().Model((*Alert)(nil)).Set("suppressed = ?", suppressed).Where("id = ?", id).Exec(ctx)
	return affected(res, err)
}

// Action is an operator request recorded for processing.
type Action struct {
	bun.BaseModel `bun:"table:actions,alias:ac"`

	ID      int64     `bun:"id,pk,autoincrement"`
	Action  string    `bun:"action"`
	State   string    `bun:"state"`
	Results string    `bun:"results"`
	UserID  *int64    `bun:"user_id"`
	Created time.Time `bun:"created"`
}

// CreateAction records a PENDING action requested by userID.
func CreateAction(ctx context.Context, db bun.IDB, action string, userID int64) (*Action, error) {
	a := &Action{Action: action, State: vocab.ActionPending, UserID: &userID, Created: time.Now().UTC()}
	if _, err := db.NewInsert().Model(a).Returning("id").Exec(ctx); err != nil {
		return nil, dbErr(err)
	}
	return a, nil
}

// ActionsQuery selects actions into dest, newest first.
func ActionsQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Order("ac.id DESC")
}

// GetAction loads an action by id.
func GetAction(ctx context.Context, db bun.IDB, id int64) (*Action, error) {
	a := new(Action)
	err := db.NewSelect().Model(a).Where("ac.id = ?", id).Scan(ctx)
	return a, dbErr(err)
}

// FinishAction records the outcome of an action.
func FinishAction(ctx context.Context, db bun.IDB, id int64, state, results string) error {
	res, err := db.NewUpdate().Model((*Action)(nil)).Set("state = ?", state).Set("results = ?", results).
		Where("id = ?", id).Exec(ctx)
	return affected(res, err)
}

// NodesQuery selects nodes with their site and queues into dest, by site
// and name; site, when set, keeps one site's nodes (by site name).
func NodesQuery(db bun.IDB, dest any, site string) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).Relation("Site").Relation("Queues").OrderExpr("site.name, n.name")
	if site != "" {
		q = q.Where("site.name = ?", site)
	}
	return q
}

// GetNode loads a node with its site and queues.
func GetNode(ctx context.Context, db bun.IDB, id int64) (*Node, error) {
	n := new(Node)
	err := db.NewSelect().Model(n).Relation("Site").Relation("Queues").Where("n.id = ?", id).Scan(ctx)
	return n, dbErr(err)
}

// UpdateNode stores a node's name, site and last heartbeat.
func UpdateNode(ctx context.Context, db bun.IDB, n *Node) error {
	res, err := db.NewUpdate().Model(n).Column("name", "site_id", "last_heartbeat").WherePK().Exec(ctx)
	return affected(res, err)
}

// DeleteNode forgets a node and its queue links; a live node comes back
// with its next heartbeat.
func DeleteNode(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*Node)(nil)).Where("id = ?", id).Exec(ctx)
	return affected(res, err)
}

// QueuesQuery selects queues with their site and nodes into dest, by site
// and name; site, when set, keeps one site's queues (by site name).
func QueuesQuery(db bun.IDB, dest any, site string) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).Relation("Site").Relation("Nodes").OrderExpr("site.name, q.name")
	if site != "" {
		q = q.Where("site.name = ?", site)
	}
	return q
}

// GetQueue loads a queue with its site and nodes.
func GetQueue(ctx context.Context, db bun.IDB, id int64) (*Queue, error) {
	q := new(Queue)
	err := db.NewSelect().Model(q).Relation("Site").Relation("Nodes").Where("q.id = ?", id).Scan(ctx)
	return q, dbErr(err)
}
