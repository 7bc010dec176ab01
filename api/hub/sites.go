package hub

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

func (s *Server) siteRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("site")
	r.GET("/sites/", perm, handle(s.listSites))
	r.POST("/sites/", perm, handle(s.saveSite))
	r.GET("/sites/:id/", perm, handle(s.getSite))
	r.PATCH("/sites/:id/", perm, handle(s.saveSite))
	r.DELETE("/sites/:id/", perm, handle(s.deleteSite))
	r.GET("/sites/:id/health/", auth.Require("view_site"), handle(s.getSiteHealth))
	r.POST("/sites/:id/refresh/", auth.Require("change_site"), handle(s.refreshSite))
}

// msgRequired is the message of a missing field.
const msgRequired = "This field is required."

// recordURL is the absolute URL of a record of a collection.
func recordURL(c *gin.Context, collection string, id int64) string {
	return web.AbsURL(c, "/api/"+collection+"/"+strconv.FormatInt(id, 10)+"/")
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func renderSite(c *gin.Context, s *models.Site) siteResponse {
	spaces := make([]recordRef, len(s.Spaces))
	for i, sp := range s.Spaces {
		spaces[i] = recordRef{ID: sp.ID, Name: sp.Name, URL: recordURL(c, "spaces", sp.ID)}
	}
	color := s.Color
	if color == nil {
		color = []int64{}
	}
	return siteResponse{
		ID: s.ID, URL: recordURL(c, "sites", s.ID), Name: s.Name, Label: s.Label, Shortcode: s.Shortcode,
		Type: s.Type, Timezone: s.Timezone, PublicURL: s.PublicURL, StorageSearchURL: s.StorageSearchURL,
		SearchengineURL: s.SearchengineURL, Bandwidth: s.Bandwidth, Color: color,
		AmIConfigured: s.AmIConfigured, ReadyToConfigure: s.ReadyToConfigure,
		Editable: auth.Current(c).Can("change_site"), AddonEnabled: s.AddonEnabled,
		DirectoriesCount: s.DirectoriesCount, FilesCount: s.FilesCount,
		FilesHydratedCount: s.FilesHydratedCount, FilesStubbedCount: s.FilesStubbedCount,
		EnableAutoFileBatchSizing: s.EnableAutoFileBatchSizing, FileBatchGB: s.FileBatchGB,
		FileBatchSize: s.FileBatchSize, FSIscanBuckets: s.FSIscanBuckets, FSIscanThreads: s.FSIscanThreads,
		LockThreshold: s.LockThreshold, Include: nonNilMap(s.Include), Exclude: nonNilMap(s.Exclude),
		Spaces: spaces,
	}
}

// listSites answers with the page kept for the request's sites generation
// when there is one (servePage), per caller's right to edit sites.
func (s *Server) listSites(c *gin.Context) error {
	editable := auth.Current(c).Can("change_site")
	return servePage(c, &s.sitesPages, func(g models.Generations) (listPage, bool) {
		return listPage{sites: g.Sites, editable: editable}, true
	}, func() ([]byte, bool, error) {
		body, err := web.PageJSON(c, func(d *[]models.Site) *bun.SelectQuery { return models.SitesWithSpacesQuery(s.DB, d) },
			func(site *models.Site) any { return renderSite(c, site) })
		return body, true, err
	})
}

// loadSite reads the {id} path parameter and loads that site.
func (s *Server) loadSite(c *gin.Context, db bun.IDB) (*models.Site, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	return models.GetSite(c.Request.Context(), db, id)
}

func (s *Server) getSite(c *gin.Context) error {
	site, err := s.loadSite(c, s.DB)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderSite(c, site))
	return nil
}

// saveSite creates (POST) or updates (PATCH) a site. spaces, when sent,
// replaces the site's spaces by name: the directories of spaces added are
// created on the site, those of spaces removed are removed if empty.
func (s *Server) saveSite(c *gin.Context) error {
	var in changes.SiteInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	site, err := s.Changes.SaveSite(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	create := id == 0
	return saved(c, create, renderSite(c, site))
}

func (s *Server) deleteSite(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	err = models.DeleteSite(c.Request.Context(), s.DB, id)
	if errors.Is(err, models.ErrInUse) {
		return web.Errorf(http.StatusConflict, "This site cannot be deleted while it holds spaces (%s): remove the site from those spaces first.",
			changes.InUseDetail(err))
	}
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// getSiteHealth answers a subset of the site record with the liveness of
// its nodes and queues, as in the site's entry of /api/health/.
func (s *Server) getSiteHealth(c *gin.Context) error {
	site, err := s.loadSite(c, s.DB)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	live, err := s.newLiveness(ctx)
	if err != nil {
		return err
	}
	st, err := s.siteStatus(ctx, live, site)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, siteHealthResponse{ID: site.ID, URL: recordURL(c, "sites", site.ID), Name: site.Name,
		Label: site.Label, RefreshedAt: site.RefreshedAt, siteHealthStatus: st})
	return nil
}

func (s *Server) workflowWait() time.Duration {
	if s.WorkflowWait > 0 {
		return s.WorkflowWait
	}
	return 30 * time.Second
}

// refreshSite runs SiteRefreshWorkflow (joining one already running for the
// site) and answers the refreshed site; when the site has not answered
// within the wait, 202 with the workflow id as task_id.
func (s *Server) refreshSite(c *gin.Context) error {
	site, err := s.loadSite(c, s.DB)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	done, err := s.Changes.RunShort(ctx, changes.Short{What: "Site refresh", ID: workflows.SiteRefreshWorkflowID(site.Name),
		Workflow: workflows.SiteRefreshWorkflowName, Join: true, Wait: s.workflowWait(),
		Input: workflows.SiteRefreshInput{SiteID: site.ID, Site: site.Name, Queue: vocab.DefaultQueue}}, nil)
	if err != nil {
		return err
	}
	if !done {
		c.JSON(http.StatusAccepted, taskRef{TaskID: workflows.SiteRefreshWorkflowID(site.Name)})
		return nil
	}
	if site, err = models.GetSite(ctx, s.DB, site.ID); err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderSite(c, site))
	return nil
}
