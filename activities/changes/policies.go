package changes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/models"
	"github.com/thehub/hub/workflows"
	"github.com/thehub/hub/workflows/vocab"
)

// PolicyInput is a policy as a client writes it; nil fields keep their
// value (a create starts from the defaults). Nested lists are replaced
// whole.
type PolicyInput struct {
	Name            *string                       `json:"name"`
	Enabled         *bool                         `json:"enabled"`
	PolicyType      *string                       `json:"policy_type" doc:"migration or premigration."`
	Filesystem      *string                       `json:"filesystem"`
	Site            *int64                        `json:"site"`
	Spaces          *[]int64                      `json:"spaces"`
	Threads         *int                          `json:"threads"`
	RunImmediately  bool                          `json:"run_immediately"`
	Order           *PolicyOrderInput             `json:"order"`
	Schedule        Nullable[PolicyScheduleInput] `json:"schedule"` // null removes it
	Triggers        Nullable[[]TriggerInput]      `json:"triggers"` // null removes them
	ConditionGroups *[]ConditionGroupInput        `json:"condition_groups"`
}

// TriggerInput is a policy trigger as a client writes it (thresholds in
// percent). premigrate_threshold omitted is lower_threshold: no
// premigrate band.
type TriggerInput struct {
	PoolName            string   `json:"pool_name"`
	IsCloud             bool     `json:"is_cloud"`
	LowerThreshold      *float64 `json:"lower_threshold"`
	UpperThreshold      *float64 `json:"upper_threshold"`
	PremigrateThreshold *float64 `json:"premigrate_threshold"`
	MaxUtilisation      float64  `json:"max_utilisation"`
}

// PolicyOrderInput orders the files a policy selects.
type PolicyOrderInput struct {
	By      *string `json:"by" doc:"atime, mtime, ctime, size or path."`
	Reverse bool    `json:"reverse"`
}

// PolicyScheduleInput is when a policy runs.
type PolicyScheduleInput struct {
	Minute      *string `json:"minute"`
	Hour        *string `json:"hour"`
	DayOfMonth  *string `json:"day_of_month"`
	DayOfWeek   *string `json:"day_of_week"`
	MonthOfYear *string `json:"month_of_year"`
	FirstOccur  bool    `json:"first_occur"`
	Time        string  `json:"time" doc:"HH:MM on the policy's site: sets hour and minute."`
	Timezone    string  `json:"timezone" doc:"IANA name; the site's timezone when empty."`
}

// ConditionGroupInput is a condition group as a client writes it; the
// ids it names (policy, condition_group) are the server's to set.
type ConditionGroupInput struct {
	Name               string                   `json:"name"`
	DateConditions     []DateConditionInput     `json:"date_conditions"`
	FilesizeConditions []FilesizeConditionInput `json:"filesize_conditions"`
	FiletypeConditions []FiletypeConditionInput `json:"filetype_conditions"`
}

// DateConditionInput: the file's date_field is older_or_newer than age.
type DateConditionInput struct {
	Age          string `json:"age" doc:"<n><unit>, unit h, d, w, m (30 days) or y (365 days); a bare number is days."`
	DateField    string `json:"date_field" doc:"atime, mtime or ctime."`
	OlderOrNewer string `json:"older_or_newer" doc:"older or newer."`
	Include      *bool  `json:"include" doc:"false negates the condition; default true."`
}

// FilesizeConditionInput: the file is greater_or_less than size bytes.
type FilesizeConditionInput struct {
	GreaterOrLess string `json:"greater_or_less" doc:"greater or less."`
	Size          *int64 `json:"size"`
	Include       *bool  `json:"include"`
}

// FiletypeConditionInput: the file's extension is one of filetypes.
type FiletypeConditionInput struct {
	Filetypes []string `json:"filetypes"`
	Include   *bool    `json:"include"`
}

// Accepted values of a policy's fields.
var (
	policyTypes     = []string{models.PolicyMigration, models.PolicyPremigration}
	policyOrderKeys = []string{"atime", "mtime", "ctime", "size", "path"}
	dateFields      = []string{"atime", "mtime", "ctime"}
)

