package hub

import (
	"context"
	"fmt"
	"path"
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
}

// browseParams reads the query shared by the file browser endpoints.
func browseParams(c *gin.Context, conf models.Configuration) (p string, details bool, timeout time.Duration, err error) {
	p = c.DefaultQuery("path", "/")
	if !strings.HasPrefix(p, "/") || changes.ContainsDotDot(p) || strings.ContainsRune(p, 0) {
		return "", false, 0, web.Invalid("path", "Paths are absolute inside the site root, without ..")
	}
	if details, err = web.QueryBool(c, "details", false); err != nil {
		return "", false, 0, err
	}
	timeout = time.Duration(conf.StatTimeout) * time.Second
	if v, ok, err := web.QueryInt(c, "custom_timeout"); err != nil {
		return "", false, 0, err
	} else if ok {
		if v <= 0 || v > 3600 {
			return "", false, 0, web.Invalid("custom_timeout", "Seconds between 1 and 3600.")
		}
		timeout = time.Duration(v) * time.Second
	}
	return path.Clean(p), details, timeout, nil
}

// listDir runs BrowseWorkflow at a site and waits for the listing. A path
// the site refuses (outside its root, also through a symlink; reserved;
// missing) is 404; errors never carry Temporal's wording.
func (s *Server) listDir(ctx context.Context, siteName string, in site.ListDirInput, timeout time.Duration) (*site.ListDirOutput, error) {
	var out site.ListDirOutput
	_, err := s.Changes.RunShort(ctx, changes.Short{What: "Site " + siteName,
		ID: "browse-" + models.NewUUID(), Workflow: workflows.BrowseWorkflowName, Timeout: timeout + 10*time.Second,
		Input: workflows.BrowseInput{Site: siteName, Queue: vocab.DefaultQueue, List: in, Timeout: timeout}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func renderFile(c *gin.Context, siteName string, f site.FileInfo) fileResponse {
	return fileResponse{Path: f.Path, Name: f.Name, Type: f.Type, Site: siteName, Size: f.Size,
		DataSize: f.DataSize, DiskUsage: f.DiskUsage, PathDepth: f.PathDepth, TotalFiles: f.TotalFiles,
		Atime: f.Atime, Ctime: f.Ctime, Mtime: f.Mtime, TimeRefreshed: time.Now().UTC(),
		Status: f.Status, Error: f.Error, Metadata: map[string]any{}, RemoteLocations: f.RemoteLocations,
		Children: web.AbsURL(c, "/api/file/?site="+siteName+"&path="+f.Path),
		URL:      web.AbsURL(c, "/api/file/?site="+siteName+"&path="+f.Path)}
}

// browse lists one directory of one site: GET /file/?site=&path=.
func (s *Server) browse(c *gin.Context) error {
	ctx := c.Request.Context()
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return err
	}
	p, details, timeout, err := browseParams(c, conf)
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
	out, err := s.listDir(ctx, siteName, site.ListDirInput{Path: p, Offset: (page - 1) * size, Limit: size, Details: details}, timeout)
	if err != nil {
		return err
	}
	results := make([]any, len(out.Children))
	for i, f := range out.Children {
		results[i] = renderFile(c, siteName, f)
	}
	return web.WritePageWith(c, gin.H{"path": p, "entry": renderFile(c, siteName, out.Entry)}, results, out.Total, page, size)
}

// spaceFiles lists a directory inside a space on each of its sites (or
// the one named by ?site=); paths are relative to the space's mountpoint.
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
	rel, details, timeout, err := browseParams(c, conf)
	if err != nil {
		return err
	}
	raise, err := web.QueryBool(c, "raise_exception", false)
	if err != nil {
		return err
	}
	want := c.Query("site")
	var results []any
	for _, link := range sp.Links {
		if link.Site == nil || (want != "" && link.Site.Name != want) {
			continue
		}
		out, err := s.listDir(ctx, link.Site.Name, site.ListDirInput{Path: path.Join(sp.Mountpoint, rel), Details: details}, timeout)
		if err != nil {
			if raise {
				return err
			}
			results = append(results, fileErrorResponse{Path: rel, Site: link.Site.Name, Error: web.Detail(err)})
			continue
		}
		for _, f := range out.Children {
			f.Path = "/" + strings.TrimPrefix(strings.TrimPrefix(f.Path, sp.Mountpoint), "/")
			results = append(results, renderFile(c, link.Site.Name, f))
		}
	}
	if results == nil {
		results = []any{}
	}
	return web.PaginateSlice(c, results, func(r *any) any { return *r })
}
