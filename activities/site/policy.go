package site

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/workflows/vocab"
)

// A policy scan selects, on the site, the files a policy's condition
// groups match, orders them and cuts the selection where its triggers say,
// then writes it as the job's batch files (see docs/policies-scan.md).

// PolicySelect is what a policy run asks the site to select.
type PolicySelect struct {
	// Groups select a file when it matches any of them; none selects
	// every file.
	Groups []PolicyGroup
	// OrderBy is atime, mtime, ctime, size or path; "" is atime.
	OrderBy string
	// Reverse orders newest, largest or last path first.
	Reverse bool
	// Threads is the number of parallel walkers; 0 is the walk's default.
	Threads int
	// Triggers decide whether the policy fires and where the selection is
	// cut; none selects every matching file.
	Triggers []PolicyTrigger
	// States are the migration states a file may be in to be selected
	// (resident and premigrated for a migration policy, resident for a
	// premigration); none allows every state.
	States []string
}

// PolicyGroup matches a file when the file matches all its conditions.
type PolicyGroup struct {
	Name  string
	Dates []DateCondition
	Sizes []SizeCondition
	Types []FileTypeCondition
}

// DateCondition compares one of a file's times with the scan's start time
// less Age. A condition with Include false is negated.
type DateCondition struct {
	Field        string // atime|mtime|ctime
	OlderOrNewer string // older|newer
	Age          string // see ParseAge
	Include      bool
}

// SizeCondition compares a file's size (a stub's original size) with Size
// bytes. A condition with Include false is negated.
type SizeCondition struct {
	GreaterOrLess string // greater|less
	Size          int64
	Include       bool
}

// FileTypeCondition matches files whose name ends with one of FileTypes,
// extensions compared case-insensitively with or without their leading dot
// ("pdf", ".PDF", "tar.gz"). A condition with Include false is negated.
type FileTypeCondition struct {
	FileTypes []string
	Include   bool
}

// PolicyTrigger fires a policy when the pool's utilisation is above Upper,
// and cuts the selection where it falls to Lower (then Premigrate).
type PolicyTrigger struct {
	Pool string
	// Lower, Upper and Premigrate are percentages of the pool's size.
	Lower, Upper, Premigrate float64
	// MaxUtilisation is the GPFS LIMIT of a destination pool; targets are
	// external here, so it is validated and reported but cuts nothing.
	MaxUtilisation float64
}

// PoolUtilisation is one trigger's measurement during a policy scan.
type PoolUtilisation struct {
	Pool        string
	Used, Total int64
	Percent     float64
	// Above is true when Percent exceeded the trigger's upper threshold.
	Above bool
}

// Order keys of a policy scan.
const (
	OrderAtime = "atime"
	OrderMtime = "mtime"
	OrderCtime = "ctime"
	OrderSize  = "size"
	OrderPath  = "path"
)

// Rules of a policy job's batches: the policy's action, and the
// premigration of the band between the lower and premigrate thresholds.
const (
	PolicyRuleAction     = 0
	PolicyRulePremigrate = 1
)

// Age units: a month is 30 days and a year 365 days.
var ageUnits = map[byte]time.Duration{
	'h': time.Hour,
	'd': 24 * time.Hour,
	'w': 7 * 24 * time.Hour,
	'm': 30 * 24 * time.Hour,
	'y': 365 * 24 * time.Hour,
}

// ParseAge reads an age: a whole number followed by h (hours), d (days),
// w (weeks), m (months of 30 days) or y (years of 365 days); a bare number
// is days. "90d", "12h", "2y" and "30" are ages.
func ParseAge(s string) (time.Duration, error) {
	bad := func(why string) error {
		return fmt.Errorf("age %q: %s (a whole number followed by h, d, w, m or y, e.g. \"90d\"; a bare number is days)", s, why)
	}
	if s == "" {
		return 0, bad("empty")
	}
	num, unit := s, time.Duration(24*time.Hour)
	if u, ok := ageUnits[s[len(s)-1]]; ok {
		num, unit = s[:len(s)-1], u
	}
	if num == "" {
		return 0, bad("no number")
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0, bad("not a whole number with a known unit")
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > int64(math.MaxInt64/unit) {
		return 0, bad("too large")
	}
	return time.Duration(n) * unit, nil
}

// errPolicy marks a policy the site refuses; it is not worth a retry.
func errPolicy(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("policy: "+format, args...), vocab.ErrBadInput, nil)
}