// maxPolicyThreads bounds a policy scan's parallel walkers.
const maxPolicyThreads = 64

// SavePolicy creates (id 0) or updates policy id from in, and brings its
// Temporal Schedule in step. A new policy with run_immediately also runs
// at once: job is that run's job.
func (s *Service) SavePolicy(ctx context.Context, id int64, in PolicyInput) (p *models.Policy, job *models.Job, err error) {
	p = &models.Policy{Enabled: true, PolicyType: models.PolicyMigration, OrderBy: "atime", Spaces: []int64{}}
	if id != 0 {
		if p, err = models.GetPolicy(ctx, s.DB, id); err != nil {
			return nil, nil, err
		}
	}
	before := policyChoice(p)
	if err := s.applyPolicy(ctx, p, in, id == 0); err != nil {
		return nil, nil, err
	}
	if id != 0 {
		numberPolicy(p) // numbered as stored: resent conditions are no change
	}
	changed := id != 0 && policyChoice(p) != before
	if id == 0 && in.RunImmediately {
		// Refused before anything is stored: a 400 after the policy was
		// created would make a client's retry a name conflict.
		if _, err := s.fileChain(ctx, models.PolicyWorkflows[p.PolicyType], true); err != nil {
			return nil, nil, err
		}
	}
	err = s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := uniqueName(ctx, tx, (*models.Policy)(nil), p.ID, p.Name, "A policy with this name already exists."); err != nil {
			return err
		}
		if err := models.SavePolicy(ctx, tx, p); err != nil {
			return err
		}
		numberPolicy(p)
		if err := models.SavePolicy(ctx, tx, p); err != nil {
			return err
		}
		if changed {
			if err := cancelUnscannedFirings(ctx, tx, p.ID); err != nil {
				return err
			}
		}
		return oweSync(ctx, tx, p.ID, workflows.PolicyTemporalID(p.ID))
	})
	if err != nil {
		return nil, nil, err
	}
	if id == 0 && in.RunImmediately {
		if job, err = s.RunPolicy(ctx, p.ID, ""); err != nil {
			return nil, nil, err
		}
	}
	p, err = models.GetPolicy(ctx, s.DB, p.ID)
	return p, job, err
}

// numberPolicy gives the parts of policy p the ids the API shows: its own
// id for its order and schedule, and ids counted within the policy for
// its triggers, groups and conditions.
func numberPolicy(p *models.Policy) {
	if p.Schedule != nil {
		p.Schedule.ID = p.ID
	}
	for i := range p.Triggers {
		p.Triggers[i].ID = int64(i + 1)
	}
	var cond int64
	for i := range p.ConditionGroups {
		g := &p.ConditionGroups[i]
		g.ID, g.Policy = int64(i+1), p.ID
		for j := range g.DateConditions {
			cond++
			g.DateConditions[j].ID, g.DateConditions[j].ConditionGroup = cond, g.ID
		}
		for j := range g.FilesizeConditions {
			cond++
			g.FilesizeConditions[j].ID, g.FilesizeConditions[j].ConditionGroup = cond, g.ID
		}
		for j := range g.FiletypeConditions {
			cond++
			g.FiletypeConditions[j].ID, g.FiletypeConditions[j].ConditionGroup = cond, g.ID
		}
	}
}

