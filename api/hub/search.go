package hub

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/auth"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
)

func (s *Server) searchRoutes(r *gin.RouterGroup) {
	r.POST("/search/", auth.Require("add_search"), handle(s.createSearch))
	r.PATCH("/search/metadata/", auth.Require("change_search"), handle(s.setMetadata))
	r.GET("/search/metadata_fields/", auth.Require("view_search"), handle(s.listMetadataFields))
	r.GET("/search/:id/", auth.Require("view_search"), handle(s.getSearch))
	r.DELETE("/search/:id/", auth.Require("delete_search"), handle(s.deleteSearch))
}

// searchSiteResponse is where one site stands in a search.
type searchSiteResponse struct {
	Site    string `json:"site"`
	Status  string `json:"status"` // pending, answered, failed, timed_out, stopped
	Error   string `json:"error"`
	Results int64  `json:"results"`
	// IndexScanned is when the site's file index was last scanned in
	// full: the answer is as fresh as that, plus the jobs since.
	IndexScanned *time.Time `json:"index_scanned"`
}

// searchResponse is a search and how far it has come.
type searchResponse struct {
	ID             int64                `json:"id"`
	URL            string               `json:"url"`
	Path           string               `json:"path"`
	Recursive      bool                 `json:"recursive"`
	Filters        map[string]any       `json:"filters"`
	MetadataFields []string             `json:"metadata_fields"`
	MaxResults     int64                `json:"max_results"`
	State          string               `json:"state"` // running, finished
	Complete       bool                 `json:"complete"`
	Total          int64                `json:"total"`
	Truncated      bool                 `json:"truncated"`
	CreatedAt      time.Time            `json:"created_at"`
	FinishedAt     *time.Time           `json:"finished_at"`
	Sites          []searchSiteResponse `json:"sites"`
	Results        string               `json:"results"`
}

// searchPage is what GET /search/{id}/ adds beside the page of results.
type searchPage struct {
	Search searchResponse `json:"search"`
}

// searchResultResponse is one entry found.
type searchResultResponse struct {
	Site     string         `json:"site"`
	Path     string         `json:"path"`
	Name     string         `json:"name"`
	Type     string         `json:"type"`
	Size     int64          `json:"size"`
	Mtime    time.Time      `json:"mtime"`
	Atime    time.Time      `json:"atime"`
	Ctime    time.Time      `json:"ctime"`
	Status   string         `json:"status"` // migration state
	Metadata map[string]any `json:"metadata"`
}

// searchNameResponse is one name of the results (group_by_name=true).
type searchNameResponse struct {
	Name  string    `json:"name"`
	Sites []string  `json:"sites"`
	Count int64     `json:"count"`
	Size  int64     `json:"size"`
	Mtime time.Time `json:"mtime"`
}

// metadataResponse is the answer of PATCH /search/metadata/.
type metadataResponse struct {
	Site    string                `json:"site"`
	Results []site.MetadataResult `json:"results"`
}

type metadataFieldResponse struct {
	Name string `json:"name"`
}

func renderSearch(c *gin.Context, sr *models.Search) searchResponse {
	r := searchResponse{ID: sr.ID, URL: recordURL(c, "search", sr.ID), Path: sr.Path, Recursive: sr.Recursive,
		Filters: nonNilMap(sr.Filters), MetadataFields: sr.MetadataFields, MaxResults: sr.MaxResults, State: sr.State,
		Complete: sr.State == models.SearchFinished, Total: sr.Total, Truncated: sr.Truncated,
		CreatedAt: sr.CreatedAt, FinishedAt: sr.FinishedAt, Sites: []searchSiteResponse{},
		Results: web.AbsURL(c, fmt.Sprintf("/api/search/%d/", sr.ID))}
	if r.MetadataFields == nil {
		r.MetadataFields = []string{}
	}
	for _, ss := range sr.Sites {
		r.Sites = append(r.Sites, searchSiteResponse{Site: ss.Site, Status: ss.Status, Error: ss.Error,
			Results: ss.Results, IndexScanned: ss.IndexScanned})
	}
	return r
}

func (s *Server) createSearch(c *gin.Context) error {
	var in changes.SearchRequest
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	p := auth.Current(c)
	sr, err := s.Changes.CreateSearch(c.Request.Context(), in, &p.User.ID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, renderSearch(c, sr))
	return nil
}