// policyFile is what a scan keeps of a selected file: about 40 bytes plus
// the path.
type policyFile struct {
	path  string
	key   int64 // the order key: Unix ns of a time, or the size
	size  int64
	state State
}

// counted is what taking the file frees: nothing for a stub.
func (f *policyFile) counted() int64 {
	if f.state == Migrated {
		return 0
	}
	return f.size
}

// dateCond, sizeCond and typeCond are conditions ready to evaluate.
type dateCond struct {
	field   string
	older   bool
	cutoff  int64 // Unix ns: older is t < cutoff, newer is t >= cutoff
	include bool
}

type sizeCond struct {
	greater bool
	size    int64
	include bool
}

type typeCond struct {
	suffixes []string // lower-case, with the dot
	include  bool
}

type matchGroup struct {
	dates []dateCond
	sizes []sizeCond
	types []typeCond
}

// policyScan is a validated PolicySelect with one now.
type policyScan struct {
	groups  []matchGroup
	orderBy string
	reverse bool
	states  []State
}

// compilePolicy validates sel and fixes its cutoffs at now.
func compilePolicy(sel *PolicySelect, now time.Time) (*policyScan, error) {
	p := &policyScan{orderBy: cmp.Or(sel.OrderBy, OrderAtime), reverse: sel.Reverse}
	switch p.orderBy {
	case OrderAtime, OrderMtime, OrderCtime, OrderSize, OrderPath:
	default:
		return nil, errPolicy("unknown order %q (atime, mtime, ctime, size or path)", sel.OrderBy)
	}
	if sel.Threads < 0 {
		return nil, errPolicy("threads %d is negative", sel.Threads)
	}
	for _, s := range sel.States {
		switch st := State(s); st {
		case Resident, Premigrated, Migrated:
			p.states = append(p.states, st)
		default:
			return nil, errPolicy("unknown state %q", s)
		}
	}
	for gi, g := range sel.Groups {
		name := cmp.Or(g.Name, fmt.Sprintf("#%d", gi+1))
		if len(g.Dates)+len(g.Sizes)+len(g.Types) == 0 {
			return nil, errPolicy("condition group %s has no conditions", name)
		}
		var m matchGroup
		for _, d := range g.Dates {
			switch d.Field {
			case OrderAtime, OrderMtime, OrderCtime:
			default:
				return nil, errPolicy("condition group %s: unknown date field %q (atime, mtime or ctime)", name, d.Field)
			}
			if d.OlderOrNewer != "older" && d.OlderOrNewer != "newer" {
				return nil, errPolicy("condition group %s: older_or_newer %q is neither older nor newer", name, d.OlderOrNewer)
			}
			age, err := ParseAge(d.Age)
			if err != nil {
				return nil, errPolicy("condition group %s: %v", name, err)
			}
			m.dates = append(m.dates, dateCond{field: d.Field, older: d.OlderOrNewer == "older",
				cutoff: now.Add(-age).UnixNano(), include: d.Include})
		}
		for _, s := range g.Sizes {
			if s.GreaterOrLess != "greater" && s.GreaterOrLess != "less" {
				return nil, errPolicy("condition group %s: greater_or_less %q is neither greater nor less", name, s.GreaterOrLess)
			}
			if s.Size < 0 {
				return nil, errPolicy("condition group %s: size %d is negative", name, s.Size)
			}
			m.sizes = append(m.sizes, sizeCond{greater: s.GreaterOrLess == "greater", size: s.Size, include: s.Include})
		}
		for _, t := range g.Types {
			var tc typeCond
			for _, given := range t.FileTypes {
				ext := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(given), "."))
				if ext == "" || strings.Contains(ext, "/") {
					return nil, errPolicy("condition group %s: file type %q is not an extension", name, given)
				}
				tc.suffixes = append(tc.suffixes, "."+ext)
			}
			if len(tc.suffixes) == 0 {
				return nil, errPolicy("condition group %s: a file type condition names no file types", name)
			}
			tc.include = t.Include
			m.types = append(m.types, tc)
		}
		p.groups = append(p.groups, m)
	}
	for _, t := range sel.Triggers {
		for _, v := range []struct {
			name string
			v    float64
		}{{"lower", t.Lower}, {"upper", t.Upper}, {"premigrate", t.Premigrate}, {"max_utilisation", t.MaxUtilisation}} {
			if math.IsNaN(v.v) || v.v < 0 || v.v > 100 {
				return nil, errPolicy("trigger on pool %q: %s threshold %v is not a percentage", t.Pool, v.name, v.v)
			}
		}
		if t.Pool == "" {
			return nil, errPolicy("a trigger names no pool")
		}
		if t.Lower > t.Upper {
			return nil, errPolicy("trigger on pool %q: lower threshold %v is above the upper one %v", t.Pool, t.Lower, t.Upper)
		}
	}
	return p, nil
}