func (s *Service) applyPolicy(ctx context.Context, p *models.Policy, in PolicyInput, create bool) error {
	v := models.FieldErrors{}
	oldTZ := siteTZ(p.Site)
	if create {
		v.Check(in.Name != nil, "name", "This field is required.")
		v.Check(in.Site != nil, "site", "This field is required.")
	}
	if in.Name != nil {
		p.Name = strings.TrimSpace(*in.Name)
		v.Check(p.Name != "", "name", "This field may not be blank.")
	}
	setIf(&p.Enabled, in.Enabled)
	setIf(&p.PolicyType, in.PolicyType)
	v.Check(slices.Contains(policyTypes, p.PolicyType), "policy_type", "Use "+strings.Join(policyTypes, " or ")+".")
	setIf(&p.Filesystem, in.Filesystem)
	if in.Site != nil {
		site, err := models.GetSite(ctx, s.DB, *in.Site)
		if errors.Is(err, models.ErrNotFound) {
			v.Add("site", fmt.Sprintf("Site %d does not exist.", *in.Site))
		} else if err != nil {
			return err
		} else {
			p.SiteID, p.Site = site.ID, site
		}
	}
	if in.Spaces != nil {
		p.Spaces = append([]int64{}, *in.Spaces...)
	}
	if in.Site != nil || in.Spaces != nil {
		if err := s.checkPolicySpaces(ctx, v, p); err != nil {
			return err
		}
	}
	setIf(&p.Threads, in.Threads)
	v.Check(p.Threads >= 0 && p.Threads <= maxPolicyThreads, "threads", fmt.Sprintf("Between 0 (the site's default) and %d.", maxPolicyThreads))
	if in.Order != nil {
		if in.Order.By != nil {
			p.OrderBy = *in.Order.By
		}
		p.OrderReverse = in.Order.Reverse
	}
	v.Check(slices.Contains(policyOrderKeys, p.OrderBy), "order.by", "Use one of "+strings.Join(policyOrderKeys, ", ")+".")
	switch {
	case in.Schedule.Set && !in.Schedule.Null:
		p.Schedule = policySchedule(v, in.Schedule.V, p.Site)
	case in.Schedule.Set, create:
		p.Schedule = nil
	case p.Schedule != nil && p.Schedule.Timezone == oldTZ:
		// Written before a schedule followed its site, its timezone is a
		// copy of the site's: it follows the site from now on.
		p.Schedule.Timezone = ""
	}
	if p.Schedule != nil && (in.Schedule.Set || in.Site != nil) {
		p.Schedule.StartDateTime = startDateTime(p.Schedule, PolicyTimezone(p), time.Now())
	}
	switch {
	case in.Triggers.Set && !in.Triggers.Null:
		p.Triggers = triggers(v, in.Triggers.V)
	case in.Triggers.Set:
		p.Triggers = []models.PolicyTrigger{}
	}
	if in.ConditionGroups != nil {
		p.ConditionGroups = conditionGroups(v, *in.ConditionGroups)
	}
	return v.Err()
}

func (s *Service) checkPolicySpaces(ctx context.Context, v models.FieldErrors, p *models.Policy) error {
	v.Check(len(p.Spaces) > 0, "spaces", "At least one space is required: a policy scans its spaces.")
	for i, id := range p.Spaces {
		sp, err := models.GetSpace(ctx, s.DB, id, models.SpaceFilter{})
		if errors.Is(err, models.ErrNotFound) {
			v.Add(fmt.Sprintf("spaces[%d]", i), fmt.Sprintf("Space %d does not exist.", id))
			continue
		} else if err != nil {
			return err
		}
		v.Check(sp.OnSite(p.SiteID) || p.SiteID == 0, fmt.Sprintf("spaces[%d]", i), fmt.Sprintf("Space %s is not on the policy's site.", sp.Name))
	}
	return nil
}

func policySchedule(v models.FieldErrors, in PolicyScheduleInput, siteRec *models.Site) *models.PolicySchedule {
	ps := &models.PolicySchedule{Cron: models.Cron{Minute: "0", Hour: "0", DayOfMonth: "*", DayOfWeek: "*", MonthOfYear: "*"},
		FirstOccur: in.FirstOccur, Time: in.Time, Timezone: in.Timezone}
	setIf(&ps.Minute, in.Minute)
	setIf(&ps.Hour, in.Hour)
	setIf(&ps.DayOfMonth, in.DayOfMonth)
	setIf(&ps.DayOfWeek, in.DayOfWeek)
	setIf(&ps.MonthOfYear, in.MonthOfYear)
	if ps.Time != "" {
		if _, err := time.Parse("15:04", ps.Time); err != nil {
			v.Add("schedule.time", "Enter a time of day as HH:MM.")
		}
	}
	CheckCron(v, "schedule.", PolicyCron(ps))
	if _, err := time.LoadLocation(ps.Timezone); err != nil || ps.Timezone == "Local" {
		v.Add("schedule.timezone", fmt.Sprintf("Unknown timezone %q: use an IANA name such as Europe/Paris or UTC.", ps.Timezone))
	}
	// Its time is the time on the policy's site: a schedule without a
	// timezone of its own (or with the site's, as a client that read the
	// policy sends it back) follows the site's, through moves and changes.
	if ps.Timezone == siteTZ(siteRec) {
		ps.Timezone = ""
	}
	return ps
}

