package hub

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) datastoreRoutes(r *gin.RouterGroup) {
	ds := auth.CRUD("datastore")
	r.GET("/datastores/", ds, handle(s.listDatastores))
	r.POST("/datastores/", ds, handle(s.saveDatastore))
	r.GET("/datastores/:id/", ds, handle(s.getDatastore))
	r.PATCH("/datastores/:id/", ds, handle(s.saveDatastore))
	r.DELETE("/datastores/:id/", ds, handle(s.deleteDatastore))

	ip := auth.CRUD("ipaddress")
	r.GET("/ipaddresses/", ip, handle(s.listIPAddresses))
	r.POST("/ipaddresses/", ip, handle(s.saveIPAddress))
	r.GET("/ipaddresses/:id/", ip, handle(s.getIPAddress))
	r.PATCH("/ipaddresses/:id/", ip, handle(s.saveIPAddress))
	r.DELETE("/ipaddresses/:id/", ip, handle(s.deleteIPAddress))
}

// errNoSecretKey answers writes carrying a secret on a hub started
// without a secret key.
var errNoSecretKey = web.Errorf(http.StatusServiceUnavailable, "The hub has no secret key configured (HUB_SECRET_KEY), so it cannot store secrets.")

// seal encrypts a secret input for column, or returns "" for "".
func (s *Server) seal(column, plaintext string) (string, error) {
	if plaintext == "" {
		return "", nil
	}
	if s.Secrets == nil {
		return "", errNoSecretKey
	}
	return s.Secrets.Seal(column, plaintext)
}

// sealDatastoreSecrets seals the secrets a data store write carries.
func (s *Server) sealDatastoreSecrets(in *changes.DatastoreInput) error {
	for _, sec := range []struct {
		in     **string
		column string
	}{{&in.AccessKey, models.ColDatastoreAccessKey}, {&in.SecretAccessKey, models.ColDatastoreSecretAccessKey}} {
		if *sec.in == nil {
			continue
		}
		sealed, err := s.seal(sec.column, **sec.in)
		if err != nil {
			return err
		}
		*sec.in = &sealed
	}
	return nil
}

func renderDatastore(c *gin.Context, d *models.Datastore) datastoreResponse {
	return datastoreResponse{ID: d.ID, URL: recordURL(c, "datastores", d.ID), Name: d.Name, Type: d.Type,
		AccessKeyID: d.AccessKeyID, Bucket: d.Bucket, Container: d.Container, CredentialsFile: d.CredentialsFile,
		Endpoint: d.Endpoint, Region: d.Region, StorageAccount: d.StorageAccount}
}

func (s *Server) listDatastores(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Datastore) *bun.SelectQuery { return models.DatastoresQuery(s.DB, d) },
		func(d *models.Datastore) any { return renderDatastore(c, d) })
}

func (s *Server) getDatastore(c *gin.Context) error {
	return getOne(c, s.DB, models.GetDatastore, renderDatastore)
}

func (s *Server) saveDatastore(c *gin.Context) error {
	var in changes.DatastoreInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	if err := s.sealDatastoreSecrets(&in); err != nil {
		return err
	}
	d, err := s.Changes.SaveDatastore(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	return saved(c, id == 0, renderDatastore(c, d))
}

func (s *Server) deleteDatastore(c *gin.Context) error {
	return deleteByID(c, s.DB, models.DeleteDatastore)
}

func renderIPAddress(c *gin.Context, a *models.IPAddress) ipAddressResponse {
	var ds *recordRef
	if a.Datastore != nil {
		ds = &recordRef{ID: a.Datastore.ID, Name: a.Datastore.Name, URL: recordURL(c, "datastores", a.Datastore.ID)}
	}
	return ipAddressResponse{ID: a.ID, URL: recordURL(c, "ipaddresses", a.ID), IPAddr: a.IPAddr, Datastore: ds}
}

func (s *Server) listIPAddresses(c *gin.Context) error {
	id, ok, err := web.QueryInt(c, "datastore_id")
	if err != nil {
		return err
	}
	var ds *int64
	if ok {
		ds = &id
	}
	return web.Paginate(c, func(d *[]models.IPAddress) *bun.SelectQuery { return models.IPAddressesQuery(s.DB, d, ds) },
		func(a *models.IPAddress) any { return renderIPAddress(c, a) })
}

func (s *Server) getIPAddress(c *gin.Context) error {
	return getOne(c, s.DB, models.GetIPAddress, renderIPAddress)
}

func (s *Server) saveIPAddress(c *gin.Context) error {
	var in changes.IPAddressInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	a, err := s.Changes.SaveIPAddress(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	return saved(c, id == 0, renderIPAddress(c, a))
}

func (s *Server) deleteIPAddress(c *gin.Context) error {
	return deleteByID(c, s.DB, models.DeleteIPAddress)
}
