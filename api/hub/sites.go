package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

func (s *Server) siteRoutes(r *gin.RouterGroup) {
	perm := auth.CRUD("site")
	r.GET("/sites/", perm, handle(s.listSites))
	r.POST("/sites/", perm, handle(s.saveSite))
	r.GET("/sites/:id/", perm, handle(s.getSite))
	r.PATCH("/sites/:id/", perm, handle(s.saveSite))
	r.DELETE("/sites/:id/", perm, handle(s.deleteSite))
	r.GET("/sites/:id/health/", auth.Require("view_site"), handle(s.getSiteHealth))
	r.POST("/sites/:id/refresh/", auth.Require("change_site"), handle(s.refreshSite))
}

// nullable is a JSON field that tells "absent" (Set false) from null.
type nullable[T any] struct {
	Set, Null bool
	V         T
}

func (n *nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Null = true
		return nil
	}
	return json.Unmarshal(b, &n.V)
}

// value returns the field as a pointer: nil when null or absent.
func (n nullable[T]) value() *T {
	if !n.Set || n.Null {
		return nil
	}
	v := n.V
	return &v
}

// siteNamePattern is the spec's pattern for site (and queue) names.
var siteNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

const (
	msgRequired = "This field is required."
	msgNotNeg   = "Ensure this value is greater than or equal to 0."
)

// recordURL is the absolute URL of a record of a collection.
func recordURL(c *gin.Context, collection string, id int64) string {
	return web.AbsURL(c, "/api/"+collection+"/"+strconv.FormatInt(id, 10)+"/")
}

func checkColor(v web.ValidationError, field string, color []int64) {
	for _, x := range color {
		if x < 0 || x > 255 {
			v.Add(field, "Each value must be between 0 and 255.")
			return
		}
	}
}

func checkURL(v web.ValidationError, field, s string) {
	if s == "" {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.Add(field, "Enter a valid URL.")
	}
}

func checkNotNeg(v web.ValidationError, field string, n *int64) {
	if n != nil && *n < 0 {
		v.Add(field, msgNotNeg)
	}
}

// siteInput is the writable part of a site; nil means "not sent".
type siteInput struct {
	Name                      *string         `json:"name"`
	Label                     *string         `json:"label"`
	Shortcode                 *string         `json:"shortcode"`
	Type                      *string         `json:"type"`
	Timezone                  *string         `json:"timezone"`
	PublicURL                 *string         `json:"public_url"`
	StorageSearchURL          *string         `json:"storage_search_url"`
	SearchengineURL           *string         `json:"searchengine_url"`
	Bandwidth                 *int64          `json:"bandwidth"`
	Color                     *[]int64        `json:"color"`
	AmIConfigured             *bool           `json:"am_i_configured"`
	ReadyToConfigure          *bool           `json:"ready_to_configure"`
	AddonEnabled              *bool           `json:"addon_enabled"`
	DirectoriesCount          *int64          `json:"directories_count"`
	FilesCount                *int64          `json:"files_count"`
	FilesHydratedCount        *int64          `json:"files_hydrated_count"`
	FilesStubbedCount         *int64          `json:"files_stubbed_count"`
	EnableAutoFileBatchSizing *bool           `json:"enable_auto_file_batch_sizing"`
	FileBatchGB               *int64          `json:"file_batch_gb"`
	FileBatchSize             *int64          `json:"file_batch_size"`
	FSIscanBuckets            *int64          `json:"fs_iscan_buckets"`
	FSIscanThreads            *int64          `json:"fs_iscan_threads"`
	LockThreshold             *int64          `json:"lock_threshold"`
	Include                   *map[string]any `json:"include"`
	Exclude                   *map[string]any `json:"exclude"`
	Spaces                    *[]string       `json:"spaces"`
}

