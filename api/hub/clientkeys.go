package hub

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) clientKeyRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("clientkey")
	r.GET("/auth/clientkeys/", perm, handle(s.listClientKeys))
	r.POST("/auth/clientkeys/", perm, handle(s.createClientKey))
	r.GET("/auth/clientkeys/:id/", perm, handle(s.getClientKey))
	r.PATCH("/auth/clientkeys/:id/", perm, handle(s.renameClientKey))
	r.DELETE("/auth/clientkeys/:id/", perm, handle(s.deleteClientKey))
}

// keyOwnerScope: superusers see every key, everyone else only their own.
func keyOwnerScope(c *gin.Context) int64 {
	p := auth.Current(c)
	if p.User.IsSuperuser {
		return 0
	}
	return p.User.ID
}

func renderClientKey(c *gin.Context, k *models.ClientKey) clientKeyResponse {
	user := ""
	if k.User != nil {
		user = k.User.Username
	}
	return clientKeyResponse{ID: k.ID, URL: web.AbsURL(c, "/api/auth/clientkeys/"+strconv.FormatInt(k.ID, 10)+"/"),
		Name: k.Name, User: user, Created: k.CreatedAt}
}

func (s *Server) listClientKeys(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.ClientKey) *bun.SelectQuery {
		return models.ClientKeysQuery(s.DB, d, keyOwnerScope(c))
	}, func(k *models.ClientKey) any { return renderClientKey(c, k) })
}

type clientKeyInput struct {
	Name *string `json:"name"`
}

func (in clientKeyInput) validate() error {
	v := web.ValidationError{}
	v.Check(deref(in.Name) != "", "name", "This field is required.")
	v.Check(len(deref(in.Name)) <= 200, "name", "Ensure this field has no more than 200 characters.")
	return v.Err()
}

func (s *Server) createClientKey(c *gin.Context) error {
	var in clientKeyInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	if err := in.validate(); err != nil {
		return err
	}
	if err := withToken(c, "created"); err != nil {
		return err
	}
	p := auth.Current(c)
	k := &models.ClientKey{Name: *in.Name, UserID: p.User.ID, User: p.User}
	key, err := models.CreateClientKey(c.Request.Context(), s.DB, k)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, newClientKeyResponse{renderClientKey(c, k), key})
	return nil
}

// withToken refuses a write of client keys made with a client key: keys
// are created, renamed and revoked with a token (the spec: "Revoke with
// DELETE /auth/clientkeys/{id}/, authenticated with a JWT"), so a leaked
// key cannot revoke its owner's other keys or make more.
func withToken(c *gin.Context, done string) error {
	if auth.Current(c).ClientKey != nil {
		return web.Errorf(http.StatusForbidden, "Client keys can only be %s with a token, not with a client key.", done)
	}
	return nil
}

func (s *Server) clientKeyFromPath(c *gin.Context) (*models.ClientKey, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	return models.GetClientKey(c.Request.Context(), s.DB, id, keyOwnerScope(c))
}

func (s *Server) getClientKey(c *gin.Context) error {
	k, err := s.clientKeyFromPath(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderClientKey(c, k))
	return nil
}

func (s *Server) renameClientKey(c *gin.Context) error {
	var in clientKeyInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	if err := withToken(c, "renamed"); err != nil {
		return err
	}
	k, err := s.clientKeyFromPath(c)
	if err != nil {
		return err
	}
	if in.Name != nil {
		if err := in.validate(); err != nil {
			return err
		}
		k.Name = *in.Name
		if err := models.RenameClientKey(c.Request.Context(), s.DB, k); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, renderClientKey(c, k))
	return nil
}

func (s *Server) deleteClientKey(c *gin.Context) error {
	if err := withToken(c, "revoked"); err != nil {
		return err
	}
	k, err := s.clientKeyFromPath(c)
	if err != nil {
		return err
	}
	if err := models.DeleteClientKey(c.Request.Context(), s.DB, k.ID); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, models.ErrNotFound) }