// PolicyTimezone is the timezone of policy p's schedule: its own, or
// else its site's.
func PolicyTimezone(p *models.Policy) string {
	if p.Schedule != nil && p.Schedule.Timezone != "" {
		return p.Schedule.Timezone
	}
	return siteTZ(p.Site)
}

// startDateTime is when schedule ps, in timezone tz, first starts after
// now (RFC 3339 in tz); "" when it cannot tell.
func startDateTime(ps *models.PolicySchedule, tz string, now time.Time) string {
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return ""
	}
	next, err := nextStart(PolicyCron(ps), tz, now)
	if err != nil || next.IsZero() {
		return ""
	}
	return next.In(loc).Format(time.RFC3339)
}

func triggers(v models.FieldErrors, in []TriggerInput) []models.PolicyTrigger {
	out := []models.PolicyTrigger{}
	for i, t := range in {
		f := fmt.Sprintf("triggers[%d].", i)
		v.Check(t.LowerThreshold != nil, f+"lower_threshold", "This field is required.")
		v.Check(t.UpperThreshold != nil, f+"upper_threshold", "This field is required.")
		if t.LowerThreshold == nil || t.UpperThreshold == nil {
			continue
		}
		pt := models.PolicyTrigger{PoolName: t.PoolName, IsCloud: t.IsCloud, LowerThreshold: *t.LowerThreshold,
			UpperThreshold: *t.UpperThreshold, PremigrateThreshold: *t.LowerThreshold, MaxUtilisation: t.MaxUtilisation}
		if t.PremigrateThreshold != nil {
			pt.PremigrateThreshold = *t.PremigrateThreshold
		}
		out = append(out, pt)
	}
	for i, t := range out {
		f := fmt.Sprintf("triggers[%d].", i)
		v.Check(strings.TrimSpace(t.PoolName) != "", f+"pool_name", "This field is required.")
		for name, x := range map[string]float64{"lower_threshold": t.LowerThreshold, "upper_threshold": t.UpperThreshold,
			"premigrate_threshold": t.PremigrateThreshold, "max_utilisation": t.MaxUtilisation} {
			v.Check(x >= 0 && x <= 100 && !math.IsNaN(x), f+name, "A percentage between 0 and 100.")
		}
		v.Check(t.LowerThreshold <= t.UpperThreshold, f+"lower_threshold", "Must not be above upper_threshold.")
		v.Check(t.PremigrateThreshold <= t.LowerThreshold, f+"premigrate_threshold", "Must not be above lower_threshold.")
	}
	return out
}

func include(b *bool) bool { return b == nil || *b }