// apply validates in and copies it onto site; create demands the name.
func (in *siteInput) apply(ctx context.Context, db bun.IDB, site *models.Site, create bool) error {
	v := web.ValidationError{}
	if in.Name != nil || create {
		name := deref(in.Name)
		if err := checkUniqueName(ctx, db, v, (*models.Site)(nil), name, site.Name, "A site with this name already exists.",
			siteNamePattern, "Enter a valid name: letters, digits, - and _ only."); err != nil {
			return err
		}
		site.Name = name
		if create && in.Label == nil {
			site.Label = name
		}
	}
	if in.Timezone != nil {
		if _, err := time.LoadLocation(*in.Timezone); err != nil || *in.Timezone == "" {
			v.Add("timezone", "Enter a valid IANA time zone name, e.g. Europe/Paris.")
		}
	}
	for field, u := range map[string]*string{"public_url": in.PublicURL, "storage_search_url": in.StorageSearchURL, "searchengine_url": in.SearchengineURL} {
		if u != nil {
			checkURL(v, field, *u)
		}
	}
	for field, n := range map[string]*int64{"bandwidth": in.Bandwidth, "directories_count": in.DirectoriesCount,
		"files_count": in.FilesCount, "files_hydrated_count": in.FilesHydratedCount, "files_stubbed_count": in.FilesStubbedCount,
		"file_batch_gb": in.FileBatchGB, "file_batch_size": in.FileBatchSize, "fs_iscan_buckets": in.FSIscanBuckets,
		"fs_iscan_threads": in.FSIscanThreads, "lock_threshold": in.LockThreshold} {
		checkNotNeg(v, field, n)
	}
	if in.Color != nil {
		checkColor(v, "color", *in.Color)
		site.Color = append([]int64{}, *in.Color...)
	}
	setIf(&site.Label, in.Label)
	setIf(&site.Shortcode, in.Shortcode)
	setIf(&site.Type, in.Type)
	setIf(&site.Timezone, in.Timezone)
	setIf(&site.PublicURL, in.PublicURL)
	setIf(&site.StorageSearchURL, in.StorageSearchURL)
	setIf(&site.SearchengineURL, in.SearchengineURL)
	setIf(&site.Bandwidth, in.Bandwidth)
	setIf(&site.AmIConfigured, in.AmIConfigured)
	setIf(&site.ReadyToConfigure, in.ReadyToConfigure)
	setIf(&site.AddonEnabled, in.AddonEnabled)
	setIf(&site.DirectoriesCount, in.DirectoriesCount)
	setIf(&site.FilesCount, in.FilesCount)
	setIf(&site.FilesHydratedCount, in.FilesHydratedCount)
	setIf(&site.FilesStubbedCount, in.FilesStubbedCount)
	setIf(&site.EnableAutoFileBatchSizing, in.EnableAutoFileBatchSizing)
	setIf(&site.FileBatchGB, in.FileBatchGB)
	setIf(&site.FileBatchSize, in.FileBatchSize)
	setIf(&site.FSIscanBuckets, in.FSIscanBuckets)
	setIf(&site.FSIscanThreads, in.FSIscanThreads)
	setIf(&site.LockThreshold, in.LockThreshold)
	if in.Include != nil {
		site.Include = nonNilMap(*in.Include)
	}
	if in.Exclude != nil {
		site.Exclude = nonNilMap(*in.Exclude)
	}
	return v.Err()
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func renderSite(c *gin.Context, s *models.Site) siteResponse {
	spaces := make([]recordRef, len(s.Spaces))
	for i, sp := range s.Spaces {
		spaces[i] = recordRef{ID: sp.ID, Name: sp.Name, URL: recordURL(c, "spaces", sp.ID)}
	}
	color := s.Color
	if color == nil {
		color = []int64{}
	}
	return siteResponse{
		ID: s.ID, URL: recordURL(c, "sites", s.ID), Name: s.Name, Label: s.Label, Shortcode: s.Shortcode,
		Type: s.Type, Timezone: s.Timezone, PublicURL: s.PublicURL, StorageSearchURL: s.StorageSearchURL,
		SearchengineURL: s.SearchengineURL, Bandwidth: s.Bandwidth, Color: color,
		AmIConfigured: s.AmIConfigured, ReadyToConfigure: s.ReadyToConfigure,
		Editable: auth.Current(c).Can("change_site"), AddonEnabled: s.AddonEnabled,
		DirectoriesCount: s.DirectoriesCount, FilesCount: s.FilesCount,
		FilesHydratedCount: s.FilesHydratedCount, FilesStubbedCount: s.FilesStubbedCount,
		EnableAutoFileBatchSizing: s.EnableAutoFileBatchSizing, FileBatchGB: s.FileBatchGB,
		FileBatchSize: s.FileBatchSize, FSIscanBuckets: s.FSIscanBuckets, FSIscanThreads: s.FSIscanThreads,
		LockThreshold: s.LockThreshold, Include: nonNilMap(s.Include), Exclude: nonNilMap(s.Exclude),
		Spaces: spaces,
	}
}

func (s *Server) listSites(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.Site) *bun.SelectQuery { return models.SitesWithSpacesQuery(s.DB, d) },
		func(site *models.Site) any { return renderSite(c, site) })
}

