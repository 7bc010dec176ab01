package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// CJPrepareChange reads the item's newest change, marks it PENDING (queued
// for the site) and returns what the site must do.
func (a *Activities) CJPrepareChange(ctx context.Context, itemID int64) (workflows.CJPlan, error) {
	it, err := models.GetCJItemByID(ctx, a.DB, itemID)
	if errors.Is(err, models.ErrNotFound) {
		return workflows.CJPlan{ItemID: itemID}, nil
	} else if err != nil {
		return workflows.CJPlan{}, fmt.Errorf("load C+J item %d: %w", itemID, err)
	}
	plan := workflows.CJPlan{Found: true, ItemID: it.ID, Generation: it.Generation, Delete: it.Deleted}
	plan.Change, plan.SiteWork, err = a.cjSiteChange(ctx, it)
	if err != nil {
		return workflows.CJPlan{}, err
	}
	what := "change"
	if it.Deleted {
		what = "deletion"
	}
	job := ""
	if activity.IsActivity(ctx) {
		job = " by job " + activity.GetInfo(ctx).WorkflowExecution.ID
	}
	if err := a.cjLog(ctx, it.ID, it.Generation, "info", fmt.Sprintf("%s %d queued for site %s%s", what, it.Generation, it.Site, job)); err != nil {
		return workflows.CJPlan{}, err
	}
	if _, err := models.SetCJStatus(ctx, a.DB, it.ID, it.Generation, models.CJPending); err != nil {
		return workflows.CJPlan{}, fmt.Errorf("mark C+J item %d pending: %w", it.ID, err)
	}
	return plan, nil
}

// CJStartChange marks the item INPROGRESS: the site is about to work on it.
func (a *Activities) CJStartChange(ctx context.Context, plan workflows.CJPlan) error {
	if _, err := models.SetCJStatus(ctx, a.DB, plan.ItemID, plan.Generation, models.CJInProgress); err != nil {
		return fmt.Errorf("mark C+J item %d in progress: %w", plan.ItemID, err)
	}
	return nil
}

// CJFinishChange records the outcome: ACTIVE (or, for a deletion, the row
// removed) on success; ERRORED with the cause in the log on failure, a
// failed deletion making the item visible again. A newer change keeps the
// item PENDING for the next run.
func (a *Activities) CJFinishChange(ctx context.Context, out workflows.CJOutcome) error {
	level, msg := "info", out.Message
	out.Error = vocab.CleanErrorText(out.Error)
	if out.Error != "" {
		level, msg = "error", "failed: "+out.Error
		if out.Delete {
			msg = "deletion failed, the item is kept: " + out.Error
		}
	}
	if msg == "" {
		msg = "done"
	}
	if err := a.cjLog(ctx, out.ItemID, out.Generation, level, msg); err != nil && !errors.Is(err, models.ErrNotFound) {
		return err
	}
	var err error
	switch {
	case out.Error == "" && out.Delete:
		_, err = models.RemoveCJItem(ctx, a.DB, out.ItemID, out.Generation)
	case out.Error == "":
		_, err = models.SetCJStatus(ctx, a.DB, out.ItemID, out.Generation, models.CJActive)
	case out.Delete:
		_, err = models.RestoreCJItem(ctx, a.DB, out.ItemID, out.Generation)
	default:
		_, err = models.SetCJStatus(ctx, a.DB, out.ItemID, out.Generation, models.CJErrored)
	}
	if err != nil {
		return fmt.Errorf("finish change %d of C+J item %d: %w", out.Generation, out.ItemID, err)
	}
	if out.Delete {
		return nil
	}
	// The C+J change makes the folder of a space both APIs share, so it
	// says on the hub space's link whether the folder is ready.
	it, err := models.GetCJItemByID(ctx, a.DB, out.ItemID)
	if errors.Is(err, models.ErrNotFound) || (err == nil && (it.Type != models.CJSpaces || it.Generation != out.Generation)) {
		return nil
	} else if err != nil {
		return fmt.Errorf("load C+J item %d: %w", out.ItemID, err)
	}
	state := vocab.SpaceSiteReady
	if out.Error != "" {
		state = vocab.SpaceSiteError
	}
	if err := models.RecordCJSpaceSite(ctx, a.DB, it.Site, it.Name, state, out.Error); err != nil {
		return fmt.Errorf("record the folder of C+J space %s: %w", it.Name, err)
	}
	return nil
}

// CJStoreDatastores makes the site's datastores the pools it reported.
func (a *Activities) CJStoreDatastores(ctx context.Context, in workflows.CJDatastores) error {
	docs := make(map[string]map[string]any, len(in.Pools))
	for _, p := range in.Pools {
		docs[p.Name] = map[string]any{"name": p.Name, "filesystem": p.Filesystem,
			"capacity": p.Capacity, "free_space": p.FreeSpace, "used_space": p.UsedSpace}
	}
	if err := models.SyncCJItems(ctx, a.DB, in.Site, models.CJDatastores, docs); err != nil {
		return fmt.Errorf("store datastores of %s: %w", in.Site, err)
	}
	return nil
}

func (a *Activities) cjLog(ctx context.Context, id, gen int64, level, msg string) error {
	return models.AppendCJLog(ctx, a.DB, id, models.CJLogEntry{
		Time: time.Now().UTC(), Level: level, Message: msg, Generation: gen})
}

