package hub

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/thehub/hub/activities/changes"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/api/web"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// analyticsBucket is the files and bytes of one band of a breakdown.
type analyticsBucket struct {
	Key   string `json:"key"`
	Files int64  `json:"files"`
	Bytes int64  `json:"bytes"`
}

// analyticsChildResponse is a direct child of the folder and what it holds.
type analyticsChildResponse struct {
	Name        string    `json:"name"`
	Path        string    `json:"path"`
	Type        string    `json:"type" enum:"file_type"`
	Files       int64     `json:"files"`
	Directories int64     `json:"directories"`
	Bytes       int64     `json:"bytes"`
	Mtime       time.Time `json:"mtime" doc:"The newest mtime of the files below (a file's own)."`
	Analytics   string    `json:"analytics" doc:"The analytics of this child."`
}

// analyticsPage is what GET /api/analytics/ adds to the page envelope,
// whose results are the largest children (with children=true).
type analyticsPage struct {
	Site     string     `json:"site"`
	Path     string     `json:"path"`
	Complete bool       `json:"complete" doc:"False when the walk stopped at the timeout (the counts cover part of the tree) or the site did not answer."`
	Cached   bool       `json:"cached" doc:"The answer is one kept from an earlier request (cache_ttl, or the last answer when the site did not answer)."`
	Computed *time.Time `json:"computed" doc:"When the site counted; null when it did not answer and no earlier answer is kept."`
	Elapsed  float64    `json:"elapsed" doc:"Seconds the site spent walking."`
	Error    string     `json:"error" doc:"Why the answer is partial or old; empty otherwise."`

	Files       int64 `json:"files"`
	Directories int64 `json:"directories"`
	Symlinks    int64 `json:"symlinks"`
	Bytes       int64 `json:"bytes" doc:"Logical bytes of the files (a migrated file counts its original size)."`

	ByState []analyticsBucket `json:"by_state" doc:"resident, premigrated, migrated."`
	ByAtime []analyticsBucket `json:"by_atime" doc:"Age bands of the last access: <1d, 1d-7d, 7d-30d, 30d-90d, 90d-1y, 1y-3y, >3y."`
	ByMtime []analyticsBucket `json:"by_mtime" doc:"Age bands of the last modification, as by_atime."`
	BySize  []analyticsBucket `json:"by_size" doc:"Size bands: 0, <4KiB, 4KiB-1MiB, 1MiB-100MiB, 100MiB-1GiB, 1GiB-10GiB, >=10GiB."`
	ByType  []analyticsBucket `json:"by_type" doc:"File extensions, lower case, by bytes; (none) without one, (other) past the 50 largest."`

	ChildrenTotal int `json:"children_total" doc:"Direct children of the folder; results hold the largest (at most 1,000)."`
}

// analyticsQuery is GET /api/analytics/ parsed.
type analyticsQuery struct {
	site, path        string
	children, raise   bool
	csv               bool
	cacheTTL, timeout time.Duration
	hasTTL            bool
}

func (s *Server) analyticsParams(c *gin.Context) (analyticsQuery, error) {
	ctx := c.Request.Context()
	q := analyticsQuery{site: c.Query("site"), path: c.DefaultQuery("path", "/")}
	v := web.ValidationError{}
	if q.site == "" {
		v["site"] = []string{"This field is required."}
	} else if _, err := models.GetSiteByName(ctx, s.DB, q.site); isNotFound(err) {
		v["site"] = []string{fmt.Sprintf("Site %q does not exist.", q.site)}
	} else if err != nil {
		return q, err
	}
	p, err := cleanAPIPath(q.path)
	if err != nil {
		v["path"] = []string{err.Error()}
	}
	q.path = p
	for _, b := range []struct {
		name string
		to   *bool
	}{{"children", &q.children}, {"raise_exception", &q.raise}} {
		if val, err := web.QueryBool(c, b.name, false); err != nil {
			v[b.name] = []string{"Must be a valid boolean."}
		} else {
			*b.to = val
		}
	}
	switch d := c.Query("download"); strings.ToLower(d) {
	case "":
	case "csv":
		q.csv = true
	default:
		v["download"] = []string{"Use csv (or leave it out for JSON)."}
	}
	if n, ok, err := web.QueryInt(c, "cache_ttl"); err != nil || (ok && (n < 0 || n > 365*24*3600)) {
		v["cache_ttl"] = []string{"Seconds, 0 or more (at most a year)."}
	} else {
		q.cacheTTL, q.hasTTL = time.Duration(n)*time.Second, ok && n > 0
	}
	conf, err := models.GetConfiguration(ctx, s.DB)
	if err != nil {
		return q, err
	}
	q.timeout = time.Duration(conf.AnalyticsTimeout) * time.Second
	if n, ok, err := web.QueryInt(c, "custom_timeout"); err != nil || (ok && (n <= 0 || n > 3600)) {
		v["custom_timeout"] = []string{"Seconds between 1 and 3600."}
	} else if ok {
		q.timeout = time.Duration(n) * time.Second
	}
	if q.timeout <= 0 {
		q.timeout = 30 * time.Second
	}
	if _, _, err := web.PageParams(c); err != nil {
		return q, err
	}
	return q, v.Err()
}

