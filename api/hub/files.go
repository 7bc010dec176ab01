package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

func (s *Server) fileRoutes(r *gin.RouterGroup) {
	r.GET("/file/", auth.Require("view_file"), handle(s.browse))
	r.GET("/spaces/:id/files/", auth.Require("view_space"), handle(s.spaceFiles))
	r.GET("/analytics/", auth.Require("view_file"), handle(s.analytics))
}

// browseQuery is the query the file browser endpoints share
// (docs/search-analytics.md, "Browsing").
type browseQuery struct {
	path    string
	details bool
	timeout time.Duration
	// types and restricted filter the children on the site, before paging.
	types      []string
	restricted *bool
	// cacheTTL > 0 reuses a listing the hub kept from at most that long ago.
	cacheTTL time.Duration
}

// browseParams reads the query shared by the file browser endpoints. A
// bad value is a 400 naming its parameter.
func browseParams(c *gin.Context, conf models.Configuration) (browseQuery, error) {
	var q browseQuery
	v := web.ValidationError{}
	p := c.DefaultQuery("path", "/")
	if models.SitePathError(p) != "" {
		v["path"] = []string{"Paths are absolute inside the site root, without .."}
	} else {
		q.path = path.Clean(p)
	}
	var err error
	if q.details, err = web.QueryBool(c, "details", false); err != nil {
		v["details"] = []string{"Must be a valid boolean."}
	}
	q.timeout = time.Duration(conf.StatTimeout) * time.Second
	if n, ok, err := web.QueryInt(c, "custom_timeout"); err != nil || (ok && (n <= 0 || n > 3600)) {
		v["custom_timeout"] = []string{"Seconds between 1 and 3600."}
	} else if ok {
		q.timeout = time.Duration(n) * time.Second
	}
	if q.timeout <= 0 {
		q.timeout = 30 * time.Second
	}
	for _, t := range strings.Split(c.Query("type"), ",") {
		switch t = strings.TrimSpace(strings.ToLower(t)); t {
		case "":
		case site.TypeFile, site.TypeDirectory, site.TypeSymlink:
			if !slices.Contains(q.types, t) {
				q.types = append(q.types, t)
			}
		default:
			v["type"] = []string{"Use file, directory or symlink (several separated by commas)."}
		}
	}
	slices.Sort(q.types)
	if _, ok := c.GetQuery("restricted"); ok && c.Query("restricted") != "" {
		b, err := web.QueryBool(c, "restricted", false)
		if err != nil {
			v["restricted"] = []string{"Must be a valid boolean."}
		}
		q.restricted = &b
	}
	// custom_refresh_period is the spaces' name for cache_ttl; cache_ttl
	// wins when both are given.
	for _, name := range []string{"custom_refresh_period", "cache_ttl"} {
		if n, ok, err := web.QueryInt(c, name); err != nil || (ok && (n < 0 || n > 365*24*3600)) {
			v[name] = []string{"Seconds, 0 or more (at most a year)."}
		} else if ok {
			q.cacheTTL = time.Duration(n) * time.Second
		}
	}
	return q, v.Err()
}

// listing is a folder's listing and when the site made it.
type listing struct {
	out       *site.ListDirOutput
	refreshed time.Time
}

// variant names what a listing answers beyond its path, for the kept
// listings: two requests share one only when they ask the same.
func listVariant(in site.ListDirInput) string {
	r := "all"
	if in.Restricted != nil {
		r = fmt.Sprint(*in.Restricted)
	}
	return fmt.Sprintf("offset=%d&limit=%d&details=%t&type=%s&restricted=%s", in.Offset, in.Limit, in.Details,
		strings.Join(in.Types, ","), r)
}

// listDir runs BrowseWorkflow at a site and waits for the listing, or
// answers with a listing kept from at most ttl ago. A path the site
// refuses (outside its root, also through a symlink; reserved; missing)
// is 404; errors never carry Temporal's wording. Every fresh listing is
// kept for later requests with a cache_ttl.
func (s *Server) listDir(ctx context.Context, siteName string, in site.ListDirInput, timeout, ttl time.Duration) (listing, error) {
	variant := listVariant(in)
	if ttl > 0 {
		row, ok, err := models.FreshSiteAnswer(ctx, s.DB, models.AnswerListing, siteName, in.Path, variant, time.Now().Add(-ttl))
		if err != nil {
			return listing{}, err
		}
		var out site.ListDirOutput
		if ok && json.Unmarshal([]byte(row.Body), &out) == nil {
			return listing{out: &out, refreshed: row.ComputedAt}, nil
		}
	}
	var out site.ListDirOutput
	_, err := s.Changes.RunShort(ctx, changes.Short{What: "Site " + siteName,
		ID: "browse-" + models.NewUUID(), Workflow: workflows.BrowseWorkflowName, Timeout: timeout + 10*time.Second,
		Input: workflows.BrowseInput{Site: siteName, Queue: vocab.DefaultQueue, List: in, Timeout: timeout}}, &out)
	if err != nil {
		return listing{}, err
	}
	now := time.Now().UTC().Truncate(time.Microsecond) // as the database keeps it
	if body, err := json.Marshal(&out); err == nil {
		// Keeping it is a convenience: a failure only costs the next
		// request a trip to the site.
		if err := models.PutSiteAnswer(ctx, s.DB, &models.SiteAnswer{Kind: models.AnswerListing, Site: siteName,
			Path: in.Path, Variant: variant, ComputedAt: now, Body: string(body)}); err != nil {
			s.Log.Warn("listing not kept", "site", siteName, "path", in.Path, "error", err)
		}
	}
	return listing{out: &out, refreshed: now}, nil
}

