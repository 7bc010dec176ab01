package site

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/workflows/vocab"
)

// Analytics answers "what fills this folder" from a parallel walk of it on
// the site: only the counts travel to the hub, never the file list. The
// walk, not the file index, is the source: an answer is as fresh as the
// disk (the index only knows what its last scan and the jobs since saw),
// and a walk of 100,000 files costs about what du costs on the same tree
// (docs/search-analytics.md has the measurement).

// AnalyticsInput asks what fills a folder (or a file) of the site.
type AnalyticsInput struct {
	Path string `json:"path"`
	// Budget bounds the walk; past it the answer covers what was walked
	// (Complete false). 0: no bound but the activity's own deadline.
	Budget time.Duration `json:"budget"`
	// MaxChildren caps the largest children kept (0: DefaultAnalyticsChildren).
	MaxChildren int `json:"max_children,omitempty"`
}

// DefaultAnalyticsChildren is how many of the largest children an answer
// keeps: enough for pages of a browser, small enough for a payload.
const DefaultAnalyticsChildren = 1000

// AnalyticsBucket is the files and bytes of one band of a breakdown.
type AnalyticsBucket struct {
	Key   string `json:"key"`
	Files int64  `json:"files"`
	Bytes int64  `json:"bytes"`
}

// AnalyticsChild is what one direct child of the folder holds.
type AnalyticsChild struct {
	Name        string    `json:"name"`
	Path        string    `json:"path"`
	Type        string    `json:"type"`
	Files       int64     `json:"files"`
	Directories int64     `json:"directories"`
	Bytes       int64     `json:"bytes"`
	Mtime       time.Time `json:"mtime"` // the newest mtime of a file below (its own for a file)
}

// AnalyticsOutput is the answer: totals, breakdowns of the files (their
// logical bytes: a migrated stub counts its original size), and the
// largest children.
type AnalyticsOutput struct {
	Path string `json:"path"`
	// Complete is false when the walk stopped at its budget.
	Complete bool      `json:"complete"`
	Computed time.Time `json:"computed"`
	// Elapsed is the walk's duration in seconds.
	Elapsed     float64 `json:"elapsed"`
	Files       int64   `json:"files"`
	Directories int64   `json:"directories"`
	Symlinks    int64   `json:"symlinks"`
	Bytes       int64   `json:"bytes"`

	ByState []AnalyticsBucket `json:"by_state"`
	ByAtime []AnalyticsBucket `json:"by_atime"`
	ByMtime []AnalyticsBucket `json:"by_mtime"`
	BySize  []AnalyticsBucket `json:"by_size"`
	ByType  []AnalyticsBucket `json:"by_type"`

	// Children are the largest direct children by bytes (then name), at
	// most MaxChildren of ChildrenTotal.
	Children      []AnalyticsChild `json:"children"`
	ChildrenTotal int              `json:"children_total"`
}

// Age bands of the atime and mtime breakdowns, by upper bound; a time in
// the future counts as new.
var analyticsAges = []struct {
	key string
	max time.Duration
}{
	{"<1d", 24 * time.Hour},
	{"1d-7d", 7 * 24 * time.Hour},
	{"7d-30d", 30 * 24 * time.Hour},
	{"30d-90d", 90 * 24 * time.Hour},
	{"90d-1y", 365 * 24 * time.Hour},
	{"1y-3y", 3 * 365 * 24 * time.Hour},
	{">3y", 1<<63 - 1},
}

// Size bands, by exclusive upper bound in bytes.
var analyticsSizes = []struct {
	key string
	max int64
}{
	{"0", 1},
	{"<4KiB", 4 << 10},
	{"4KiB-1MiB", 1 << 20},
	{"1MiB-100MiB", 100 << 20},
	{"100MiB-1GiB", 1 << 30},
	{"1GiB-10GiB", 10 << 30},
	{">=10GiB", 1<<63 - 1},
}

// analyticsStates are the keys of the state breakdown, in order.
var analyticsStates = []State{Resident, Premigrated, Migrated}

