package hub

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) pkiRoutes(r *gin.RouterGroup) {
	r.POST("/pki/site/", auth.Require("change_site"), handle(s.issueSiteCertificate))
}

var nodePattern = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// issueSiteCertificate signs a client certificate for a site (CN=<site>) or
// one of its nodes (CN=<node>.<site>) with the hub CA, valid for the
// "site" or "node" certificate lifetime. Send a PEM CSR in "csr" to keep
// the private key at the site; without one the hub generates the key and
// returns it once.
func (s *Server) issueSiteCertificate(c *gin.Context) error {
	var in struct {
		Site *string `json:"site"`
		Node *string `json:"node"`
		CSR  *string `json:"csr"`
	}
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	v := web.ValidationError{}
	v.Check(deref(in.Site) != "", "site", "This field is required.")
	v.Check(in.Node == nil || nodePattern.MatchString(*in.Node), "node", "Must match [a-zA-Z0-9._-]+.")
	if err := v.Err(); err != nil {
		return err
	}
	if _, err := models.GetSiteByName(ctx, s.DB, *in.Site); isNotFound(err) {
		return web.Invalid("site", fmt.Sprintf("Site %q does not exist.", *in.Site))
	} else if err != nil {
		return err
	}
	days := map[string]int64{"ca": 3650, "site": 365, "node": 90}
	lifetimes, err := models.CertificateLifetimes(ctx, s.DB)
	if err != nil {
		return err
	}
	for _, l := range lifetimes {
		days[l.Name] = l.Days
	}
	ca, err := auth.LoadCA(ctx, s.DB, days["ca"])
	if err != nil {
		return err
	}
	cn, kind := *in.Site, "site"
	if in.Node != nil {
		cn, kind = *in.Node+"."+*in.Site, "node"
	}
	cert, err := ca.IssueClient(cn, deref(in.CSR), days[kind])
	if errors.Is(err, auth.ErrBadCSR) {
		return web.Invalid("csr", err.Error())
	} else if err != nil {
		return err
	}
	out := gin.H{"site": *in.Site, "node": in.Node, "common_name": cn, "certificate": cert.CertPEM,
		"ca_certificate": ca.PEM, "expires": cert.Expires, "serial": cert.Serial}
	if cert.KeyPEM != "" {
		out["private_key"] = cert.KeyPEM
	}
	c.JSON(http.StatusCreated, out)
	return nil
}