func conditionGroups(v models.FieldErrors, in []ConditionGroupInput) []models.ConditionGroup {
	out := []models.ConditionGroup{}
	for i, g := range in {
		f := fmt.Sprintf("condition_groups[%d].", i)
		v.Check(strings.TrimSpace(g.Name) != "", f+"name", "This field is required.")
		v.Check(len(g.DateConditions)+len(g.FilesizeConditions)+len(g.FiletypeConditions) > 0, f+"name",
			"A condition group needs at least one date, file size or file type condition.")
		cg := models.ConditionGroup{Name: g.Name, DateConditions: []models.DateCondition{},
			FilesizeConditions: []models.FilesizeCondition{}, FiletypeConditions: []models.FiletypeCondition{}}
		for j, d := range g.DateConditions {
			df := fmt.Sprintf("%sdate_conditions[%d].", f, j)
			v.Check(slices.Contains(dateFields, d.DateField), df+"date_field", "Use atime, mtime or ctime.")
			v.Check(d.OlderOrNewer == "older" || d.OlderOrNewer == "newer", df+"older_or_newer", "Use older or newer.")
			if _, err := site.ParseAge(d.Age); err != nil {
				v.Add(df+"age", err.Error())
			}
			cg.DateConditions = append(cg.DateConditions, models.DateCondition{Age: d.Age, DateField: d.DateField,
				OlderOrNewer: d.OlderOrNewer, Include: include(d.Include)})
		}
		for j, c := range g.FilesizeConditions {
			cf := fmt.Sprintf("%sfilesize_conditions[%d].", f, j)
			v.Check(c.GreaterOrLess == "greater" || c.GreaterOrLess == "less", cf+"greater_or_less", "Use greater or less.")
			v.Check(c.Size != nil, cf+"size", "This field is required.")
			if c.Size != nil {
				v.Check(*c.Size >= 0, cf+"size", "A size in bytes, 0 or more.")
				cg.FilesizeConditions = append(cg.FilesizeConditions, models.FilesizeCondition{GreaterOrLess: c.GreaterOrLess,
					Size: *c.Size, Include: include(c.Include)})
			}
		}
		for j, c := range g.FiletypeConditions {
			cf := fmt.Sprintf("%sfiletype_conditions[%d].", f, j)
			v.Check(len(c.Filetypes) > 0, cf+"filetypes", "At least one file type (extension) is required.")
			for k, ft := range c.Filetypes {
				ext := filetypeExt(ft)
				v.Check(ext != "" && !strings.ContainsAny(ext, "/\x00"), fmt.Sprintf("%sfiletypes[%d]", cf, k), "A file extension such as pdf.")
			}
			cg.FiletypeConditions = append(cg.FiletypeConditions, models.FiletypeCondition{Filetypes: c.Filetypes, Include: include(c.Include)})
		}
		out = append(out, cg)
	}
	return out
}

// filetypeExt is the extension a file type condition names, as the
// site's scan reads it (site.compilePolicy): blanks around it and one
// leading dot dropped, lower case; "" names none, and the site refuses it.
func filetypeExt(given string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimSpace(given), "."))
}

// policyChoice is what of policy p a firing's job carries or acts by:
// a change of it cancels the jobs of earlier firings not yet scanned.
func policyChoice(p *models.Policy) string {
	b, _ := json.Marshal([]any{p.Enabled, p.PolicyType, p.SiteID, p.Spaces, p.OrderBy, p.OrderReverse, p.Threads,
		p.Triggers, p.ConditionGroups})
	return string(b)
}

// cancelUnscannedFirings cancels, in tx, the jobs of policy id's firings
// that have not finished their scan, as the policy's choice changes (its
// conditions, spaces, triggers, order, type; disabled) or the policy is
// deleted: a job carries the policy as it was when it fired (a
// reviewer's finding: a policy disabled and narrowed while its firing's
// job waited for the site's worker then migrated everything the old
// conditions selected). A run asked for now (POST …/run/: no firing key)
// and a resubmit (run 2 on) are an operator's, and go on; so does a job
// past its scan.
func cancelUnscannedFirings(ctx context.Context, tx *Tx, id int64) error {
	var jobs []int64
	err := tx.NewSelect().Model((*models.Job)(nil)).Column("id").
		Where("policy_id = ? AND idempotency_key IS NOT NULL AND NOT dir_walk_complete AND run = 1", id).
		Where("state NOT IN (?)", bun.In([]string{vocab.JobCancelling, vocab.JobSuccess, vocab.JobFailure, vocab.JobCancelled})).
		Scan(ctx, &jobs)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if err := models.MarkCancelling(ctx, tx, j); err != nil {
			return err
		}
		if err := tx.Owe(ctx, KindJobCancel, j, struct{}{}); err != nil {
			return err
		}
	}
	return nil
}