// cjSiteChange renders an item as the change its site applies, resolving
// what the site cannot read itself (templates' folders, ilmsteps' rules).
func (a *Activities) cjSiteChange(ctx context.Context, it *models.CJItem) (site.CJChange, bool, error) {
	ch := site.CJChange{Type: it.Type, ItemID: it.ID, Name: it.Name, Delete: it.Deleted}
	d := it.Data
	switch it.Type {
	case models.CJSpaces:
		sp := &site.CJSpace{Name: it.Name, Quota: cjIntPtr(d["quota"]), KeepNonEmpty: d[models.CJKeepFolder] == true}
		if hub, err := models.SpaceByMountpoint(ctx, a.DB, models.CJSpaceMountpoint(it.Name)); err == nil {
			sp.Mode = hub.PermissionMode
		} else if !errors.Is(err, models.ErrNotFound) {
			return ch, false, fmt.Errorf("load the hub API space of %s: %w", it.Name, err)
		}
		if !it.Deleted {
			dirs, err := a.cjTemplateDirectories(ctx, it.Site, d["templates"])
			if err != nil {
				return ch, false, err
			}
			sp.Directories = dirs
		}
		ch.Space = sp
	case models.CJExposers:
		ch.Exposer = &site.CJExposer{Name: it.Name, Kind: cjStr(d["type"]), Space: cjStr(d["space"]),
			Path: cjStr(d["path"]), Clients: cjStrList(d["clients"]), Options: cjStr(d["options"]),
			ReadOnly: d["read_only"] == true, ValidUsers: cjStrList(d["valid_users"])}
	case models.CJSnapshots:
		s, err := models.GetSiteByName(ctx, a.DB, it.Site)
		if err != nil {
			return ch, false, fmt.Errorf("load site %s: %w", it.Site, err)
		}
		// The targets keep the content of the space's stubs for the
		// snapshot, and its removal drops their references.
		targets, err := a.siteTargets(ctx, s.ID)
		if err != nil {
			return ch, false, err
		}
		ch.Snapshot = &site.CJSnapshot{Space: cjStr(d["space"]), Name: it.Name, Targets: targets, LockThreshold: s.LockThreshold}
	case models.CJIlmsteps:
		ch.Policy = &site.CJPolicy{Kind: site.CJIlmsteps, Name: it.Name,
			Text: fmt.Sprintf("/* ilmstep %s (C+J item %d), managed by the hub */\n%s", it.Name, it.ID, cjIlmstepRule(it.Name, d))}
	case models.CJProfiles:
		text := ""
		if !it.Deleted {
			var err error
			if text, err = a.cjProfilePolicy(ctx, it); err != nil {
				return ch, false, err
			}
		}
		ch.Policy = &site.CJPolicy{Kind: site.CJProfiles, Name: it.Name, Text: text}
	default:
		return ch, false, nil
	}
	return ch, true, nil
}

// cjTemplateDirectories collects the folders of the listed templates in
// order, each once. A template deleted since the space listed it adds none.
func (a *Activities) cjTemplateDirectories(ctx context.Context, siteName string, ids any) ([]string, error) {
	var dirs []string
	for _, v := range cjList(ids) {
		id, ok := cjInt(v)
		if !ok {
			continue
		}
		t, err := models.GetCJItem(ctx, a.DB, siteName, models.CJTemplates, id)
		if errors.Is(err, models.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("load template %d: %w", id, err)
		}
		for _, d := range cjStrList(t.Data["directories"]) {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs, nil
}

// cjProfilePolicy renders a profile: its ilmsteps' rules in the listed order,
// then its default placement, which GPFS wants last.
func (a *Activities) cjProfilePolicy(ctx context.Context, it *models.CJItem) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "/* profile %s (C+J item %d), managed by the hub */\n", it.Name, it.ID)
	for _, name := range cjStrList(it.Data["ilmsteps"]) {
		step, err := models.FindCJItem(ctx, a.DB, it.Site, models.CJIlmsteps, "", name)
		if errors.Is(err, models.ErrNotFound) {
			fmt.Fprintf(&b, "/* ilmstep %s: no such ilmstep */\n", name)
			continue
		} else if err != nil {
			return "", fmt.Errorf("load ilmstep %s: %w", name, err)
		}
		b.WriteString(cjIlmstepRule(step.Name, step.Data))
	}
	if pool := cjStr(it.Data["pool"]); pool != "" {
		fmt.Fprintf(&b, "RULE '%s-default' SET POOL '%s'\n", it.Name, pool)
	}
	return b.String(), nil
}

// cjIlmstepRule renders an ilmstep as one GPFS policy rule: a placement
// (SET POOL) or a migration (MIGRATE TO POOL), with its rule text as the
// WHERE condition.
func cjIlmstepRule(name string, d map[string]any) string {
	verb := "SET POOL"
	if cjStr(d["kind"]) == "migration" {
		verb = "MIGRATE TO POOL"
	}
	rule := fmt.Sprintf("RULE '%s' %s '%s'", name, verb, cjStr(d["pool"]))
	if cond := strings.TrimSpace(cjStr(d["rule"])); cond != "" {
		rule += " WHERE " + cond
	}
	return rule + "\n"
}

func cjStr(v any) string {
	s, _ := v.(string)
	return s
}

func cjList(v any) []any {
	l, _ := v.([]any)
	return l
}

func cjStrList(v any) []string {
	var out []string
	for _, e := range cjList(v) {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// cjInt reads a whole number as JSON decoding or the API stored it.
func cjInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	}
	return 0, false
}

func cjIntPtr(v any) *int64 {
	if n, ok := cjInt(v); ok {
		return &n
	}
	return nil
}