// Keys of the type breakdown beyond extensions.
const (
	analyticsNoExt = "(none)"  // a file name without an extension
	analyticsOther = "(other)" // the types past analyticsMaxTypes
)

// analyticsMaxTypes caps the type breakdown; smaller types add up in
// "(other)".
const analyticsMaxTypes = 50

// Analytics walks a folder of the site (or describes a file) and counts
// what fills it. A path outside the root or reserved is refused as bad
// input (BadListPath: the API answers 400 on "path"); a missing one is
// BadPath (404).
func (a *Activities) Analytics(ctx context.Context, in AnalyticsInput) (*AnalyticsOutput, error) {
	if _, err := cleanRel(in.Path); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBadListPath, err)
	}
	e, _, err := a.Root.Stat(in.Path)
	switch {
	case err == nil:
	case isNotExist(err):
		return nil, badPath(fmt.Errorf("%s: %w", in.Path, os.ErrNotExist))
	case errors.Is(err, ErrOutsideRoot), errors.Is(err, ErrReserved):
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBadListPath, err)
	default:
		return nil, err
	}
	walkCtx, cancel := ctx, context.CancelFunc(func() {})
	if in.Budget > 0 {
		walkCtx, cancel = context.WithTimeout(ctx, in.Budget)
	}
	defer cancel()
	beat := beater(ctx)
	if !activity.IsActivity(ctx) {
		beat = nil
	}
	return AnalyzeTree(walkCtx, a.Root, e, in.MaxChildren, beat)
}

// AnalyzeTree counts what fills e (as Root.Stat described it). A ctx that
// ends by its deadline gives a partial answer; one cancelled fails.
func AnalyzeTree(ctx context.Context, root *Root, e Entry, maxChildren int, progress func(int64)) (*AnalyticsOutput, error) {
	if maxChildren <= 0 {
		maxChildren = DefaultAnalyticsChildren
	}
	start := time.Now()
	c := newAnalyticsCounter(e.Path, start)
	f, err := newFilter(WalkOptions{})
	if err != nil {
		return nil, err
	}
	var seen int64
	err = walkTree(ctx, root, []string{e.Path}, walkConfig{filter: f}, func(items []item) error {
		for i := range items {
			c.add(&items[i])
		}
		seen += int64(len(items))
		if progress != nil {
			progress(seen)
		}
		return nil
	})
	complete := true
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("analytics of %s: %w", e.Path, err)
		}
		complete = false
	}
	out := c.result(maxChildren)
	out.Complete, out.Computed, out.Elapsed = complete, start.UTC(), time.Since(start).Seconds()
	return out, nil
}

// analyticsCounter adds up a walk; the walk calls it from one goroutine.
type analyticsCounter struct {
	base   string // the API path asked
	prefix string // what a path below base starts with
	now    time.Time

	out                 AnalyticsOutput
	states              map[State]*AnalyticsBucket
	atime, mtime, sizes []AnalyticsBucket
	types               map[string]*AnalyticsBucket
	children            map[string]*AnalyticsChild
}

func newAnalyticsCounter(base string, now time.Time) *analyticsCounter {
	c := &analyticsCounter{base: base, prefix: strings.TrimSuffix(base, "/") + "/", now: now,
		states: map[State]*AnalyticsBucket{}, types: map[string]*AnalyticsBucket{}, children: map[string]*AnalyticsChild{}}
	c.out.Path = base
	for _, s := range analyticsStates {
		c.out.ByState = append(c.out.ByState, AnalyticsBucket{Key: string(s)})
	}
	for i := range c.out.ByState {
		c.states[State(c.out.ByState[i].Key)] = &c.out.ByState[i]
	}
	for _, b := range analyticsAges {
		c.atime = append(c.atime, AnalyticsBucket{Key: b.key})
		c.mtime = append(c.mtime, AnalyticsBucket{Key: b.key})
	}
	for _, b := range analyticsSizes {
		c.sizes = append(c.sizes, AnalyticsBucket{Key: b.key})
	}
	return c
}