// loadSite reads the {id} path parameter and loads that site.
func (s *Server) loadSite(c *gin.Context, db bun.IDB) (*models.Site, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	return models.GetSite(c.Request.Context(), db, id)
}

func (s *Server) getSite(c *gin.Context) error {
	site, err := s.loadSite(c, s.DB)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderSite(c, site))
	return nil
}

// saveSite creates (POST) or updates (PATCH) a site. spaces, when sent,
// replaces the site's spaces by name: the directories of spaces added are
// created on the site, those of spaces removed are removed if empty.
func (s *Server) saveSite(c *gin.Context) error {
	var in siteInput
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	ctx := c.Request.Context()
	create := c.Request.Method == http.MethodPost
	var site *models.Site
	err := s.Changes.Commit(ctx, func(ctx context.Context, tx *changes.Tx) error {
		site = models.NewSite("")
		if !create {
			var err error
			if site, err = s.loadSite(c, tx); err != nil {
				return err
			}
		}
		if err := in.apply(ctx, tx, site, create); err != nil {
			return err
		}
		var err error
		if create {
			err = models.CreateSite(ctx, tx, site)
		} else {
			err = models.UpdateSite(ctx, tx, site)
		}
		if err != nil {
			return err
		}
		if in.Spaces == nil {
			site, err = models.GetSite(ctx, tx, site.ID)
			return err
		}
		added, removed, err := models.SetSiteSpaces(ctx, tx, site, *in.Spaces)
		if isNotFound(err) {
			return web.Invalid("spaces", fmt.Sprintf("Object does not exist: %s.", err.Error()))
		} else if err != nil {
			return err
		}
		if site, err = models.GetSite(ctx, tx, site.ID); err != nil {
			return err
		}
		for _, sp := range added {
			ops, err := siteJoinsSpace(ctx, tx, &sp, site.Name)
			if err == nil {
				err = oweSpaceOps(ctx, tx, sp.ID, ops)
			}
			if err != nil {
				return err
			}
		}
		for _, sp := range removed {
			ops, err := siteLeavesSpace(ctx, tx, &sp, site.Name)
			if err == nil {
				err = oweSpaceOps(ctx, tx, sp.ID, ops)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return saved(c, create, renderSite(c, site))
}

func (s *Server) deleteSite(c *gin.Context) error {
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	err = models.DeleteSite(c.Request.Context(), s.DB, id)
	if errors.Is(err, models.ErrInUse) {
		return web.Errorf(http.StatusConflict, "This site cannot be deleted while it holds spaces (%s): remove the site from those spaces first.",
			inUseDetail(err))
	}
	if err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// getSiteHealth answers a subset of the site record with the liveness of
// its nodes and queues, as in the site's entry of /api/health/.
func (s *Server) getSiteHealth(c *gin.Context) error {
	site, err := s.loadSite(c, s.DB)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	live, err := s.newLiveness(ctx)
	if err != nil {
		return err
	}
	st, err := s.siteStatus(ctx, live, site)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, siteHealthResponse{ID: site.ID, URL: recordURL(c, "sites", site.ID), Name: site.Name,
		Label: site.Label, RefreshedAt: site.RefreshedAt, siteHealthStatus: st})
	return nil
}

func (s *Server) workflowWait() time.Duration {
	if s.WorkflowWait > 0 {
		return s.WorkflowWait
	}
	return 30 * time.Second
}

// refreshSite runs SiteRefreshWorkflow (joining one already running for the
// site) and answers the refreshed site; when the site has not answered
// within the wait, 202 with the workflow id as task_id.
func (s *Server) refreshSite(c *gin.Context) error {
	site, err := s.loadSite(c, s.DB)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	done, err := s.Changes.RunShort(ctx, changes.Short{What: "Site refresh", ID: workflows.SiteRefreshWorkflowID(site.Name),
		Workflow: workflows.SiteRefreshWorkflowName, Join: true, Wait: s.workflowWait(),
		Input: workflows.SiteRefreshInput{SiteID: site.ID, Site: site.Name, Queue: vocab.DefaultQueue}}, nil)
	if err != nil {
		return err
	}
	if !done {
		c.JSON(http.StatusAccepted, taskRef{TaskID: workflows.SiteRefreshWorkflowID(site.Name)})
		return nil
	}
	if site, err = models.GetSite(ctx, s.DB, site.ID); err != nil {
		return err
	}
	c.JSON(http.StatusOK, renderSite(c, site))
	return nil
}

// inUseDetail is the detail of a models.ErrInUse error, without the prefix.
func inUseDetail(err error) string {
	msg := err.Error()
	if p := models.ErrInUse.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}
