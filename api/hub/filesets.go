package hub

import (
	"net/http"
	"path"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// listFilesets answers GET /filesets/?site=<name>: the site's filesets.
// Without GPFS here, a site's filesets are the folders of the spaces it
// holds, one per space, in mountpoint order (docs/catalogue-storage.md,
// "File sets"). An unknown or missing site is a 400 naming site.
func (s *Server) listFilesets(c *gin.Context) error {
	ctx := c.Request.Context()
	name := c.Query("site")
	if name == "" {
		return invalidSite(msgRequired)
	}
	site, err := models.GetSiteByName(ctx, s.DB, name)
	if isNotFound(err) {
		return invalidSite("Object with name=" + name + " does not exist.")
	} else if err != nil {
		return err
	}
	var spaces []models.Space
	if err := models.SpacesQuery(s.DB, &spaces, models.SpaceFilter{SiteID: &site.ID}).OrderExpr("sp.mountpoint").Scan(ctx); err != nil {
		return err
	}
	var pools []models.StoragePool
	if err := s.DB.NewSelect().Model(&pools).Where("site_id = ?", site.ID).Where("is_default = ?", true).Limit(1).Scan(ctx); err != nil {
		return err
	}
	var pool models.StoragePool
	if len(pools) > 0 {
		pool = pools[0]
	}
	out := make([]filesetResponse, 0, len(spaces))
	for _, sp := range spaces {
		for _, l := range sp.Links {
			if l.SiteID != site.ID {
				continue
			}
			out = append(out, filesetResponse{
				Name: path.Base(sp.Mountpoint), Path: sp.Mountpoint, Site: site.Name,
				Space: sp.ID, SpaceName: sp.Name, CJSpace: models.CJSpaceName(sp.Mountpoint) != "",
				State: l.State, Error: web.CleanErrorText(l.Error), Quota: sp.Size,
				Pool: pool.Name, Filesystem: pool.Filesystem,
			})
		}
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func invalidSite(msg string) error { return web.Invalid("site", msg) }
