package hub

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) alertRoutes(r *gin.RouterGroup) {
	aperm := auth.CRUD("alert")
	r.GET("/alerts/", aperm, handle(s.listAlerts))
	r.GET("/alerts/:id/", aperm, handle(s.getAlert))
	r.PATCH("/alerts/:id/", aperm, handle(s.patchAlert))

	cperm := auth.CRUD("action")
	r.GET("/actions/", cperm, handle(s.listActions))
	r.POST("/actions/", cperm, handle(s.createAction))
	r.GET("/actions/:id/", cperm, handle(s.getAction))
}

func renderAlert(c *gin.Context, a *models.Alert) alertResponse {
	return alertResponse{ID: a.ID, URL: web.AbsURL(c, "/api/alerts/"+strconv.FormatInt(a.ID, 10)+"/"),
		Name: a.Name, Node: a.Node, Queue: a.Queue, Severity: a.Severity, Site: a.Site,
		Summary: a.Summary, Suppressed: a.Suppressed, Timestamp: a.Timestamp, Created: a.Created}
}

// timestampRange reads the timestamp filter: a date (YYYY-MM-DD, UTC)
// selects that day, an RFC 3339 timestamp selects that exact instant.
func timestampRange(s string) (from, to time.Time, err error) {
	if d, perr := time.Parse(time.DateOnly, s); perr == nil {
		return d, d.AddDate(0, 0, 1), nil
	}
	t, perr := time.Parse(time.RFC3339Nano, strings.Replace(s, " ", "+", 1))
	if perr != nil {
		return from, to, web.Invalid("timestamp", "Must be a date (YYYY-MM-DD) or an RFC 3339 timestamp.")
	}
	return t, t.Add(time.Microsecond), nil
}

// listAlerts answers a bare array, newest first. name, node, site and
// severity match exactly, summary is a case-insensitive substring,
// timestamp a day or an instant, suppressed a boolean.
func (s *Server) listAlerts(c *gin.Context) error {
	f := models.AlertFilter{Name: c.Query("name"), Node: c.Query("node"), Site: c.Query("site"),
		Severity: c.Query("severity"), Summary: c.Query("summary")}
	if ts := c.Query("timestamp"); ts != "" {
		var err error
		if f.From, f.To, err = timestampRange(ts); err != nil {
			return err
		}
	}
	var err error
	if f.Suppressed, err = queryBoolFilter(c, "suppressed"); err != nil {
		return err
	}
	as, err := models.Alerts(c.Request.Context(), s.DB, f)
	if err != nil {
		return err
	}
	writeAll(c, as, renderAlert)
	return nil
}

func (s *Server) getAlert(c *gin.Context) error {
	return getOne(c, s.DB, models.GetAlert, renderAlert)
}

// alertPatchInput is the body of PATCH /api/alerts/{id}/.
type alertPatchInput struct {
	Suppressed *bool `json:"suppressed"`
}

// patchAlert changes suppressed, the one field an operator sets; alerts
// are otherwise raised by the hub itself.
func (s *Server) patchAlert(c *gin.Context) error {
	var in alertPatchInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if in.Suppressed != nil {
		if err := models.SetAlertSuppressed(ctx, s.DB, id, *in.Suppressed); err != nil {
			return err
		}
	}
	a, err := models.GetAlert(ctx, s.DB, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderAlert(c, a))
	return nil
}

func renderAction(c *gin.Context, a *models.Action) actionResponse {
	return actionResponse{ID: a.ID, URL: web.AbsURL(c, "/api/actions/"+strconv.FormatInt(a.ID, 10)+"/"),
		Action: a.Action, State: a.State, Created: a.Created}
}

func renderActionDetail(c *gin.Context, a *models.Action) actionDetailResponse {
	return actionDetailResponse{actionResponse: renderAction(c, a), Results: web.CleanErrorText(a.Results), User: a.UserID}
}

func (s *Server) listActions(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Action) *bun.SelectQuery { return models.ActionsQuery(s.DB, d) },
		func(a *models.Action) any { return renderAction(c, a) })
}

// actionInput is the body of POST /api/actions/.
type actionInput struct {
	Action *string `json:"action"`
}

// createAction records an operator's request, owned by the caller, and
// starts its ActionWorkflow: 201 with the action, PENDING (or already
// further). An action the hub does not know is 400.
func (s *Server) createAction(c *gin.Context) error {
	var in actionInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	a, err := s.Changes.StartAction(c.Request.Context(), deref(in.Action), auth.Current(c).User.ID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, renderActionDetail(c, a))
	return nil
}

func (s *Server) getAction(c *gin.Context) error {
	return getOne(c, s.DB, models.GetAction, renderActionDetail)
}