// DeletePolicy removes policy id and its Temporal Schedule.
func (s *Service) DeletePolicy(ctx context.Context, id int64) error {
	return s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		if err := cancelUnscannedFirings(ctx, tx, id); err != nil {
			return err
		}
		if err := models.DeletePolicy(ctx, tx, id); err != nil {
			return err
		}
		return oweSync(ctx, tx, id, workflows.PolicyTemporalID(id))
	})
}

// RunPolicy starts a run of policy id now: a job whose discovery is the
// policy's scan on its site (which, with triggers, selects only what
// brings the pools under their lower thresholds). key, when set, names
// the firing: a second call with it returns the first call's job.
func (s *Service) RunPolicy(ctx context.Context, id int64, key string) (*models.Job, error) {
	p, err := models.GetPolicy(ctx, s.DB, id)
	if err != nil {
		return nil, err
	}
	j, err := s.policyJob(ctx, p)
	if err != nil {
		return nil, err
	}
	if key != "" {
		j.IdempotencyKey = &key
	}
	if _, err := s.CreateJob(ctx, j); err != nil {
		return nil, err
	}
	return j, nil
}

// policyJob builds the record of a run of policy p: its workflow's steps
// for what the scan selects (rule 0), premigrate for what the premigrate
// band of its triggers selects (rule 1), over its spaces' folders.
func (s *Service) policyJob(ctx context.Context, p *models.Policy) (*models.Job, error) {
	if p.Site == nil {
		return nil, models.Invalid("site", "The policy's site no longer exists.")
	}
	wfName := models.PolicyWorkflows[p.PolicyType]
	action, err := s.fileChain(ctx, wfName, true)
	if err != nil {
		return nil, err
	}
	premigrate, err := s.fileChain(ctx, "premigrate", false)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, id := range p.Spaces {
		sp, err := models.GetSpace(ctx, s.DB, id, models.SpaceFilter{})
		if errors.Is(err, models.ErrNotFound) {
			continue // deleted since: the others are still scanned
		} else if err != nil {
			return nil, err
		}
		if !sp.OnSite(p.SiteID) {
			continue // the site left it since: its folder there is gone
		}
		paths = append(paths, sp.Mountpoint)
	}
	sort.Strings(paths)
	if len(paths) == 0 {
		return nil, models.Invalid("spaces", "None of the policy's spaces exists any more on the policy's site.")
	}
	states := []string{"resident", "premigrated"}
	if p.PolicyType == models.PolicyPremigration {
		states = []string{"resident"}
	}
	discovery := models.DiscoveryPolicy
	return &models.Job{Workflow: wfName, Site: p.Site.Name, SiteID: p.SiteID, Queue: vocab.DefaultQueue,
		Fields: map[string]any{}, Paths: paths, Discovery: &discovery,
		Definition: models.JobDefinition{Name: wfName, Discovery: discovery, FilterRules: []models.FilterRule{
			{Type: "file", State: "any", Action: action}, {Type: "file", State: "resident", Action: premigrate}},
			Policy: &models.PolicyRun{ID: p.ID, Groups: p.ConditionGroups, OrderBy: p.OrderBy, Reverse: p.OrderReverse,
				Threads: p.Threads, Triggers: p.Triggers, States: states}},
		OwnerType: models.OwnerSystem, OwnerName: "System", PolicyID: &p.ID,
		FriendlyName: fmt.Sprintf("Policy %s on %s", p.Name, p.Site.Name)}, nil
}

// fileChain is the chain of steps workflow name applies to files; own: the
// policy's own workflow, which must be enabled (its premigrate band's
// need not: disabling premigrate for users does not stop policies).
func (s *Service) fileChain(ctx context.Context, name string, own bool) ([]models.StepSpec, error) {
	wf, err := models.GetWorkflowByName(ctx, s.DB, name)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", name, err)
	}
	if own && !wf.Enabled {
		return nil, models.Invalid("workflow", fmt.Sprintf("The workflow %s, which the policy runs, is disabled.", name))
	}
	for _, r := range wf.FilterRules {
		if r.Type == "file" || r.Type == "all" {
			return r.Action, nil
		}
	}
	return nil, fmt.Errorf("workflow %s has no steps for files", name)
}
