package hub

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// Health values, worst last.
const (
	healthOK       = "ok"
	healthWarning  = "warning"
	healthCritical = "critical"
)

func worse(a, b string) string {
	rank := map[string]int{healthOK: 0, healthWarning: 1, healthCritical: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func (s *Server) healthRoutes(r *gin.RouterGroup) {
	r.GET("/health/", auth.Require("view_site"), handle(s.health))
}

// health reports the hub (database and Temporal reachable) and each site:
// a node or queue is online when its last heartbeat is within
// node_health_last_heartbeat_interval; a site is ok when every queue is
// online, warning when some are, critical when none (or no node ever
// reported). Overall is critical when the hub or every site is, warning
// when any site is not ok.
func (s *Server) health(c *gin.Context) error {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	hub := healthOK
	if err := s.DB.PingContext(ctx); err != nil {
		s.Log.Warn("health: database unreachable", "error", err)
		hub = healthCritical
	}
	if err := s.Changes.TemporalHealthy(ctx); err != nil {
		s.Log.Warn("health: temporal unreachable", "error", err)
		hub = healthCritical
	}
	overall := hub
	var sites []siteHealthStatus
	if hub == healthOK {
		var err error
		sites, overall, err = s.siteHealth(ctx, overall)
		if err != nil {
			return err
		}
	}
	if sites == nil {
		sites = []siteHealthStatus{}
	}
	c.JSON(http.StatusOK, healthResponse{OverallHealth: overall, HubStatus: hubHealth{Health: hub}, SiteStatus: sites})
	return nil
}

// liveness judges heartbeats against node_health_last_heartbeat_interval.
type liveness struct{ cutoff time.Time }

func (s *Server) newLiveness(ctx context.Context) (liveness, error) {
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return liveness{}, err
	}
	return liveness{cutoff: time.Now().Add(-time.Duration(conf.NodeHealthLastHeartbeatInterval) * time.Second)}, nil
}

func (l liveness) online(t *time.Time) bool { return t != nil && t.After(l.cutoff) }

func (l liveness) status(t *time.Time) string {
	if l.online(t) {
		return healthOK
	}
	return healthCritical
}

func (s *Server) siteHealth(ctx context.Context, overall string) ([]siteHealthStatus, string, error) {
	live, err := s.newLiveness(ctx)
	if err != nil {
		return nil, "", err
	}
	var sites []models.Site
	if err := models.SitesQuery(s.DB, &sites).Scan(ctx); err != nil {
		return nil, "", err
	}
	out := make([]siteHealthStatus, 0, len(sites))
	worst, allDown := healthOK, len(sites) > 0
	for i := range sites {
		st, err := s.siteStatus(ctx, live, &sites[i])
		if err != nil {
			return nil, "", err
		}
		health := st.Health
		worst = worse(worst, health)
		if health != healthCritical {
			allDown = false
		}
		out = append(out, st)
	}
	// One site in trouble is a warning for the hub as a whole; every site
	// down is critical.
	switch {
	case allDown:
		overall = healthCritical
	case worst != healthOK:
		overall = worse(overall, healthWarning)
	}
	return out, overall, nil
}

// siteStatus is a site's entry of the health report: its nodes and queues
// online or not, and the site ok when every queue is online, warning when
// some are, critical when none (or no node ever reported).
func (s *Server) siteStatus(ctx context.Context, live liveness, site *models.Site) (siteHealthStatus, error) {
	nodes, err := models.SiteNodes(ctx, s.DB, site.ID)
	if err != nil {
		return siteHealthStatus{}, err
	}
	queues, err := models.SiteQueues(ctx, s.DB, site.ID)
	if err != nil {
		return siteHealthStatus{}, err
	}
	nodeOut := make([]nodeHealth, len(nodes))
	for i, n := range nodes {
		hasDefault := false
		for _, q := range n.Queues {
			hasDefault = hasDefault || q.Name == vocab.DefaultQueue
		}
		nodeOut[i] = nodeHealth{Name: n.Name, Health: live.status(n.LastHeartbeat), Online: live.online(n.LastHeartbeat),
			HasDefaultQueue: hasDefault, LastHeartbeat: n.LastHeartbeat, WorkerVersion: n.WorkerVersion,
			EngineVersion: n.EngineVersion, AnalyticsVersion: n.AnalyticsVersion, SearchVersion: n.SearchVersion}
	}
	up := 0
	queueOut := make([]queueHealth, len(queues))
	for i, q := range queues {
		if live.online(q.LastHeartbeat) {
			up++
		}
		queueOut[i] = queueHealth{Name: q.Name, Health: live.status(q.LastHeartbeat), Online: live.online(q.LastHeartbeat),
			LastHeartbeat: q.LastHeartbeat}
	}
	health := healthWarning
	switch {
	case up == 0:
		health = healthCritical
	case up == len(queues):
		health = healthOK
	}
	return siteHealthStatus{Site: site.Name, Health: health, Nodes: nodeOut, Queues: queueOut}, nil
}
