package hub

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

func (s *Server) spaceRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("space")
	r.GET("/spaces/", perm, handle(s.listSpaces))
	r.POST("/spaces/", perm, handle(s.saveSpace))
	r.GET("/spaces/:id/", perm, handle(s.getSpace))
	r.PATCH("/spaces/:id/", perm, handle(s.saveSpace))
	r.DELETE("/spaces/:id/", perm, handle(s.deleteSpace))
	// A site's filesets are its spaces' folders (filesets.go).
	r.GET("/filesets/", auth.CRUD("space"), handle(s.listFilesets))
}

// spaceView holds what rendering spaces needs beyond the rows.
type spaceView struct {
	pools map[int64]string // site id → default pool name
	nfs   map[int64][]models.NFSShare
	smb   map[int64][]models.SMBShare
	// profile is the C+J profile of each space at /spaces/<name> that has one.
	profile map[int64]string
}

func (s *Server) loadSpaceView(ctx context.Context, spaces []models.Space) (*spaceView, error) {
	v := &spaceView{pools: map[int64]string{}, nfs: map[int64][]models.NFSShare{}, smb: map[int64][]models.SMBShare{}, profile: map[int64]string{}}
	var pools []models.StoragePool
	if err := s.DB.NewSelect().Model(&pools).Where("is_default = ?", true).Scan(ctx); err != nil {
		return nil, err
	}
	for _, p := range pools {
		v.pools[p.SiteID] = p.Name
	}
	for _, sp := range spaces {
		nfs, smb, err := models.SpaceShares(ctx, s.DB, sp.ID)
		if err != nil {
			return nil, err
		}
		v.nfs[sp.ID], v.smb[sp.ID] = nfs, smb
		if v.profile[sp.ID], err = models.SpaceProfile(ctx, s.DB, &sp); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (v *spaceView) render(c *gin.Context, sp *models.Space) spaceResponse {
	sites := make([]spaceSiteResponse, len(sp.Links))
	ready := true
	for i, l := range sp.Links {
		addon := addonDisabled
		if l.Site.AddonEnabled {
			addon = addonEnabled
		}
		usage := l.Usage
		if usage == nil {
			usage = []int64{}
		}
		sites[i] = spaceSiteResponse{ID: strconv.FormatInt(l.SiteID, 10), Name: l.Site.Name, Label: l.Label,
			Pool: v.pools[l.SiteID], Usage: usage, Addon: addon, State: l.State, Error: web.CleanErrorText(l.Error)}
		ready = ready && l.State == vocab.SpaceSiteReady
	}
	shares := []nestedShare{}
	for _, n := range v.nfs[sp.ID] {
		shares = append(shares, nestedShare{ID: n.ID, Type: "nfs", Name: n.Name, Path: n.Path, URL: recordURL(c, "nfsshares", n.ID)})
	}
	for _, m := range v.smb[sp.ID] {
		shares = append(shares, nestedShare{ID: m.ID, Type: "smb", Name: m.Name, Path: m.Path, URL: recordURL(c, "smbshares", m.ID)})
	}
	var sched *snapshotScheduleResponse
	if ss := sp.SnapshotSchedule; ss != nil {
		sched = &snapshotScheduleResponse{ID: ss.ID, Space: sp.ID, Duration: ss.Duration, Frequency: ss.Frequency, Time: ss.Time}
	}
	color := sp.Color
	if color == nil {
		color = []int64{}
	}
	var profile *string
	if p := v.profile[sp.ID]; p != "" {
		profile = &p
	}
	return spaceResponse{
		ID: sp.ID, UUID: sp.UUID, URL: recordURL(c, "spaces", sp.ID), Name: sp.Name, Mountpoint: sp.Mountpoint,
		Size: sp.Size, PermissionMode: sp.PermissionMode, Color: color, Created: sp.Created,
		Editable: auth.Current(c).Can("change_space") && !sp.Immutable, IsReady: ready,
		NestedShares:  shares,
		Relationships: spaceRelationships{Sites: len(sp.Links), NFSShares: len(v.nfs[sp.ID]), SMBShares: len(v.smb[sp.ID])},
		Sites:         sites, Immutable: sp.Immutable, OnSites: nonNilMap(sp.OnSites), SnapshotSchedule: sched,
		Profile: profile,
	}
}

// spaceFilter reads site_id and search_keyword.
func spaceFilter(c *gin.Context) (models.SpaceFilter, error) {
	var f models.SpaceFilter
	id, ok, err := web.QueryInt(c, "site_id")
	if err != nil {
		return f, err
	}
	if ok {
		f.SiteID = &id
	}
	f.Keyword = c.Query("search_keyword")
	return f, nil
}

func (s *Server) listSpaces(c *gin.Context) error {
	f, err := spaceFilter(c)
	if err != nil {
		return err
	}
	page, size, err := web.PageParams(c)
	if err != nil {
		return err
	}
	var spaces []models.Space
	count, err := web.ScanPage(c, models.SpacesQuery(s.DB, &spaces, f), &spaces, page, size)
	if err != nil {
		return err
	}
	view, err := s.loadSpaceView(c.Request.Context(), spaces)
	if err != nil {
		return err
	}
	out := make([]any, len(spaces))
	for i := range spaces {
		out[i] = view.render(c, &spaces[i])
	}
	return web.WritePage(c, out, count, page, size)
}

func (s *Server) renderOneSpace(c *gin.Context, code int, sp *models.Space) error {
	view, err := s.loadSpaceView(c.Request.Context(), []models.Space{*sp})
	if err != nil {
		return err
	}
	c.JSON(code, view.render(c, sp))
	return nil
}

func (s *Server) getSpace(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	f, err := spaceFilter(c)
	if err != nil {
		return err
	}
	sp, err := models.GetSpace(c.Request.Context(), s.DB, id, f)
	if err != nil {
		return err
	}
	return s.renderOneSpace(c, http.StatusOK, sp)
}

// saveSpace creates (POST) or updates (PATCH) a space, then has the
// SpaceWorkflow create its directory on every site where it is not ready
// yet (so saving again retries a failed site) and remove it, if empty, from
// the sites taken away.
func (s *Server) saveSpace(c *gin.Context) error {
	var in changes.SpaceInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	sp, err := s.Changes.SaveSpace(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	create := id == 0
	code := http.StatusOK
	if create {
		code = http.StatusCreated
	}
	return s.renderOneSpace(c, code, sp)
}

// deleteSpace deletes the record at once (204); the SpaceWorkflow then
// removes the directory from each site only where it is empty.
func (s *Server) deleteSpace(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	if err := s.Changes.DeleteSpace(c.Request.Context(), id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}