// ownSearch loads search id for the caller: another user's search is not
// found, unless the caller is a superuser.
func (s *Server) ownSearch(c *gin.Context) (*models.Search, error) {
	id, err := web.PathID(c, "id")
	if err != nil {
		return nil, err
	}
	sr, err := models.GetSearch(c.Request.Context(), s.DB, id)
	if err != nil {
		return nil, err
	}
	p := auth.Current(c)
	if !p.User.IsSuperuser && (sr.OwnerID == nil || *sr.OwnerID != p.User.ID) {
		return nil, models.ErrNotFound
	}
	return sr, nil
}

// getSearch pages a search's results so far: GET /search/{id}/?sort=
// site,-size&group_by_name=true.
func (s *Server) getSearch(c *gin.Context) error {
	sr, err := s.ownSearch(c)
	if err != nil {
		return err
	}
	grouped, err := web.QueryBool(c, "group_by_name", false)
	if err != nil {
		return err
	}
	extra := map[string]any{"search": renderSearch(c, sr)}
	sort := c.Query("sort")
	if !grouped {
		if _, err := models.SearchResultsQuery(s.DB, new([]models.SearchResult), sr.ID, sort); err != nil {
			return web.Invalid("sort", fmt.Sprintf("%v; use %v, - for descending.", err, models.SearchSortFields(false)))
		}
		return web.PaginateWith(c, extra, func(dest *[]models.SearchResult) *bun.SelectQuery {
			q, _ := models.SearchResultsQuery(s.DB, dest, sr.ID, sort)
			return q
		},
			func(r *models.SearchResult) any {
				return searchResultResponse{Site: r.Site, Path: r.Path, Name: r.Name, Type: r.Type, Size: r.Size,
					Mtime: r.Mtime.UTC(), Atime: r.Atime.UTC(), Ctime: r.Ctime.UTC(), Status: r.State, Metadata: nonNilMap(r.Metadata)}
			})
	}
	var names []models.SearchName
	q, err := models.SearchNamesQuery(s.DB, &names, sr.ID, sort)
	if err != nil {
		return web.Invalid("sort", fmt.Sprintf("%v; with group_by_name use %v, - for descending.", err, models.SearchSortFields(true)))
	}
	page, size, err := web.PageParams(c)
	if err != nil {
		return err
	}
	count, err := q.Count(c.Request.Context())
	if err != nil {
		return err
	}
	if size > 0 {
		q = q.Limit(int64(size)).Offset(int64((page - 1) * size))
	}
	if err := q.Scan(c.Request.Context(), &names); err != nil {
		return err
	}
	list := make([]string, len(names))
	for i, n := range names {
		list[i] = n.Name
	}
	sites, err := models.SearchNameSites(c.Request.Context(), s.DB, sr.ID, list)
	if err != nil {
		return err
	}
	results := make([]any, len(names))
	for i, n := range names {
		results[i] = searchNameResponse{Name: n.Name, Sites: sites[n.Name], Count: n.Count, Size: n.Size, Mtime: n.Mtime.UTC()}
	}
	return web.WritePageWith(c, extra, results, int(count), page, size)
}

// deleteSearch stops a search and removes it with its results.
func (s *Server) deleteSearch(c *gin.Context) error {
	sr, err := s.ownSearch(c)
	if err != nil {
		return err
	}
	if err := s.Changes.DeleteSearch(c.Request.Context(), sr.ID); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// setMetadata sets user metadata and tags on files of a site.
func (s *Server) setMetadata(c *gin.Context) error {
	var in changes.MetadataRequest
	if err := web.Bind(c, &in); err != nil {
		return err
	}
	out, err := s.Changes.SetMetadata(c.Request.Context(), in)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, metadataResponse{Site: in.Site, Results: out.Results})
	return nil
}

// listMetadataFields pages the metadata field names files carry.
func (s *Server) listMetadataFields(c *gin.Context) error {
	return web.Paginate(c, func(d *[]models.MetadataField) *bun.SelectQuery { return models.MetadataFieldsQuery(s.DB, d) },
		func(f *models.MetadataField) any { return metadataFieldResponse{Name: f.Name} })
}
