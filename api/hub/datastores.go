package hub

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

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

// datastoreInput is the writable part of a data store. accesskey and
// secretaccesskey are secrets: accepted, sealed, never returned.
type datastoreInput struct {
	Name            *string `json:"name"`
	Type            *string `json:"type"`
	AccessKey       *string `json:"accesskey"`
	AccessKeyID     *string `json:"accesskeyid"`
	SecretAccessKey *string `json:"secretaccesskey"`
	Bucket          *string `json:"bucket"`
	Container       *string `json:"container"`
	CredentialsFile *string `json:"credentialsfile"`
	Endpoint        *string `json:"endpoint"`
	Region          *string `json:"region"`
	StorageAccount  *string `json:"storageaccount"`
}

func (s *Server) applyDatastore(ctx context.Context, db bun.IDB, in *datastoreInput, d *models.Datastore, create bool) error {
	v := web.ValidationError{}
	if in.Name != nil || create {
		if err := checkUniqueName(ctx, db, v, (*models.Datastore)(nil), deref(in.Name), d.Name, "A data store with this name already exists.", nil, ""); err != nil {
			return err
		}
		d.Name = deref(in.Name)
	}
	if in.Type != nil || create {
		if strings.TrimSpace(deref(in.Type)) == "" {
			v.Add("type", msgRequired)
		}
		d.Type = deref(in.Type)
	}
	if err := v.Err(); err != nil {
		return err
	}
	setIf(&d.AccessKeyID, in.AccessKeyID)
	setIf(&d.Bucket, in.Bucket)
	setIf(&d.Container, in.Container)
	setIf(&d.CredentialsFile, in.CredentialsFile)
	setIf(&d.Endpoint, in.Endpoint)
	setIf(&d.Region, in.Region)
	setIf(&d.StorageAccount, in.StorageAccount)
	for _, sec := range []struct {
		in     *string
		dst    *string
		column string
	}{{in.AccessKey, &d.AccessKeyEnc, models.ColDatastoreAccessKey}, {in.SecretAccessKey, &d.SecretAccessKeyEnc, models.ColDatastoreSecretAccessKey}} {
		if sec.in == nil {
			continue
		}
		sealed, err := s.seal(sec.column, *sec.in)
		if err != nil {
			return err
		}
		*sec.dst = sealed
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
	var in datastoreInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var d *models.Datastore
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		d = new(models.Datastore)
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
			if d, err = models.GetDatastore(ctx, tx, id); err != nil {
				return err
			}
		}
		if err := s.applyDatastore(ctx, tx, &in, d, create); err != nil {
			return err
		}
		return models.SaveDatastore(ctx, tx, d)
	})
	if err != nil {
		return err
	}
	return saved(c, create, renderDatastore(c, d))
}

func (s *Server) deleteDatastore(c *gin.Context) error {
	return deleteByID(c, s.DB, models.DeleteDatastore)
}

type ipAddressInput struct {
	IPAddr    *string `json:"ipaddr"`
	Datastore *int64  `json:"datastore"`
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
	var in ipAddressInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var a *models.IPAddress
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		a = new(models.IPAddress)
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
			if a, err = models.GetIPAddress(ctx, tx, id); err != nil {
				return err
			}
		}
		v := web.ValidationError{}
		if in.IPAddr != nil || create {
			addr, err := netip.ParseAddr(strings.TrimSpace(deref(in.IPAddr)))
			switch {
			case deref(in.IPAddr) == "":
				v.Add("ipaddr", msgRequired)
			case err != nil || !addr.Is4():
				v.Add("ipaddr", "Enter a valid IPv4 address.")
			default:
				a.IPAddr = addr.String()
			}
		}
		if in.Datastore != nil || create {
			switch {
			case in.Datastore == nil:
				v.Add("datastore", msgRequired)
			default:
				if _, err := models.GetDatastore(ctx, tx, *in.Datastore); isNotFound(err) {
					v.Add("datastore", "Invalid pk \""+strconv.FormatInt(*in.Datastore, 10)+"\" - object does not exist.")
				} else if err != nil {
					return err
				}
				a.DatastoreID = *in.Datastore
			}
		}
		if len(v) == 0 {
			n, err := tx.NewSelect().Model((*models.IPAddress)(nil)).
				Where("datastore_id = ? AND ipaddr = ? AND id <> ?", a.DatastoreID, a.IPAddr, a.ID).Count(ctx)
			if err != nil {
				return err
			}
			v.Check(n == 0, "ipaddr", "This data store already has this IP address.")
		}
		if err := v.Err(); err != nil {
			return err
		}
		if err := models.SaveIPAddress(ctx, tx, a); err != nil {
			return err
		}
		var err error
		a, err = models.GetIPAddress(ctx, tx, a.ID)
		return err
	})
	if err != nil {
		return err
	}
	return saved(c, create, renderIPAddress(c, a))
}

func (s *Server) deleteIPAddress(c *gin.Context) error {
	return deleteByID(c, s.DB, models.DeleteIPAddress)
}
