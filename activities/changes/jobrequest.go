package changes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows/vocab"
)

// JobRequest asks for a workflow to run over paths of a site: the body of
// POST /file/workflow/, and what a schedule's or a policy's firing asks.
type JobRequest struct {
	Site, Workflow     string
	Discovery          *string // nil: the workflow's own
	Fields             map[string]any
	Paths              []string
	Include, Exclude   []string
	IgnoreSiteIncludes bool
	IgnoreSiteExcludes bool
	Queue              *string // nil: the workflow's preferred queue
	// IdempotencyKey makes a request sent again by the same owner return
	// the first job instead of creating another.
	IdempotencyKey *string
	Owner          JobOwner
	// PathsField names the request's paths in errors ("paths").
	PathsField string
}

// JobOwner says on whose behalf a job runs: a user (and the client key
// used), or the system for a schedule's firing.
type JobOwner struct {
	UserID        *int64
	UserName      string
	ClientKeyID   *int64
	ClientKeyName string
	// Schedule is set for a schedule's firing: the job is the system's,
	// and schedule-only workflows may run.
	ScheduleID   *int64
	ScheduleName string
}

// SubmitJob validates req, records its job and starts it (see CreateJob).
// Bad input is a models.FieldErrors naming the fields.
func (s *Service) SubmitJob(ctx context.Context, req JobRequest) (j *models.Job, existed bool, err error) {
	if j, err = NewJob(ctx, s.DB, req); err != nil {
		return nil, false, err
	}
	existed, err = s.CreateJob(ctx, j)
	return j, existed, err
}

