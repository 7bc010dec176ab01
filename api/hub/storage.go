package hub

import (
	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// storageRoutes serves storage pools and servers: read only, filled from
// what site workers report on POST /sites/{id}/refresh/. Other methods
// answer 405. Both lists take the filter site (integer).
func (s *Server) storageRoutes(r *gin.RouterGroup) {
	r.GET("/storagepools/", auth.Require("view_storagepool"), handle(s.listStoragePools))
	r.GET("/storagepools/:id/", auth.Require("view_storagepool"), handle(s.getStoragePool))
	r.GET("/servers/", auth.Require("view_server"), handle(s.listServers))
	r.GET("/servers/:id/", auth.Require("view_server"), handle(s.getServer))
}

func siteQueryFilter(c *gin.Context) (*int64, error) {
	id, ok, err := web.QueryInt(c, "site")
	if err != nil || !ok {
		return nil, err
	}
	return &id, nil
}

func renderStoragePool(c *gin.Context, p *models.StoragePool) gin.H {
	return gin.H{"id": p.ID, "url": recordURL(c, "storagepools", p.ID), "name": p.Name, "filesystem": p.Filesystem,
		"capacity": p.Capacity, "free_space": p.FreeSpace, "used_space": p.UsedSpace, "is_default": p.IsDefault,
		"site": p.SiteID, "updated_at": p.UpdatedAt}
}

func renderServer(c *gin.Context, sv *models.Server) gin.H {
	return gin.H{"id": sv.ID, "url": recordURL(c, "servers", sv.ID), "name": sv.Name, "site": sv.SiteID,
		"list_of_interfaces": nonNilMap(sv.ListOfInterfaces), "updated_at": sv.UpdatedAt}
}

func (s *Server) listStoragePools(c *gin.Context) error {
	site, err := siteQueryFilter(c)
	if err != nil {
		return err
	}
	return web.Paginate(c, func(d *[]models.StoragePool) *bun.SelectQuery { return models.StoragePoolsQuery(s.DB, d, site) },
		func(p *models.StoragePool) any { return renderStoragePool(c, p) })
}

func (s *Server) getStoragePool(c *gin.Context) error {
	return getOne(c, s.DB, models.GetStoragePool, renderStoragePool)
}

func (s *Server) listServers(c *gin.Context) error {
	site, err := siteQueryFilter(c)
	if err != nil {
		return err
	}
	return web.Paginate(c, func(d *[]models.Server) *bun.SelectQuery { return models.ServersQuery(s.DB, d, site) },
		func(sv *models.Server) any { return renderServer(c, sv) })
}

func (s *Server) getServer(c *gin.Context) error {
	return getOne(c, s.DB, models.GetServer, renderServer)
}
