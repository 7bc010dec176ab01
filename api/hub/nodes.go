package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

func (s *Server) nodeRoutes(r *gin.RouterGroup) {
	nperm := auth.CRUD("node")
	r.GET("/nodes/", nperm, handle(s.listNodes))
	r.GET("/nodes/:id/", nperm, handle(s.getNode))
	r.PATCH("/nodes/:id/", nperm, handle(s.patchNode))
	r.DELETE("/nodes/:id/", nperm, handle(s.deleteNode))

	qperm := auth.CRUD("queue")
	r.GET("/queues/", qperm, handle(s.listQueues))
	r.GET("/queues/:id/", qperm, handle(s.getQueue))
}

// heartbeatLiveness judges heartbeats against node_health_last_heartbeat_interval,
// as GET /api/health/ does.
func (s *Server) heartbeatLiveness(ctx context.Context) (func(*time.Time) bool, error) {
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return nil, err
	}
	cutoff := time.Now().Add(-time.Duration(conf.NodeHealthLastHeartbeatInterval) * time.Second)
	return func(t *time.Time) bool { return t != nil && t.After(cutoff) }, nil
}

func nodeSiteName(s *models.Site) string {
	if s == nil {
		return ""
	}
	return s.Name
}

func renderNode(c *gin.Context, n *models.Node, online func(*time.Time) bool) nodeResponse {
	hasDefault := false
	for _, q := range n.Queues {
		hasDefault = hasDefault || q.Name == vocab.DefaultQueue
	}
	return nodeResponse{ID: n.ID, URL: web.AbsURL(c, "/api/nodes/"+strconv.FormatInt(n.ID, 10)+"/"),
		Name: n.Name, Site: nodeSiteName(n.Site), LastHeartbeat: n.LastHeartbeat,
		Online: online(n.LastHeartbeat), HasDefaultQueue: hasDefault}
}

// listNodes is paginated; site keeps one site's nodes (by name).
func (s *Server) listNodes(c *gin.Context) error {
	online, err := s.heartbeatLiveness(c.Request.Context())
	if err != nil {
		return err
	}
	return web.Paginate(c, func(d *[]models.Node) *bun.SelectQuery { return models.NodesQuery(s.DB, d, c.Query("site")) },
		func(n *models.Node) any { return renderNode(c, n, online) })
}

func (s *Server) nodeFromPath(c *gin.Context) (*models.Node, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	return models.GetNode(c.Request.Context(), s.DB, id)
}

func (s *Server) getNode(c *gin.Context) error {
	n, err := s.nodeFromPath(c)
	if err != nil {
		return err
	}
	online, err := s.heartbeatLiveness(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderNode(c, n, online))
	return nil
}

// nodeHostnamePattern accepts DNS host names (labels of letters, digits and
// hyphens, dot-separated), which is what nodes report as their name.
var nodeHostnamePattern = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9_-]{0,62})(\.[a-zA-Z0-9]([a-zA-Z0-9_-]{0,62}))*$`)

// nodePatchInput is the body of PATCH /api/nodes/{id}/.
type nodePatchInput struct {
	Name          *string         `json:"name"`
	Site          *string         `json:"site"`
	LastHeartbeat json.RawMessage `json:"last_heartbeat"`
}

// patchNode changes name, site (a site name) and last_heartbeat (RFC 3339
// or null). online, has_default_queue and url are read only.
func (s *Server) patchNode(c *gin.Context) error {
	var in nodePatchInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	n, err := s.nodeFromPath(c)
	if err != nil {
		return err
	}
	v := web.ValidationError{}
	if in.Name != nil {
		v.Check(len(*in.Name) <= 253 && nodeHostnamePattern.MatchString(*in.Name), "name", "Must be a host name.")
		n.Name = *in.Name
	}
	if in.Site != nil {
		site, err := models.GetSiteByName(ctx, s.DB, *in.Site)
		switch {
		case isNotFound(err):
			v.Add("site", "Object with name="+*in.Site+" does not exist.")
		case err != nil:
			return err
		default:
			n.SiteID, n.Site = site.ID, site
		}
	}
	if val, sent := changes.RawMember(in.LastHeartbeat); sent {
		str, ok := val.(string)
		t, perr := time.Parse(time.RFC3339Nano, str)
		switch {
		case val == nil:
			n.LastHeartbeat = nil
		case !ok || perr != nil:
			v.Add("last_heartbeat", "Must be an RFC 3339 timestamp or null.")
		default:
			t = t.UTC()
			n.LastHeartbeat = &t
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	if err := models.UpdateNode(ctx, s.DB, n); err != nil {
		return err
	}
	return s.getNode(c)
}

func (s *Server) deleteNode(c *gin.Context) error {
	return deleteByID(c, s.DB, models.DeleteNode)
}

func renderQueue(c *gin.Context, q *models.Queue, online func(*time.Time) bool) queueResponse {
	nodes := make([]string, len(q.Nodes))
	for i, n := range q.Nodes {
		nodes[i] = n.Name
	}
	return queueResponse{ID: q.ID, URL: web.AbsURL(c, "/api/queues/"+strconv.FormatInt(q.ID, 10)+"/"),
		Name: q.Name, Label: q.Label, LastHeartbeat: q.LastHeartbeat, Online: online(q.LastHeartbeat),
		Nodes: nodes, Site: nodeSiteName(q.Site)}
}

// listQueues is paginated; site keeps one site's queues (by name).
func (s *Server) listQueues(c *gin.Context) error {
	online, err := s.heartbeatLiveness(c.Request.Context())
	if err != nil {
		return err
	}
	return web.Paginate(c, func(d *[]models.Queue) *bun.SelectQuery { return models.QueuesQuery(s.DB, d, c.Query("site")) },
		func(q *models.Queue) any { return renderQueue(c, q, online) })
}

func (s *Server) getQueue(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	q, err := models.GetQueue(c.Request.Context(), s.DB, id)
	if err != nil {
		return err
	}
	online, err := s.heartbeatLiveness(c.Request.Context())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderQueue(c, q, online))
	return nil
}
