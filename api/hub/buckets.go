package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
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

// bucketNamePattern keeps bucket names usable as file names at the sites
// (<config>/targets/<name>.json) and as S3 bucket names.
var bucketNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// locationInput are the connection fields buckets and targets share.
type locationInput struct {
	Endpoint              *string         `json:"endpoint"`
	Port                  nullable[int64] `json:"port"`
	Scheme                *string         `json:"scheme"`
	Region                *string         `json:"region"`
	SSLVerify             *bool           `json:"ssl_verify"`
	Container             *string         `json:"container"`
	StorageAccount        *string         `json:"storage_account"`
	MigrationTargetFolder *string         `json:"migration_target_folder"`
	AdvancedSettings      *map[string]any `json:"advanced_settings"`
}

func (in *locationInput) apply(v web.ValidationError, loc *models.TargetLocation) {
	setIf(&loc.Endpoint, in.Endpoint)
	if in.Port.Set {
		loc.Port = in.Port.Value()
		if p := loc.Port; p != nil && (*p < 1 || *p > 65535) {
			v.Add("port", "Enter a port between 1 and 65535.")
		}
	}
	if in.Scheme != nil {
		if sc := strings.ToLower(*in.Scheme); sc != "" && sc != "http" && sc != "https" {
			v.Add("scheme", "Must be http or https.")
		}
		loc.Scheme = strings.ToLower(*in.Scheme)
	}
	setIf(&loc.Region, in.Region)
	setIf(&loc.SSLVerify, in.SSLVerify)
	setIf(&loc.Container, in.Container)
	setIf(&loc.StorageAccount, in.StorageAccount)
	setIf(&loc.MigrationTargetFolder, in.MigrationTargetFolder)
	if in.AdvancedSettings != nil {
		loc.AdvancedSettings = nonNilMap(*in.AdvancedSettings)
	}
}

// secretsInput are the secret inputs: accepted, sealed, never returned. A
// secret sent as "" (or credentials_json as null) clears it; one not sent
// is kept.
type secretsInput struct {
	AccessKey       *string                  `json:"access_key"`
	AccessKeyID     *string                  `json:"access_key_id"`
	SecretAccessKey *string                  `json:"secret_access_key"`
	CredentialsJSON nullable[map[string]any] `json:"credentials_json"`
}

func (s *Server) applySecrets(in *secretsInput, table string, sec *models.TargetSecrets) error {
	vals := map[string]*string{vocab.SecretAccessKey: in.AccessKey, vocab.SecretAccessKeyID: in.AccessKeyID,
		vocab.SecretSecretAccessKey: in.SecretAccessKey}
	if in.CredentialsJSON.Set {
		js := ""
		if m := in.CredentialsJSON.Value(); m != nil {
			b, err := json.Marshal(*m)
			if err != nil {
				return err
			}
			js = string(b)
		}
		vals[vocab.SecretCredentialsJSON] = &js
	}
	for _, f := range models.SecretFields {
		val := vals[f]
		if val == nil {
			continue
		}
		sealed, err := s.seal(vocab.SecretColumn(table, f), *val)
		if err != nil {
			return err
		}
		*sec.Field(f) = sealed
	}
	return nil
}

// bucketInput is the writable part of a bucket: its own fields, and the
// location and secret fields it shares with external targets.
type bucketInput struct {
	Name            *string `json:"name"`
	Label           *string `json:"label"`
	StorageType     *string `json:"storage_type"`
	CredentialsFile *string `json:"credentials_file"`
	locationInput
	secretsInput
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

var errBucketDeleting = web.Errorf(http.StatusConflict, "This bucket is being deleted and cannot be changed.")

func (s *Server) saveBucket(c *gin.Context) error {
	var in bucketInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var b *models.Bucket
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		b = &models.Bucket{TargetLocation: models.TargetLocation{SSLVerify: true, AdvancedSettings: map[string]any{}}}
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
			if b, err = models.GetBucket(ctx, tx, id); err != nil {
				return err
			}
			if b.SoftDeleting {
				return errBucketDeleting
			}
		}
		v := web.ValidationError{}
		if in.Name != nil || create {
			if err := checkUniqueName(ctx, tx, v, (*models.Bucket)(nil), deref(in.Name), b.Name, "A bucket with this name already exists.",
				bucketNamePattern, "Enter a valid name: letters, digits, '.', '-' and '_', starting with a letter or digit."); err != nil {
				return err
			}
			b.Name = deref(in.Name)
		}
		if in.StorageType != nil || create {
			if strings.TrimSpace(deref(in.StorageType)) == "" {
				v.Add("storage_type", msgRequired)
			}
			b.StorageType = deref(in.StorageType)
		}
		setIf(&b.Label, in.Label)
		setIf(&b.CredentialsFile, in.CredentialsFile)
		in.locationInput.apply(v, &b.TargetLocation)
		if err := v.Err(); err != nil {
			return err
		}
		if err := s.applySecrets(&in.secretsInput, "buckets", &b.TargetSecrets); err != nil {
			return err
		}
		if err := models.SaveBucket(ctx, tx, b); errors.Is(err, models.ErrSoftDeleting) {
			return errBucketDeleting
		} else if err != nil {
			return err
		}
		var err error
		b, err = models.GetBucket(ctx, tx, b.ID)
		return err
	})
	if err != nil {
		return err
	}
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