func ageBand(now time.Time, t int64) int {
	age := now.Sub(time.Unix(0, t))
	for i, b := range analyticsAges {
		if age < b.max {
			return i
		}
	}
	return len(analyticsAges) - 1
}

func sizeBand(n int64) int {
	for i, b := range analyticsSizes {
		if n < b.max {
			return i
		}
	}
	return len(analyticsSizes) - 1
}

// fileType is the breakdown key of a file name: its extension, lower case.
func fileType(name string) string {
	ext := path.Ext(name)
	if ext == "" || ext == name || len(ext) > 17 {
		return analyticsNoExt
	}
	return strings.ToLower(ext[1:])
}

func (c *analyticsCounter) add(it *item) {
	if it.Path == c.base && it.Type == TypeDirectory {
		return // the folder asked about is not part of what fills it
	}
	var child *AnalyticsChild
	if rest, ok := strings.CutPrefix(it.Path, c.prefix); ok && it.Path != c.base {
		name, _, deep := strings.Cut(rest, "/")
		child = c.children[name]
		if child == nil {
			child = &AnalyticsChild{Name: name, Path: c.prefix + name, Type: TypeDirectory}
			c.children[name] = child
		}
		if !deep {
			child.Type = it.Type
		}
	}
	switch it.Type {
	case TypeDirectory:
		c.out.Directories++
		if child != nil && child.Path != it.Path {
			child.Directories++
		}
		return
	case TypeSymlink:
		c.out.Symlinks++
		return
	}
	size := it.Size
	c.out.Files++
	c.out.Bytes += size
	if b := c.states[it.State]; b != nil {
		b.Files++
		b.Bytes += size
	}
	atime := it.atime
	if atime == 0 {
		atime = it.Mtime.UnixNano()
	}
	for _, b := range []*AnalyticsBucket{&c.atime[ageBand(c.now, atime)], &c.mtime[ageBand(c.now, it.Mtime.UnixNano())],
		&c.sizes[sizeBand(size)]} {
		b.Files++
		b.Bytes += size
	}
	typ := fileType(path.Base(it.Path))
	t := c.types[typ]
	if t == nil {
		t = &AnalyticsBucket{Key: typ}
		c.types[typ] = t
	}
	t.Files++
	t.Bytes += size
	if child != nil {
		child.Files++
		child.Bytes += size
		if it.Mtime.After(child.Mtime) {
			child.Mtime = it.Mtime.UTC()
		}
	}
}

// result orders the breakdowns: fixed bands in their order, types and
// children by bytes descending, then key.
func (c *analyticsCounter) result(maxChildren int) *AnalyticsOutput {
	out := c.out
	out.ByAtime, out.ByMtime, out.BySize = c.atime, c.mtime, c.sizes
	types := make([]AnalyticsBucket, 0, len(c.types))
	for _, t := range c.types {
		types = append(types, *t)
	}
	sort.Slice(types, func(i, j int) bool {
		if types[i].Bytes != types[j].Bytes {
			return types[i].Bytes > types[j].Bytes
		}
		return types[i].Key < types[j].Key
	})
	if len(types) > analyticsMaxTypes {
		other := AnalyticsBucket{Key: analyticsOther}
		for _, t := range types[analyticsMaxTypes:] {
			other.Files += t.Files
			other.Bytes += t.Bytes
		}
		types = append(types[:analyticsMaxTypes], other)
	}
	out.ByType = types
	children := make([]AnalyticsChild, 0, len(c.children))
	for _, ch := range c.children {
		children = append(children, *ch)
	}
	sort.Slice(children, func(i, j int) bool {
		if children[i].Bytes != children[j].Bytes {
			return children[i].Bytes > children[j].Bytes
		}
		return children[i].Name < children[j].Name
	})
	out.ChildrenTotal = len(children)
	if len(children) > maxChildren {
		children = children[:maxChildren]
	}
	out.Children = children
	return &out
}