// matches reports whether it (a regular file) is selected.
func (p *policyScan) matches(it *item) bool {
	if len(p.groups) == 0 {
		return true
	}
	for i := range p.groups {
		if p.groups[i].matches(it) {
			return true
		}
	}
	return false
}

// cannotMatch reports, from its lstat alone, that a file matches no group:
// it checks every condition but the sizes, which for a stub depend on its
// state record. The walk then skips the file's state lookup.
func (p *policyScan) cannotMatch(rel string, fi fs.FileInfo) bool {
	if len(p.groups) == 0 {
		return false
	}
	it := item{Entry: Entry{Path: rel, Mtime: fi.ModTime()}}
	it.atime, it.ctime = fileTimes(fi)
	for i := range p.groups {
		if p.groups[i].matchesBut(&it, true) {
			return false
		}
	}
	return true
}

func (g *matchGroup) matches(it *item) bool { return g.matchesBut(it, false) }

// matchesBut is matches, ignoring the size conditions when skipSizes.
func (g *matchGroup) matchesBut(it *item, skipSizes bool) bool {
	for _, d := range g.dates {
		var t int64
		switch d.field {
		case OrderAtime:
			t = it.atime
		case OrderMtime:
			t = it.Mtime.UnixNano()
		default:
			t = it.ctime
		}
		if ok := (t < d.cutoff) == d.older; ok != d.include {
			return false
		}
	}
	for _, s := range g.sizes {
		if skipSizes {
			break
		}
		ok := it.Size < s.size
		if s.greater {
			ok = it.Size > s.size
		}
		if ok != s.include {
			return false
		}
	}
	if len(g.types) > 0 {
		name := strings.ToLower(it.Path[strings.LastIndexByte(it.Path, '/')+1:])
		for _, t := range g.types {
			ok := false
			for _, suf := range t.suffixes {
				if len(name) > len(suf) && strings.HasSuffix(name, suf) {
					ok = true
					break
				}
			}
			if ok != t.include {
				return false
			}
		}
	}
	return true
}

// key is it's order key.
func (p *policyScan) key(it *item) int64 {
	switch p.orderBy {
	case OrderAtime:
		return it.atime
	case OrderMtime:
		return it.Mtime.UnixNano()
	case OrderCtime:
		return it.ctime
	case OrderSize:
		return it.Size
	}
	return 0 // path: compared by path alone
}

