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

// siteCertificateInput is the body of POST /api/pki/site/.
type siteCertificateInput struct {
	Site *string `json:"site"`
	Node *string `json:"node"`
	CSR  *string `json:"csr"`
}

// issueSiteCertificate signs a client certificate for a site (CN=<site>) or
// one of its nodes (CN=<node>.<site>) with the hub CA, valid for the
// "site" or "node" certificate lifetime. Send a PEM CSR in "csr" to keep
// the private key at the site; without one the hub generates the key and
// returns it once.
func (s *Server) issueSiteCertificate(c *gin.Context) error {
	var in siteCertificateInput
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
	c.JSON(http.StatusCreated, siteCertificateResponse{Site: *in.Site, Node: in.Node, CommonName: cn, Certificate: cert.CertPEM,
		CACertificate: ca.PEM, Expires: cert.Expires, Serial: cert.Serial, PrivateKey: cert.KeyPEM})
	return nil
}
