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

func renderStoragePool(c *gin.Context, p *models.StoragePool) storagePoolResponse {
	return storagePoolResponse{ID: p.ID, URL: recordURL(c, "storagepools", p.ID), Name: p.Name, Filesystem: p.Filesystem,
		Capacity: p.Capacity, FreeSpace: p.FreeSpace, UsedSpace: p.UsedSpace, IsDefault: p.IsDefault,
		Site: p.SiteID, UpdatedAt: p.UpdatedAt}
}

func renderServer(c *gin.Context, sv *models.Server) serverResponse {
	return serverResponse{ID: sv.ID, URL: recordURL(c, "servers", sv.ID), Name: sv.Name, Site: sv.SiteID,
		ListOfInterfaces: nonNilMap(sv.ListOfInterfaces), UpdatedAt: sv.UpdatedAt}
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
