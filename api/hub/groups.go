package hub

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) groupRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("group")
	r.GET("/groups/", perm, handle(s.listGroups))
	r.POST("/groups/", perm, handle(s.saveGroup))
	r.GET("/groups/:id/", perm, handle(s.getGroup))
	r.PATCH("/groups/:id/", perm, handle(s.saveGroup))
	r.DELETE("/groups/:id/", perm, handle(s.deleteGroup))

	pperm := auth.CRUD("permission")
	r.GET("/permissions/", pperm, handle(func(c *gin.Context) error {
		return web.Paginate(c, func(d *[]models.Permission) *bun.SelectQuery { return models.PermissionsQuery(s.DB, d) }, func(p *models.Permission) any { return renderPermission(p) })
	}))
	r.GET("/permissions/:id/", pperm, handle(func(c *gin.Context) error {
		id, err := web.PathID(c, "id")
		if err != nil {
			return err
		}
		p, err := models.GetPermission(c.Request.Context(), s.DB, id)
		if err != nil {
			return err
		}
		c.JSON(http.StatusOK, renderPermission(p))
		return nil
	}))
}

func renderGroup(c *gin.Context, g *models.Group) groupResponse {
	perms := make([]string, len(g.Permissions))
	for i, p := range g.Permissions {
		perms[i] = p.Codename
	}
	users := make([]string, len(g.Users))
	for i, u := range g.Users {
		users[i] = u.Username
	}
	return groupResponse{ID: g.ID, URL: web.AbsURL(c, "/api/groups/"+strconv.FormatInt(g.ID, 10)+"/"),
		Name: g.Name, Permissions: perms, Users: users}
}

func (s *Server) listGroups(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Group) *bun.SelectQuery { return models.GroupsQuery(s.DB, d) }, func(g *models.Group) any { return renderGroup(c, g) })
}

func (s *Server) getGroup(c *gin.Context) error {
	return getOne(c, s.DB, models.GetGroup, renderGroup)
}

// saveGroup creates (POST) or updates (PATCH) a group.
func (s *Server) saveGroup(c *gin.Context) error {
	var in changes.GroupInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	if err := s.groupGrantable(c, id, in); err != nil {
		return err
	}
	g, err := s.Changes.SaveGroup(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	return saved(c, id == 0, renderGroup(c, g))
}

// deleteGroup deletes a group, which removes each of its members from it:
// the caller must be able to make that write (groupGrantable).
func (s *Server) deleteGroup(c *gin.Context) error {
	if id, err := web.PathID(c, "id"); err == nil {
		if err := s.groupGrantable(c, id, changes.GroupInput{Users: &[]string{}}); err != nil {
			return err
		}
	}
	return deleteByID(c, s.DB, models.DeleteGroup)
}
