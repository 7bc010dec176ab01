package hub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

func (s *Server) bucketRoutes(r *gin.RouterGroup) {
	b := auth.CRUD("bucket")
	r.GET("/buckets/", b, handle(s.listBuckets))
	r.POST("/buckets/", b, handle(s.saveBucket))
	r.GET("/buckets/:id/", b, handle(s.getBucket))
	r.PATCH("/buckets/:id/", b, handle(s.saveBucket))
	r.DELETE("/buckets/:id/", b, handle(s.deleteBucket))

	t := auth.CRUD("externaltarget")
	r.GET("/external_targets/", t, handle(s.listExternalTargets))
	r.POST("/external_targets/", t, handle(s.saveExternalTarget))
	r.GET("/external_targets/:id/", t, handle(s.getExternalTarget))
	r.PATCH("/external_targets/:id/", t, handle(s.saveExternalTarget))
	r.DELETE("/external_targets/:id/", t, handle(s.deleteExternalTarget))
	r.GET("/external_targets/:id/files/", auth.Require("view_externaltarget"), handle(s.externalTargetFiles))
}

func renderLocation(loc *models.TargetLocation) locationResponse {
	return locationResponse{Endpoint: loc.Endpoint, Port: loc.Port, Scheme: loc.Scheme, Region: loc.Region,
		SSLVerify: loc.SSLVerify, Container: loc.Container, StorageAccount: loc.StorageAccount,
		MigrationTargetFolder: loc.MigrationTargetFolder, AdvancedSettings: nonNilMap(loc.AdvancedSettings)}
}

// renderBucket never includes a secret, not even sealed.
func renderBucket(c *gin.Context, b *models.Bucket) bucketResponse {
	ids := make([]int64, len(b.Targets))
	for i, t := range b.Targets {
		ids[i] = t.ID
	}
	return bucketResponse{ID: b.ID, URL: recordURL(c, "buckets", b.ID), Name: b.Name, Label: b.Label,
		StorageType: b.StorageType, CredentialsFile: b.CredentialsFile, ExternalTargets: ids,
		SoftDeleting: b.SoftDeleting, locationResponse: renderLocation(&b.TargetLocation)}
}

func (s *Server) listBuckets(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Bucket) *bun.SelectQuery { return models.BucketsQuery(s.DB, d) },
		func(b *models.Bucket) any { return renderBucket(c, b) })
}

func (s *Server) getBucket(c *gin.Context) error {
	return getOne(c, s.DB, models.GetBucket, renderBucket)
}

// sealSecrets seals the secrets a bucket or target write carries (those
// sent; "" clears one), for the columns of table.
func (s *Server) sealSecrets(in *changes.SecretsInput, table string) (map[string]string, error) {
	vals := map[string]*string{vocab.SecretAccessKey: in.AccessKey, vocab.SecretAccessKeyID: in.AccessKeyID,
		vocab.SecretSecretAccessKey: in.SecretAccessKey}
	if in.CredentialsJSON.Set {
		js := ""
		if m := in.CredentialsJSON.Value(); m != nil {
			b, err := json.Marshal(*m)
			if err != nil {
				return nil, err
			}
			js = string(b)
		}
		vals[vocab.SecretCredentialsJSON] = &js
	}
	sealed := map[string]string{}
	for f, val := range vals {
		if val == nil {
			continue
		}
		enc, err := s.seal(vocab.SecretColumn(table, f), *val)
		if err != nil {
			return nil, err
		}
		sealed[f] = enc
	}
	return sealed, nil
}