// cleanAPIPath checks a path of a site as the API takes it (absolute,
// without "..") and cleans it.
func cleanAPIPath(p string) (string, error) {
	if models.SitePathError(p) != "" {
		return "", fmt.Errorf("Paths are absolute inside the site root, without ..")
	}
	return path.Clean(p), nil
}

// analyticsAnswer is an answer and where it came from.
type analyticsAnswer struct {
	out    *site.AnalyticsOutput
	cached bool
	err    string
}

// analytics answers GET /api/analytics/?site=&path=: what fills a folder
// of a site, computed by the site (AnalyticsWorkflow), or an answer kept
// from at most cache_ttl seconds ago.
func (s *Server) analytics(c *gin.Context) error {
	q, err := s.analyticsParams(c)
	if err != nil {
		return err
	}
	a, err := s.analyticsAnswer(c.Request.Context(), q)
	if err != nil {
		return err
	}
	if q.csv {
		return writeAnalyticsCSV(c, q, a)
	}
	page := analyticsPageOf(q, a)
	var extra map[string]any
	b, _ := json.Marshal(page)
	_ = json.Unmarshal(b, &extra)
	var children []site.AnalyticsChild
	if q.children && a.out != nil {
		children = a.out.Children
	}
	pg, size, err := web.PageParams(c)
	if err != nil {
		return err
	}
	lo, hi := 0, len(children)
	if size > 0 {
		lo = min((pg-1)*size, len(children))
		hi = min(lo+size, len(children))
	}
	results := make([]any, 0, hi-lo)
	for _, ch := range children[lo:hi] {
		results = append(results, analyticsChildResponse{Name: ch.Name, Path: ch.Path, Type: ch.Type, Files: ch.Files,
			Directories: ch.Directories, Bytes: ch.Bytes, Mtime: ch.Mtime,
			Analytics: web.AbsURL(c, "/api/analytics/?site="+url.QueryEscape(q.site)+"&path="+url.QueryEscape(ch.Path))})
	}
	return web.WritePageWith(c, extra, results, len(children), pg, size)
}

// analyticsAnswer finds a kept answer young enough, else asks the site.
// A site that does not answer in time, or whose walk stopped at the
// timeout, is an error with raise_exception and a partial answer without
// (the last kept answer, of any age, when there is one).
func (s *Server) analyticsAnswer(ctx context.Context, q analyticsQuery) (analyticsAnswer, error) {
	if q.hasTTL {
		if a, ok, err := s.keptAnalytics(ctx, q, time.Now().Add(-q.cacheTTL)); err != nil || ok {
			return a, err
		}
	}
	what := "Site " + q.site
	var res workflows.AnalyticsResult
	done, err := s.Changes.RunShort(ctx, changes.Short{What: what, ID: workflows.AnalyticsWorkflowID(q.site, q.path),
		Workflow: workflows.AnalyticsWorkflowName, Timeout: q.timeout + 30*time.Second, Wait: q.timeout + 5*time.Second, Join: true,
		Input: workflows.AnalyticsInput{Site: q.site, Queue: vocab.DefaultQueue, Path: q.path, Timeout: q.timeout}}, &res)
	if err != nil {
		return analyticsAnswer{}, err
	}
	secs := int(q.timeout / time.Second)
	switch {
	case done && res.Answer != nil && res.Answer.Complete:
		return analyticsAnswer{out: res.Answer}, nil
	case done && res.Answer != nil:
		msg := fmt.Sprintf("%s walked for the %d s allowed: the counts cover part of the tree.", what, secs)
		if q.raise {
			return analyticsAnswer{}, web.Errorf(http.StatusGatewayTimeout, "%s", msg)
		}
		return analyticsAnswer{out: res.Answer, err: msg}, nil
	}
	msg := fmt.Sprintf("%s did not answer within %d s.", what, secs)
	if q.raise {
		return analyticsAnswer{}, web.Errorf(http.StatusGatewayTimeout, "%s", msg)
	}
	a, ok, err := s.keptAnalytics(ctx, q, time.Time{})
	if err != nil {
		return a, err
	}
	if ok {
		a.err = msg + " This is the last answer it gave."
		return a, nil
	}
	return analyticsAnswer{err: msg}, nil
}