type externalTargetInput struct {
	Name             *string                   `json:"name"`
	StorageType      *string                   `json:"storage_type"`
	LocalFileRegex   *string                   `json:"local_file_regex"`
	Enabled          *bool                     `json:"enabled"`
	BackupOnly       *bool                     `json:"backup_only"`
	BackupSite       nullable[int64]           `json:"backup_site"`
	AvailableOnSites *[]int64                  `json:"available_on_sites"`
	DeleteOnRecall   *bool                     `json:"delete_on_recall"`
	Bucket           nullable[json.RawMessage] `json:"bucket"`
	locationInput
	secretsInput
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

// bucketRef resolves the bucket input: an id (number or numeric string) or
// a name; null detaches the target from its bucket.
func bucketRef(ctx context.Context, db bun.IDB, v web.ValidationError, raw json.RawMessage) (*int64, error) {
	var ref string
	var num json.Number
	if err := json.Unmarshal(raw, &ref); err != nil {
		if err := json.Unmarshal(raw, &num); err != nil {
			v.Add("bucket", "Expected a bucket id or name.")
			return nil, nil
		}
		ref = num.String()
	}
	b, err := models.FindBucket(ctx, db, ref)
	if isNotFound(err) {
		v.Add("bucket", "Bucket \""+ref+"\" does not exist.")
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if b.SoftDeleting {
		v.Add("bucket", "Bucket \""+b.Name+"\" is being deleted.")
	}
	return &b.ID, nil
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

func checkSiteID(ctx context.Context, db bun.IDB, v web.ValidationError, field string, id int64) error {
	n, err := db.NewSelect().Model((*models.Site)(nil)).Where("id = ?", id).Count(ctx)
	if err != nil {
		return err
	}
	v.Check(n > 0, field, "Invalid pk \""+strconv.FormatInt(id, 10)+"\" - object does not exist.")
	return nil
}

func (s *Server) saveExternalTarget(c *gin.Context) error {
	var in externalTargetInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var t *models.ExternalTarget
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		t = &models.ExternalTarget{Enabled: true, TargetLocation: models.TargetLocation{SSLVerify: true, AdvancedSettings: map[string]any{}}}
		if !create {
			id, err := web.PathID(c, "id")
			if err != nil {
				return err
			}
			if t, err = models.GetExternalTarget(ctx, tx, id); err != nil {
				return err
			}
		}
		v := web.ValidationError{}
		if in.Name != nil || create {
			if err := checkUniqueName(ctx, tx, v, (*models.ExternalTarget)(nil), deref(in.Name), t.Name, "An external target with this name already exists.", nil, ""); err != nil {
				return err
			}
			t.Name = deref(in.Name)
		}
		if in.StorageType != nil || create {
			if strings.TrimSpace(deref(in.StorageType)) == "" {
				v.Add("storage_type", msgRequired)
			}
			t.StorageType = deref(in.StorageType)
		}
		if in.LocalFileRegex != nil || create {
			re := deref(in.LocalFileRegex)
			if re == "" {
				v.Add("local_file_regex", msgRequired)
			} else if _, err := regexp.Compile(re); err != nil {
				v.Add("local_file_regex", "Enter a valid regular expression: "+strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			}
			t.LocalFileRegex = re
		}
		setIf(&t.Enabled, in.Enabled)
		setIf(&t.BackupOnly, in.BackupOnly)
		setIf(&t.DeleteOnRecall, in.DeleteOnRecall)
		if in.BackupSite.Set {
			t.BackupSiteID = in.BackupSite.Value()
			if t.BackupSiteID != nil {
				if err := checkSiteID(ctx, tx, v, "backup_site", *t.BackupSiteID); err != nil {
					return err
				}
			}
		}
		var siteIDs []int64
		if in.AvailableOnSites != nil {
			siteIDs = append([]int64{}, *in.AvailableOnSites...)
			for _, id := range siteIDs {
				if err := checkSiteID(ctx, tx, v, "available_on_sites", id); err != nil {
					return err
				}
			}
		}
		if in.Bucket.Set {
			t.BucketID = nil
			if raw := in.Bucket.Value(); raw != nil {
				id, err := bucketRef(ctx, tx, v, *raw)
				if err != nil {
					return err
				}
				t.BucketID = id
			}
		}
		in.locationInput.apply(v, &t.TargetLocation)
		if err := v.Err(); err != nil {
			return err
		}
		if err := s.applySecrets(&in.secretsInput, "external_targets", &t.TargetSecrets); err != nil {
			return err
		}
		t.Bucket, t.Sites = nil, nil
		if err := models.SaveExternalTarget(ctx, tx, t, siteIDs); err != nil {
			return err
		}
		var err error
		t, err = models.GetExternalTarget(ctx, tx, t.ID)
		return err
	})
	if err != nil {
		return err
	}
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