// NewJob validates a job request and builds its record (not yet stored).
func NewJob(ctx context.Context, db bun.IDB, req JobRequest) (*models.Job, error) {
	v := models.FieldErrors{}
	v.Check(req.Site != "", "site", "This field is required.")
	v.Check(req.Workflow != "", "workflow", "This field is required.")
	if err := v.Err(); err != nil {
		return nil, err
	}
	site, err := models.GetSiteByName(ctx, db, req.Site)
	if errors.Is(err, models.ErrNotFound) {
		v.Add("site", fmt.Sprintf("Site %q does not exist.", req.Site))
	} else if err != nil {
		return nil, err
	}
	wf, err := models.GetWorkflowByName(ctx, db, req.Workflow)
	if errors.Is(err, models.ErrNotFound) {
		v.Add("workflow", fmt.Sprintf("Workflow %q does not exist.", req.Workflow))
	} else if err != nil {
		return nil, err
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	v.Check(wf.Enabled, "workflow", "This workflow is disabled.")
	v.Check(!wf.ScheduleOnly || req.Owner.ScheduleID != nil, "workflow", "This workflow can only run inside a schedule.")
	discovery := deref(wf.Discovery)
	if req.Discovery != nil {
		discovery = *req.Discovery
	}
	if discovery == "none" {
		discovery = ""
	}
	pathsField := req.PathsField
	if pathsField == "" {
		pathsField = "paths"
	}
	v.Check(discovery == "" || discovery == "recursive" || discovery == "snapdiff", "discovery", "Use recursive, snapdiff or none.")
	CheckPaths(v, pathsField, req.Paths)
	v.Check(len(req.Paths) > 0, pathsField, "At least one path is required.")
	v.Check(discovery != "snapdiff" || len(req.Paths) == 1, pathsField, "Snapdiff discovery takes exactly one managed path.")
	fields := checkFields(v, wf.Fields, req.Fields)
	if err := v.Err(); err != nil {
		return nil, err
	}
	dests, err := checkDestinations(ctx, db, v, wf, site, fields)
	if err != nil {
		return nil, err
	}
	queue := wf.PreferredQueue
	if req.Queue != nil {
		queue = *req.Queue
	}
	if queue == "" {
		queue = vocab.DefaultQueue
	}
	if err := CheckQueue(ctx, db, v, "queue", site, queue); err != nil {
		return nil, err
	}
	for i, g := range append(append([]string{}, req.Include...), req.Exclude...) {
		v.Check(g != "", fmt.Sprintf("include/exclude[%d]", i), "Globs may not be empty.")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	j := &models.Job{Workflow: wf.Name, Site: site.Name, SiteID: site.ID, Queue: queue, Fields: fields, Paths: req.Paths,
		Include: req.Include, Exclude: req.Exclude, IgnoreSiteIncludes: req.IgnoreSiteIncludes, IgnoreSiteExcludes: req.IgnoreSiteExcludes,
		Definition: models.JobDefinition{Name: wf.Name, Discovery: discovery, DiscoveryOptions: wf.DiscoveryOptions,
			FilterRules: wf.FilterRules, PreferredQueue: wf.PreferredQueue, DestSites: dests},
		FriendlyName: fmt.Sprintf("%s on %s", wf.Label, site.Name), IdempotencyKey: req.IdempotencyKey}
	if discovery != "" {
		j.Discovery = &discovery
	}
	o := req.Owner
	if o.ScheduleID != nil {
		j.OwnerType, j.OwnerName = models.OwnerSystem, "System"
		j.ScheduleID, j.ScheduleName = o.ScheduleID, o.ScheduleName
		j.FriendlyName = fmt.Sprintf("%s on %s (schedule %s)", wf.Label, site.Name, o.ScheduleName)
	} else {
		j.OwnerType, j.OwnerID, j.OwnerName = models.OwnerUser, o.UserID, o.UserName
		j.ClientKeyID, j.ClientKeyName = o.ClientKeyID, o.ClientKeyName
	}
	return j, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// CheckQueue adds a message to v under field unless queue is a valid,
// known queue of site (models.SiteHasQueue): a job on any other queue
// would wait for a worker that never comes, or, with a name Temporal
// refuses, never even schedule its first task.
func CheckQueue(ctx context.Context, db bun.IDB, v models.FieldErrors, field string, site *models.Site, queue string) error {
	if !vocab.QueueNameOK(queue) {
		v.Add(field, fmt.Sprintf("Must match [a-zA-Z0-9-_]+, at most %d characters.", vocab.MaxQueueLen))
		return nil
	}
	known, err := models.SiteHasQueue(ctx, db, site.ID, queue)
	if err != nil {
		return err
	}
	v.Check(known, field, fmt.Sprintf("Site %s has no queue %q: use %s or a queue its workers serve (GET /api/queues/?site=%s).",
		site.Name, queue, vocab.DefaultQueue, site.Name))
	return nil
}

// CheckPaths refuses paths that are not absolute inside the site root or
// that hold ".." or NUL (errors under field[i]); symlinks leaving the root
// are refused by the site worker, per path.
func CheckPaths(v models.FieldErrors, field string, paths []string) {
	for i, s := range paths {
		f := fmt.Sprintf("%s[%d]", field, i)
		if s == "" {
			v.Add(f, "Each path must be a non-empty string or an object with a path.")
		} else if msg := models.SitePathError(s); msg != "" {
			v.Add(f, msg)
		}
	}
}

// checkFields validates runtime fields against the definition and fills
// defaults.
func checkFields(v models.FieldErrors, defs map[string]models.WorkflowField, given map[string]any) map[string]any {
	out := map[string]any{}
	for name := range given {
		if _, ok := defs[name]; !ok {
			v.Add("fields."+name, "Unknown field for this workflow.")
		}
	}
	for name, f := range defs {
		val, ok := given[name]
		if !ok || val == nil {
			if f.Required && f.Default == nil {
				v.Add("fields."+name, "This field is required.")
			}
			if f.Default != nil {
				out[name] = f.Default
			}
			continue
		}
		switch f.Type {
		case "number":
			if _, isNum := val.(float64); !isNum {
				if n, isJSON := val.(interface{ Float64() (float64, error) }); isJSON {
					fv, _ := n.Float64()
					val = fv
				} else {
					v.Add("fields."+name, "Expected a number.")
				}
			}
		case "checkbox":
			if _, ok := val.(bool); !ok {
				v.Add("fields."+name, "Expected a boolean.")
			}
		case "choice":
			found := false
			for _, c := range f.Choices {
				found = found || fmt.Sprint(c) == fmt.Sprint(val)
			}
			if !found {
				v.Add("fields."+name, fmt.Sprintf("%v is not one of the choices.", val))
			}
		default:
			if _, ok := val.(string); !ok {
				v.Add("fields."+name, "Expected a string.")
			}
		}
		out[name] = val
	}
	return out
}

// checkDestinations refuses a send or site_sync whose destination site
// (a literal or a "$field") does not exist or is the job's own site, or
// whose destination queue is not a known queue of that site. It returns
// the destination sites' ids by the names the job gives them, so that
// the job keeps its destinations if they are renamed.
func checkDestinations(ctx context.Context, db bun.IDB, v models.FieldErrors, wf *models.Workflow, site *models.Site, fields map[string]any) (map[string]int64, error) {
	var ids map[string]int64
	for _, r := range wf.FilterRules {
		for _, st := range r.Action {
			dest, _ := st.Params["destination_site"].(string)
			field := "destination_site"
			if name, ok := strings.CutPrefix(dest, "$"); ok {
				field = "fields." + name
				dest, _ = fields[name].(string)
			}
			if st.Name != "send" && st.Name != "site_sync" {
				continue
			}
			destSite, err := models.GetSiteByName(ctx, db, dest)
			switch {
			case errors.Is(err, models.ErrNotFound):
				v.Add(field, fmt.Sprintf("Site %q does not exist.", dest))
				continue
			case err != nil:
				return nil, err
			case dest == site.Name:
				v.Add(field, "The destination must be another site.")
				continue
			}
			if ids == nil {
				ids = map[string]int64{}
			}
			ids[dest] = destSite.ID
			queue, _ := st.Params["destination_queue"].(string)
			qfield := "destination_queue"
			if name, ok := strings.CutPrefix(queue, "$"); ok {
				qfield = "fields." + name
				queue, _ = fields[name].(string)
			}
			if queue == "" {
				queue = vocab.DefaultQueue
			}
			if err := CheckQueue(ctx, db, v, qfield, destSite, queue); err != nil {
				return nil, err
			}
			// The destination folder, as job paths are checked: a runtime
			// field's value, or the definition's literal (checked when it
			// was written, unless stored before that).
			dpath, _ := st.Params["destination_path"].(string)
			pfield := "destination_path"
			if name, ok := strings.CutPrefix(dpath, "$"); ok {
				pfield = "fields." + name
				dpath, _ = fields[name].(string)
			}
			if msg := models.SitePathError(dpath); dpath != "" && msg != "" {
				v.Add(pfield, msg)
			}
		}
	}
	return ids, nil
}