// compare orders two selected files; ties are broken by path, ascending
// whatever Reverse says, so the order is total and repeatable.
func (p *policyScan) compare(a, b *policyFile) int {
	if p.orderBy == OrderPath {
		c := strings.Compare(a.path, b.path)
		if p.reverse {
			c = -c
		}
		return c
	}
	c := cmp.Compare(a.key, b.key)
	if p.reverse {
		c = -c
	}
	if c == 0 {
		c = strings.Compare(a.path, b.path)
	}
	return c
}

// fileTimes returns a file's atime and ctime in Unix ns, or its mtime
// twice where the platform does not report them.
func fileTimes(fi fs.FileInfo) (atime, ctime int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if a, c := accessChangeTimes(st); !a.IsZero() {
			return a.UnixNano(), c.UnixNano()
		}
	}
	m := fi.ModTime().UnixNano()
	return m, m
}

// cut is how much the selection must free, from the triggers that fired.
type cut struct {
	fired bool
	// action is the bytes the policy's action must free (rule 0);
	// premigrate, when larger, the bytes after which rule 1 stops.
	action, premigrate int64
}

// measure reads each trigger's pool and decides whether the policy fires
// and how much it must free; with several triggers above their upper
// thresholds the largest amounts win.
func (a *Activities) measure(ctx context.Context, triggers []PolicyTrigger) (cut, []PoolUtilisation, error) {
	var c cut
	var report []PoolUtilisation
	for _, t := range triggers {
		used, total, err := a.measurePool(ctx, t.Pool)
		if err != nil {
			return cut{}, nil, err
		}
		u := PoolUtilisation{Pool: t.Pool, Used: used, Total: total}
		if total > 0 {
			u.Percent = float64(used) / float64(total) * 100
		}
		u.Above = total > 0 && u.Percent > t.Upper
		report = append(report, u)
		if !u.Above {
			continue
		}
		c.fired = true
		// used − taken ≤ p% of total ⇔ taken ≥ used − ⌊p% of total⌋.
		free := func(pct float64) int64 { return max(used-int64(math.Floor(pct*float64(total)/100)), 0) }
		c.action = max(c.action, free(t.Lower))
		if t.Premigrate < t.Lower {
			c.premigrate = max(c.premigrate, free(t.Premigrate))
		}
	}
	c.premigrate = max(c.premigrate, c.action)
	return c, report, nil
}

