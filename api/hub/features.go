package hub

import (
	"net/http"
	"regexp"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

// featureRoutes registers feature flags, file status types, certificate
// lifetimes and tags: small catalogue tables seeded by the hub. The
// certificates themselves are issued by POST /api/pki/site/ (pki.go).
func (s *Server) featureRoutes(r *gin.RouterGroup) {
	fperm := auth.CRUD("feature")
	r.GET("/features/", fperm, handle(s.listFeatures))
	r.GET("/features/:name/", fperm, handle(s.getFeature))
	r.PATCH("/features/:name/", fperm, handle(s.patchFeature))

	tperm := auth.CRUD("filestatustype")
	r.GET("/filestatustypes/", tperm, handle(s.listFileStatusTypes))
	r.GET("/filestatustypes/:key/", tperm, handle(s.getFileStatusType))
	r.PATCH("/filestatustypes/:key/", tperm, handle(s.patchFileStatusType))

	lperm := auth.CRUD("certificatelifetime")
	r.GET("/pki/lifetime/", lperm, handle(s.listCertificateLifetimes))
	r.GET("/pki/lifetime/:id/", lperm, handle(s.getCertificateLifetime))
	r.PATCH("/pki/lifetime/:id/", lperm, handle(s.patchCertificateLifetime))

	r.GET("/tags/", auth.CRUD("tag"), handle(s.listTags))
}

func renderFeature(f *models.Feature) featureResponse {
	return featureResponse{Name: f.Name, Description: f.Description, Enabled: f.Enabled}
}

func (s *Server) listFeatures(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Feature) *bun.SelectQuery { return models.FeaturesQuery(s.DB, d) },
		func(f *models.Feature) any { return renderFeature(f) })
}

func (s *Server) getFeature(c *gin.Context) error {
	f, err := models.GetFeature(c.Request.Context(), s.DB, c.Param("name"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderFeature(f))
	return nil
}

// featurePatchInput is the body of PATCH /api/features/{name}/.
type featurePatchInput struct {
	Enabled *bool `json:"enabled"`
}

// patchFeature changes enabled; name and description are read only.
func (s *Server) patchFeature(c *gin.Context) error {
	var in featurePatchInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	f, err := models.GetFeature(ctx, s.DB, c.Param("name"))
	if err != nil {
		return err
	}
	if in.Enabled != nil {
		if err := s.Changes.SetFeature(ctx, f.Name, *in.Enabled); err != nil {
			return err
		}
		f.Enabled = *in.Enabled
	}
	c.JSON(http.StatusOK, renderFeature(f))
	return nil
}

var hexColorPattern = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

func renderFileStatusType(c *gin.Context, t *models.FileStatusType) fileStatusTypeResponse {
	return fileStatusTypeResponse{Key: t.Key, Label: t.Label, BackgroundColor: t.BackgroundColor, TextColor: t.TextColor,
		URL: web.AbsURL(c, "/api/filestatustypes/"+t.Key+"/")}
}

func (s *Server) listFileStatusTypes(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.FileStatusType) *bun.SelectQuery { return models.FileStatusTypesQuery(s.DB, d) },
		func(t *models.FileStatusType) any { return renderFileStatusType(c, t) })
}

func (s *Server) getFileStatusType(c *gin.Context) error {
	t, err := models.GetFileStatusType(c.Request.Context(), s.DB, c.Param("key"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderFileStatusType(c, t))
	return nil
}

// fileStatusTypePatchInput is the body of PATCH /api/filestatustypes/{key}/.
type fileStatusTypePatchInput struct {
	Label           *string `json:"label"`
	BackgroundColor *string `json:"background_color"`
	TextColor       *string `json:"text_color"`
}

// patchFileStatusType changes the label and colours; key is read only.
// Colours are #rrggbb; text_color may be left out of a PATCH but never
// blanked.
func (s *Server) patchFileStatusType(c *gin.Context) error {
	var in fileStatusTypePatchInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	t, err := models.GetFileStatusType(ctx, s.DB, c.Param("key"))
	if err != nil {
		return err
	}
	v := web.ValidationError{}
	if in.Label != nil {
		v.Check(*in.Label != "", "label", "This field may not be blank.")
		t.Label = *in.Label
	}
	if in.BackgroundColor != nil {
		v.Check(hexColorPattern.MatchString(*in.BackgroundColor), "background_color", "Must be a colour of the form #rrggbb.")
		t.BackgroundColor = *in.BackgroundColor
	}
	if in.TextColor != nil {
		v.Check(hexColorPattern.MatchString(*in.TextColor), "text_color", "Must be a colour of the form #rrggbb.")
		t.TextColor = *in.TextColor
	}
	if err := v.Err(); err != nil {
		return err
	}
	if err := models.UpdateFileStatusType(ctx, s.DB, t); err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderFileStatusType(c, t))
	return nil
}

func renderCertificateLifetime(c *gin.Context, l *models.CertificateLifetime) certificateLifetimeResponse {
	return certificateLifetimeResponse{ID: l.ID, URL: web.AbsURL(c, "/api/pki/lifetime/"+strconv.FormatInt(l.ID, 10)+"/"),
		Name: l.Name, Description: l.Description, Days: l.Days, UpdatedAt: l.UpdatedAt, UpdatedBy: l.UpdatedBy}
}

func (s *Server) listCertificateLifetimes(c *gin.Context) error {
	ls, err := models.CertificateLifetimes(c.Request.Context(), s.DB)
	if err != nil {
		return err
	}
	writeAll(c, ls, renderCertificateLifetime)
	return nil
}

func (s *Server) getCertificateLifetime(c *gin.Context) error {
	return getOne(c, s.DB, models.GetCertificateLifetime, renderCertificateLifetime)
}

// maxCertificateDays bounds lifetimes to 100 years: beyond that a date
// overflows some X.509 encoders and is surely a typo.
const maxCertificateDays = 36500

// certificateLifetimePatchInput is the body of PATCH /api/pki/lifetime/{id}/.
type certificateLifetimePatchInput struct {
	Days *int64 `json:"days"`
}

// patchCertificateLifetime changes days and records who changed it when.
func (s *Server) patchCertificateLifetime(c *gin.Context) error {
	var in certificateLifetimePatchInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	if _, err := models.GetCertificateLifetime(ctx, s.DB, id); err != nil {
		return err
	}
	if in.Days != nil {
		if *in.Days < 1 || *in.Days > maxCertificateDays {
			return web.Invalid("days", "Ensure this value is between 1 and 36500.")
		}
		if err := models.SetCertificateLifetime(ctx, s.DB, id, *in.Days, auth.Current(c).User.ID); err != nil {
			return err
		}
	}
	l, err := models.GetCertificateLifetime(ctx, s.DB, id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderCertificateLifetime(c, l))
	return nil
}

// listTags answers a bare array of {name}; filter keeps the tags whose
// name contains it, ignoring case.
func (s *Server) listTags(c *gin.Context) error {
	ts, err := models.Tags(c.Request.Context(), s.DB, c.Query("filter"))
	if err != nil {
		return err
	}
	out := make([]tagResponse, len(ts))
	for i, t := range ts {
		out[i] = tagResponse{Name: t.Name}
	}
	c.JSON(http.StatusOK, out)
	return nil
}