func renderFile(c *gin.Context, siteName string, f site.FileInfo, refreshed time.Time) fileResponse {
	meta := f.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	remote := f.RemoteLocations
	if remote == nil {
		remote = map[string]any{}
	}
	q := "/api/file/?site=" + url.QueryEscape(siteName) + "&path=" + url.QueryEscape(f.Path)
	return fileResponse{Path: f.Path, Name: f.Name, Type: f.Type, Site: siteName, Size: f.Size,
		DataSize: f.DataSize, DiskUsage: f.DiskUsage, PathDepth: f.PathDepth, TotalFiles: f.TotalFiles,
		Atime: f.Atime, Ctime: f.Ctime, Mtime: f.Mtime, TimeRefreshed: refreshed.UTC(), Restricted: f.Restricted,
		Status: f.Status, Error: f.Error, Metadata: meta, RemoteLocations: remote,
		Children: web.AbsURL(c, q), URL: web.AbsURL(c, q)}
}

// browse lists one directory of one site: GET /file/?site=&path=.
func (s *Server) browse(c *gin.Context) error {
	ctx := c.Request.Context()
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return err
	}
	q, err := browseParams(c, conf)
	if err != nil {
		return err
	}
	siteName := c.Query("site")
	if siteName == "" {
		return web.Invalid("site", "This field is required.")
	}
	if _, err := models.GetSiteByName(ctx, s.DB, siteName); isNotFound(err) {
		return web.Invalid("site", fmt.Sprintf("Site %q does not exist.", siteName))
	} else if err != nil {
		return err
	}
	page, size, err := web.PageParams(c)
	if err != nil {
		return err
	}
	l, err := s.listDir(ctx, siteName, site.ListDirInput{Path: q.path, Offset: (page - 1) * size, Limit: size, Details: q.details,
		Types: q.types, Restricted: q.restricted}, q.timeout, q.cacheTTL)
	if err != nil {
		return err
	}
	results := make([]any, len(l.out.Children))
	for i, f := range l.out.Children {
		results[i] = renderFile(c, siteName, f, l.refreshed)
	}
	return web.WritePageWith(c, gin.H{"path": q.path, "entry": renderFile(c, siteName, l.out.Entry, l.refreshed)}, results, l.out.Total, page, size)
}

// spaceFiles lists a directory inside a space on each of its sites (or
// the one named by ?site=); paths are relative to the space's mountpoint.
// With check_available_sites=true a site whose default queue has no
// recent heartbeat is not asked (its entry says so) instead of being
// waited for.
func (s *Server) spaceFiles(c *gin.Context) error {
	ctx := c.Request.Context()
	id, err := web.PathID(c, "id")
	if err != nil {
		return err
	}
	sp, err := models.GetSpace(ctx, s.DB, id, models.SpaceFilter{})
	if err != nil {
		return err
	}
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return err
	}
	q, err := browseParams(c, conf)
	if err != nil {
		return err
	}
	raise, err := web.QueryBool(c, "raise_exception", false)
	if err != nil {
		return err
	}
	check, err := web.QueryBool(c, "check_available_sites", false)
	if err != nil {
		return err
	}
	want := c.Query("site")
	if want != "" {
		if !slices.ContainsFunc(sp.Links, func(l models.SpaceSite) bool { return l.Site != nil && l.Site.Name == want }) {
			if _, err := models.GetSiteByName(ctx, s.DB, want); isNotFound(err) {
				return web.Invalid("site", fmt.Sprintf("Site %q does not exist.", want))
			} else if err != nil {
				return err
			}
			return web.Invalid("site", fmt.Sprintf("The space is not on site %q.", want))
		}
	}
	var live liveness
	if check {
		if live, err = s.newLiveness(ctx); err != nil {
			return err
		}
	}
	var results []any
	for _, link := range sp.Links {
		if link.Site == nil || (want != "" && link.Site.Name != want) {
			continue
		}
		if check {
			up, err := s.defaultQueueOnline(ctx, live, link.Site)
			if err != nil {
				return err
			}
			if !up {
				msg := fmt.Sprintf("Site %s is offline (no heartbeat of its default queue within %d s); not asked.",
					link.Site.Name, conf.NodeHealthLastHeartbeatInterval)
				if raise {
					return web.Errorf(http.StatusGatewayTimeout, "%s", msg)
				}
				results = append(results, fileErrorResponse{Path: q.path, Site: link.Site.Name, Error: msg})
				continue
			}
		}
		l, err := s.listDir(ctx, link.Site.Name, site.ListDirInput{Path: path.Join(sp.Mountpoint, q.path), Details: q.details,
			Types: q.types, Restricted: q.restricted}, q.timeout, q.cacheTTL)
		if err != nil {
			if raise {
				return err
			}
			results = append(results, fileErrorResponse{Path: q.path, Site: link.Site.Name, Error: web.Detail(err)})
			continue
		}
		for _, f := range l.out.Children {
			f.Path = "/" + strings.TrimPrefix(strings.TrimPrefix(f.Path, sp.Mountpoint), "/")
			results = append(results, renderFile(c, link.Site.Name, f, l.refreshed))
		}
	}
	if results == nil {
		results = []any{}
	}
	return web.PaginateSlice(c, results, func(r *any) any { return *r })
}

// defaultQueueOnline tells whether the site's default queue has a recent
// heartbeat (health's judgement).
func (s *Server) defaultQueueOnline(ctx context.Context, live liveness, st *models.Site) (bool, error) {
	queues, err := models.SiteQueues(ctx, s.DB, st.ID)
	if err != nil {
		return false, err
	}
	for _, q := range queues {
		if q.Name == vocab.DefaultQueue && live.online(q.LastHeartbeat) {
			return true, nil
		}
	}
	return false, nil
}