func (s *Server) saveBucket(c *gin.Context) error {
	var in changes.BucketInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	if in.Sealed, err = s.sealSecrets(&in.SecretsInput, "buckets"); err != nil {
		return err
	}
	b, err := s.Changes.SaveBucket(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	create := id == 0
	return saved(c, create, renderBucket(c, b))
}

// deleteBucket flags the bucket soft_deleting and starts
// BucketDeleteWorkflow, which removes its settings from every site where
// it is available and then the record. It answers 202 with the record and
// task_id; deleting a bucket already being deleted answers the same.
func (s *Server) deleteBucket(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	b, err := models.GetBucket(ctx, s.DB, id)
	if err != nil {
		return err
	}
	wid, err := s.Changes.DeleteBucket(ctx, id, b.Name)
	if err != nil {
		return err
	}
	b.SoftDeleting = true
	c.JSON(http.StatusAccepted, deletedBucketResponse{renderBucket(c, b), wid})
	return nil
}

func renderExternalTarget(c *gin.Context, t *models.ExternalTarget) externalTargetResponse {
	sites := make([]int64, len(t.Sites))
	for i, s := range t.Sites {
		sites[i] = s.ID
	}
	var bucket *bucketResponse
	if t.Bucket != nil {
		b := renderBucket(c, t.Bucket)
		bucket = &b
	}
	return externalTargetResponse{ID: t.ID, URL: recordURL(c, "external_targets", t.ID), Name: t.Name,
		StorageType: t.StorageType, LocalFileRegex: t.LocalFileRegex, Enabled: t.Enabled,
		BackupOnly: t.BackupOnly, BackupSite: t.BackupSiteID, AvailableOnSites: sites,
		DeleteOnRecall: t.DeleteOnRecall, Bucket: bucket, locationResponse: renderLocation(&t.TargetLocation)}
}

func (s *Server) listExternalTargets(c *gin.Context) error {
	var bucketID *int64
	if ref := c.Query("bucket"); ref != "" {
		b, err := models.FindBucket(c.Request.Context(), s.DB, ref)
		switch {
		case isNotFound(err):
			none := int64(-1)
			bucketID = &none
		case err != nil:
			return err
		default:
			bucketID = &b.ID
		}
	}
	return web.Paginate(c, func(d *[]models.ExternalTarget) *bun.SelectQuery {
		return models.ExternalTargetsQuery(s.DB, d, bucketID)
	}, func(t *models.ExternalTarget) any { return renderExternalTarget(c, t) })
}

func (s *Server) getExternalTarget(c *gin.Context) error {
	return getOne(c, s.DB, models.GetExternalTarget, renderExternalTarget)
}

func (s *Server) saveExternalTarget(c *gin.Context) error {
	var in changes.ExternalTargetInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	id, err := targetID(c)
	if err != nil {
		return err
	}
	if in.Sealed, err = s.sealSecrets(&in.SecretsInput, "external_targets"); err != nil {
		return err
	}
	t, err := s.Changes.SaveExternalTarget(c.Request.Context(), id, in)
	if err != nil {
		return err
	}
	create := id == 0
	return saved(c, create, renderExternalTarget(c, t))
}

func (s *Server) deleteExternalTarget(c *gin.Context) error {
	return deleteByID(c, s.DB, models.DeleteExternalTarget)
}

// externalTargetFiles lists one page of a target's content. A filesystem
// target is a folder mounted at the sites, so one of the sites it is
// available on lists it; any other target is listed by the hub, which
// keeps the credentials (they never travel to a site or into Temporal
// history for this).
func (s *Server) externalTargetFiles(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	t, err := models.GetExternalTarget(ctx, s.DB, id)
	if err != nil {
		return err
	}
	maxItems, ok, err := web.QueryInt(c, "max_items")
	if err != nil {
		return err
	}
	if !ok {
		maxItems = site.DefaultListItems
	}
	if maxItems < 1 || maxItems > site.MaxListItems {
		return web.Invalid("max_items", fmt.Sprintf("Ensure this value is between 1 and %d.", site.MaxListItems))
	}
	in := workflows.TargetFilesInput{TargetID: t.ID,
		Listing: site.TargetListInput{Path: c.Query("path"), MaxItems: int(maxItems), Marker: c.Query("marker")}}
	if strings.EqualFold(t.StorageType, "filesystem") {
		cfg, err := hubact.TargetDriverConfig(t, nil)
		if err != nil {
			return err
		}
		in.Listing.Config = cfg
		switch {
		case len(t.Sites) > 0:
			in.Site = t.Sites[0].Name
		case t.BackupSiteID != nil:
			bs, err := models.GetSite(ctx, s.DB, *t.BackupSiteID)
			if err != nil {
				return err
			}
			in.Site = bs.Name
		default:
			return web.Errorf(http.StatusConflict, "This filesystem target is not available on any site, so no site can list it.")
		}
	}
	var l site.TargetListing
	done, err := s.Changes.RunShort(ctx, changes.Short{What: "Listing the target",
		ID: fmt.Sprintf("target-files-%d-%s", t.ID, models.NewUUID()), Workflow: workflows.TargetFilesWorkflowName, Input: in,
		Timeout: s.workflowWait() + 30*time.Second, Wait: s.workflowWait()}, &l)
	if err != nil {
		return err
	}
	if !done {
		return web.Errorf(http.StatusGatewayTimeout, "The target did not answer within %s.", s.workflowWait())
	}
	c.JSON(http.StatusOK, renderListing(&l))
	return nil
}

func renderListing(l *site.TargetListing) targetListingResponse {
	entries := func(es []site.TargetEntry) ([]targetEntryResponse, int64) {
		out := make([]targetEntryResponse, len(es))
		var total int64
		for i, e := range es {
			out[i] = targetEntryResponse{Name: e.Name, Path: e.Path, Size: strconv.FormatInt(e.Size, 10), Type: e.Type}
			total += e.Size
		}
		return out, total
	}
	dirs, _ := entries(l.Directories)
	files, bytes := entries(l.Files)
	var next *string
	if l.NextMarker != "" {
		next = &l.NextMarker
	}
	return targetListingResponse{Path: l.Path, Marker: l.Marker, NextMarker: next, Directories: dirs, Files: files,
		Summary: targetListingSummary{Directories: len(dirs), Files: len(files), TotalSize: bytes, Truncated: next != nil}}
}