func (s *Server) keptAnalytics(ctx context.Context, q analyticsQuery, since time.Time) (analyticsAnswer, bool, error) {
	row, ok, err := models.FreshSiteAnswer(ctx, s.DB, models.AnswerAnalytics, q.site, q.path, "", since)
	if err != nil || !ok {
		return analyticsAnswer{}, false, err
	}
	var out site.AnalyticsOutput
	if err := json.Unmarshal([]byte(row.Body), &out); err != nil {
		return analyticsAnswer{}, false, nil //nolint:nilerr // an unreadable kept answer is no answer
	}
	return analyticsAnswer{out: &out, cached: true}, true, nil
}

func buckets(in []site.AnalyticsBucket) []analyticsBucket {
	out := make([]analyticsBucket, len(in))
	for i, b := range in {
		out[i] = analyticsBucket(b)
	}
	return out
}

func analyticsPageOf(q analyticsQuery, a analyticsAnswer) analyticsPage {
	p := analyticsPage{Site: q.site, Path: q.path, Cached: a.cached, Error: a.err,
		ByState: []analyticsBucket{}, ByAtime: []analyticsBucket{}, ByMtime: []analyticsBucket{}, BySize: []analyticsBucket{}, ByType: []analyticsBucket{}}
	o := a.out
	if o == nil {
		return p
	}
	computed := o.Computed.UTC()
	p.Complete, p.Computed, p.Elapsed = o.Complete && a.err == "", &computed, o.Elapsed
	p.Files, p.Directories, p.Symlinks, p.Bytes = o.Files, o.Directories, o.Symlinks, o.Bytes
	p.ByState, p.ByAtime, p.ByMtime, p.BySize, p.ByType = buckets(o.ByState), buckets(o.ByAtime), buckets(o.ByMtime), buckets(o.BySize), buckets(o.ByType)
	p.ChildrenTotal = o.ChildrenTotal
	return p
}

var unsafeFileName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// writeAnalyticsCSV answers the same data as CSV, unpaginated: one row per
// band of each breakdown, a total row, and with children=true one row per
// child kept. Columns: section, key, files, directories, bytes.
func writeAnalyticsCSV(c *gin.Context, q analyticsQuery, a analyticsAnswer) error {
	p := analyticsPageOf(q, a)
	stamp := "none"
	if p.Computed != nil {
		stamp = p.Computed.Format("20060102T150405Z")
	}
	name := strings.Trim(unsafeFileName.ReplaceAllString(fmt.Sprintf("analytics-%s-%s-%s", q.site, strings.Trim(q.path, "/"), stamp), "_"), "_")
	c.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.csv"`, strings.ReplaceAll(name, "--", "-")))
	c.Header("Content-Type", "text/csv; charset=utf-8")
	c.Status(http.StatusOK)
	w := csv.NewWriter(c.Writer)
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	rows := [][]string{{"section", "key", "files", "directories", "bytes"}}
	info := "complete"
	if !p.Complete {
		info = "partial: " + p.Error
	}
	rows = append(rows, []string{"answer", cell(info), "", "", ""})
	rows = append(rows, []string{"total", cell(q.path), n(p.Files), n(p.Directories), n(p.Bytes)})
	for _, sec := range []struct {
		name string
		b    []analyticsBucket
	}{{"state", p.ByState}, {"atime", p.ByAtime}, {"mtime", p.ByMtime}, {"size", p.BySize}, {"type", p.ByType}} {
		for _, b := range sec.b {
			rows = append(rows, []string{sec.name, cell(b.Key), n(b.Files), "", n(b.Bytes)})
		}
	}
	if q.children && a.out != nil {
		for _, ch := range a.out.Children {
			rows = append(rows, []string{"child", cell(ch.Path), n(ch.Files), n(ch.Directories), n(ch.Bytes)})
		}
	}
	if err := w.WriteAll(rows); err != nil {
		return nil //nolint:nilerr // the client went away mid-answer
	}
	return nil
}

// cell keeps a spreadsheet from reading a file name as a formula.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