// measurePool measures a pool through the Utilisation hook, or with statfs
// of the root for the pool "system".
func (a *Activities) measurePool(ctx context.Context, pool string) (used, total int64, err error) {
	if a.Utilisation != nil {
		used, total, err = a.Utilisation(ctx, pool)
		if err != nil {
			return 0, 0, fmt.Errorf("measure pool %q: %w", pool, err)
		}
		return used, total, nil
	}
	pools, err := a.CJStatPools(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, p := range pools {
		if p.Name == pool {
			return p.UsedSpace, p.Capacity, nil
		}
	}
	return 0, 0, errPolicy("unknown pool %q on site %s", pool, a.Site)
}

// foreignVolumes lists, as API paths, the mount points beneath the site
// root, reachable there (fsutil.Visible), of filesystems other than the
// root's: another device number in mountinfo. A btrfs subvolume (its own
// device number in stat, but the root's pool and the root's number in
// mountinfo: compared by stat, its files were never taken; a reviewer's
// finding) and a folder of the root's filesystem bound beneath it are
// the root's.
func foreignVolumes(root string) []string {
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	processRoot, _, _ := fsutil.MountIDOf("/")
	rootID, _, _ := fsutil.MountIDOf(root)
	mounts := fsutil.Visible(fsutil.Mounts(), processRoot)
	own, at := "", -1
	for _, m := range mounts {
		switch {
		case rootID != 0 && m.ID == rootID:
			own, at = m.Dev, len(root)+1
		case (m.Point == root || strings.HasPrefix(root, strings.TrimSuffix(m.Point, "/")+"/")) && len(m.Point) > at:
			own, at = m.Dev, len(m.Point)
		}
	}
	var out []string
	for _, m := range mounts {
		if rel, ok := strings.CutPrefix(m.Point, strings.TrimSuffix(root, "/")+"/"); ok && m.Dev != own {
			out = append(out, "/"+rel)
		}
	}
	return out
}

// beneathAny tells whether API path p is one of folders or beneath one.
func beneathAny(p string, folders []string) bool {
	for _, f := range folders {
		if p == f || strings.HasPrefix(p, f+"/") {
			return true
		}
	}
	return false
}

// selection collects the files a scan selects. Without a bound it keeps
// them all; with one it keeps only the shortest prefix (in scan order) of
// the files seen so far whose counted sizes reach the bound, as a heap
// whose top is the last file of that prefix.
type selection struct {
	p       *policyScan
	bounded bool
	need    int64
	sum     int64
	files   []policyFile
}

func (s *selection) Len() int           { return len(s.files) }
func (s *selection) Less(i, j int) bool { return s.p.compare(&s.files[i], &s.files[j]) > 0 }
func (s *selection) Swap(i, j int)      { s.files[i], s.files[j] = s.files[j], s.files[i] }
func (s *selection) Push(x any)         { s.files = append(s.files, x.(policyFile)) }
func (s *selection) Pop() any {
	n := len(s.files) - 1
	f := s.files[n]
	s.files = s.files[:n]
	return f
}

func (s *selection) add(f policyFile) {
	if !s.bounded {
		s.files = append(s.files, f)
		return
	}
	if s.sum >= s.need && len(s.files) > 0 && s.p.compare(&f, &s.files[0]) > 0 {
		return // comes after a prefix that already frees enough
	}
	heap.Push(s, f)
	s.sum += f.counted()
	for len(s.files) > 0 && s.sum-s.files[0].counted() >= s.need {
		s.sum -= s.files[0].counted()
		heap.Pop(s)
	}
}

// policyWalkers is a policy scan's default number of walkers: a scan of
// local disks is bound by the CPU (stat and attribute reads of cached
// inodes), where twice the cores beat four times (measured on 2 cores);
// a policy over a network filesystem, where walkers wait, sets threads.
func policyWalkers() int { return 2 * runtime.GOMAXPROCS(0) }

// compilePolicy compiles sel for a scan starting now (the site's clock).
func (a *Activities) compilePolicy(sel *PolicySelect) (*policyScan, error) {
	now := time.Now()
	if a.Now != nil {
		now = a.Now()
	}
	return compilePolicy(sel, now)
}

// discoverPolicy runs a policy scan over in.Paths into w: rule 0 takes the
// files the policy's action applies to, rule 1 the premigration band. A
// policy whose triggers do not fire writes nothing.
func (a *Activities) discoverPolicy(ctx context.Context, in DiscoverInput, w *batchWriter) error {
	if in.Policy == nil {
		return errPolicy("policy discovery without a policy")
	}
	p, err := a.compilePolicy(in.Policy)
	if err != nil {
		return err
	}
	c := cut{fired: true}
	if len(in.Policy.Triggers) > 0 {
		c, w.out.Utilisation, err = a.measure(ctx, in.Policy.Triggers)
		if err != nil {
			return err
		}
	}
	w.out.Fired = c.fired
	if !c.fired {
		return nil
	}
	// A space folder the site cannot take fails alone, as in a recursive
	// discovery; the others are scanned.
	var walk []string
	refused := map[string]bool{}
	for _, path := range in.Paths {
		err := a.checkGiven(path)
		if err == nil && a.isSymlink(path) {
			// A scan neither follows nor selects symlinks: the folder
			// would look empty, and the run like one that found nothing.
			err = errSymlinkSpace
		}
		if err != nil {
			if !refused[path] {
				refused[path] = true
				w.out.Failed = append(w.out.Failed, Outcome{Path: path, State: OutcomeFailure, Message: a.pathMessage(err)})
			}
			continue
		}
		walk = append(walk, path)
	}
	if len(walk) == 0 {
		return nil
	}
	f, err := newFilter(WalkOptions{Include: in.Include, Exclude: in.Exclude, Types: []string{TypeFile}, States: p.states})
	if err != nil {
		return errPolicy("%v", err)
	}
	sel := &selection{p: p, bounded: len(in.Policy.Triggers) > 0, need: c.premigrate}
	// Triggers measure the pool of the site root's filesystem: a file on
	// another filesystem mounted beneath the root frees nothing there.
	// Counted, the pool never fell below its threshold, and each check
	// took another slice of that volume until all of it was migrated (a
	// reviewer's finding); such files are left to a policy without
	// triggers.
	var foreign []string
	if sel.bounded {
		foreign = foreignVolumes(a.Root.Dir())
	}
	err = walkTree(ctx, a.Root, walk, walkConfig{workers: cmp.Or(in.Policy.Threads, policyWalkers()), filter: f, skipFile: p.cannotMatch, useMarks: true}, func(items []item) error {
		for i := range items {
			it := &items[i]
			if p.matches(it) && !beneathAny(it.Path, foreign) && !w.unnamable(it.Path) { // not counted toward the trigger's need either
				sel.add(policyFile{path: it.Path, key: p.key(it), size: it.Size, state: it.State})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var taken int64
	for _, f := range sel.sorted() {
		rule := PolicyRuleAction
		if sel.bounded && taken >= c.action {
			// The selection ends where the premigration band does.
			rule = PolicyRulePremigrate
		}
		taken += f.counted()
		if err := w.add(rule, batchEntry{Path: f.path, Type: TypeFile, State: f.state, Size: f.size}); err != nil {
			return err
		}
	}
	return w.close(PolicyRulePremigrate + 1)
}

// rediscoverPolicy puts the paths of a resubmitted policy job (those its
// earlier runs left undone) back in its batches when the policy still
// selects them (its conditions, and the states it acts on, as they are
// now); the others are reported skipped. They go to rule 0 for a policy
// without triggers, else to the premigration band (rule 1): which of them
// the first run's band only premigrated is not known here, and a resubmit
// must never release what the policy meant to keep resident.
func (a *Activities) rediscoverPolicy(ctx context.Context, in DiscoverInput, w *batchWriter) error {
	p, err := a.compilePolicy(in.Policy)
	if err != nil {
		return err
	}
	f, err := newFilter(WalkOptions{Include: in.Include, Exclude: in.Exclude, Types: []string{TypeFile}, States: p.states})
	if err != nil {
		return errPolicy("%v", err)
	}
	rule := PolicyRuleAction
	if len(in.Policy.Triggers) > 0 {
		rule = PolicyRulePremigrate
	}
	seen, err := a.batchPaths(ctx, in.JobID, in.Skip)
	if err != nil {
		return err
	}
	var walk, files []string
	for _, path := range in.Paths {
		e, _, err := a.Root.Stat(path)
		switch {
		case err != nil:
			w.out.Failed = append(w.out.Failed, Outcome{Path: path, State: OutcomeFailure, Message: a.pathMessage(err)})
		case !seen[e.Path]:
			seen[e.Path] = true
			walk = append(walk, e.Path) // a folder (a space refused before) is scanned again
			if e.Type == TypeFile {
				files = append(files, e.Path)
			}
		}
	}
	selected := map[string]bool{}
	err = walkTree(ctx, a.Root, walk, walkConfig{workers: 1, filter: f, missingOK: true}, func(items []item) error {
		for i := range items {
			it := &items[i]
			if p.matches(it) && !selected[it.Path] {
				selected[it.Path] = true
				if err := w.add(rule, batchEntry{Path: it.Path, Type: TypeFile, State: it.State, Size: it.Size}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	for _, path := range files {
		if !selected[path] {
			w.out.Failed = append(w.out.Failed, Outcome{Path: path, State: OutcomeSkipped,
				Message: "no longer selected by the policy (its conditions, or the states it acts on)"})
		}
	}
	if err != nil {
		return err
	}
	return w.close(PolicyRulePremigrate + 1)
}
