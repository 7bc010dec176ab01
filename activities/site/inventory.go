package site

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/thehub/hub/activities/targets"
	"github.com/thehub/hub/workflows/vocab"
)

// Inventory is what InventorySite reports about the site: counts over the
// whole root, its storage pools and the reporting server.
type Inventory struct {
	Directories int64 `json:"directories"`
	Files       int64 `json:"files"`
	// Hydrated files have their data locally (resident or premigrated);
	// Stubbed files are migrated stubs whose data lives on a target.
	Hydrated int64           `json:"hydrated"`
	Stubbed  int64           `json:"stubbed"`
	Pools    []InventoryPool `json:"pools"`
	Server   InventoryServer `json:"server"`
}

// InventoryPool is one filesystem of the site as statfs sees it.
type InventoryPool struct {
	Name       string `json:"name"`
	Filesystem string `json:"filesystem"`
	Capacity   int64  `json:"capacity"`
	FreeSpace  int64  `json:"free_space"`
	UsedSpace  int64  `json:"used_space"`
	IsDefault  bool   `json:"is_default"`
}

// InventoryServer is the host that answered, with its network interfaces.
type InventoryServer struct {
	Hostname   string                        `json:"hostname"`
	Interfaces map[string]InventoryInterface `json:"interfaces"`
}

// InventoryInterface is one network interface of a server.
type InventoryInterface struct {
	MAC       string   `json:"mac"`
	MTU       int      `json:"mtu"`
	Up        bool     `json:"up"`
	Addresses []string `json:"addresses"`
}

// inventoryBatch bounds the entries between two heartbeats of a walk.
const inventoryBatch = 5000

// InventorySite counts directories and files under the root (by migration
// state), measures the root's filesystem and describes this server. It
// heartbeats after every batch of entries, so a cancelled refresh stops soon.
func (a *Activities) InventorySite(ctx context.Context) (Inventory, error) {
	var inv Inventory
	err := Walk(ctx, a.Root, []string{"/"}, WalkOptions{BatchSize: inventoryBatch}, func(batch []Entry) error {
		for _, e := range batch {
			switch e.Type {
			case TypeDirectory:
				inv.Directories++
			case TypeFile:
				inv.Files++
				if e.State == Migrated {
					inv.Stubbed++
				} else {
					inv.Hydrated++
				}
			}
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, inv.Files+inv.Directories)
		}
		return nil
	})
	if err != nil {
		return inv, fmt.Errorf("count files of site %s: %w", a.Site, err)
	}
	// The pool behind the root is named like GPFS's default pool, as the
	// C+J API reports it, so both APIs agree on pool names.
	p, err := cjStatfs(a.Root.Dir())
	if err != nil {
		return inv, fmt.Errorf("statfs %s: %w", a.Root.Dir(), err)
	}
	inv.Pools = []InventoryPool{{Name: cjPoolName, Filesystem: p.Filesystem, Capacity: p.Capacity,
		FreeSpace: p.FreeSpace, UsedSpace: p.UsedSpace, IsDefault: true}}
	inv.Server = InventoryServer{Hostname: a.Node, Interfaces: interfaces()}
	if inv.Server.Hostname == "" {
		inv.Server.Hostname, _ = os.Hostname()
	}
	return inv, nil
}

func interfaces() map[string]InventoryInterface {
	out := map[string]InventoryInterface{}
	ifs, err := net.Interfaces()
	if err != nil {
		return out
	}
	for _, it := range ifs {
		ii := InventoryInterface{MAC: it.HardwareAddr.String(), MTU: it.MTU, Up: it.Flags&net.FlagUp != 0, Addresses: []string{}}
		if addrs, err := it.Addrs(); err == nil {
			for _, ad := range addrs {
				ii.Addresses = append(ii.Addresses, ad.String())
			}
		}
		out[it.Name] = ii
	}
	return out
}

// SpaceDirInput names a space's directory: Mountpoint is root-relative
// ("/spaces/projects"); Mode, when it is an octal string such as "0770",
// is applied to a directory this call creates.
type SpaceDirInput struct {
	Mountpoint string `json:"mountpoint"`
	Mode       string `json:"mode"`
}

// Outcomes of the space directory activities.
const (
	SpaceDirCreated = "created" // the directory was made
	SpaceDirExisted = "exists"  // it was already there; left as it was
	SpaceDirRemoved = "removed" // it was empty and is gone
	SpaceDirAbsent  = "absent"  // there was nothing to remove
	SpaceDirKept    = "kept"    // it holds data, so it stays: data is never deleted with a space
)

// SpaceDirResult says what a space directory activity did, on which path.
type SpaceDirResult struct {
	Outcome string `json:"outcome"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// spaceDir resolves a mountpoint inside the root; the root itself, the
// hub's private folder and the snapshots' are refused.
func (a *Activities) spaceDir(mountpoint string) (string, error) {
	rel, err := cleanRel(mountpoint)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	}
	if rel == "" || rel == hubDir || strings.HasPrefix(rel, hubDir+"/") || rel == cjSnapshotsDir || strings.HasPrefix(rel, cjSnapshotsDir+"/") {
		err := fmt.Errorf("mountpoint %q: not a usable space directory", mountpoint)
		return "", temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	}
	abs, err := a.Root.Resolve(rel)
	if err != nil {
		return "", temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	}
	if abs == a.Root.Dir() {
		err := fmt.Errorf("mountpoint %q resolves to the site root", mountpoint)
		return "", temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	}
	return abs, nil
}

// CreateSpaceDir makes the space's directory (and missing parents) under
// the root. An existing directory is success; anything else in the way
// fails without retries.
func (a *Activities) CreateSpaceDir(ctx context.Context, in SpaceDirInput) (SpaceDirResult, error) {
	res := SpaceDirResult{Path: "/" + strings.TrimLeft(path.Clean("/"+in.Mountpoint), "/")}
	if _, err := a.spaceDir(in.Mountpoint); err != nil {
		return res, err
	}
	if fi, err := a.Root.lstat(strings.TrimPrefix(res.Path, "/")); err == nil {
		if !fi.IsDir() {
			err := fmt.Errorf("cannot create %s on site %s: a file is in the way", res.Path, a.Site)
			return res, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
		}
		res.Outcome, res.Message = SpaceDirExisted, fmt.Sprintf("%s already exists on site %s", res.Path, a.Site)
		return res, nil
	}
	// Created and set beneath the root: the mode is set through the
	// folder's descriptor, never by a name a user could swap for a link.
	rel := strings.TrimPrefix(res.Path, "/")
	if err := a.Root.mkdirAll(rel); err != nil {
		return res, spaceDirErr(fmt.Errorf("create %s: %w", res.Path, err))
	}
	if mode, err := strconv.ParseUint(strings.TrimSpace(in.Mode), 8, 32); err == nil && mode <= 0o7777 {
		d, err := openBeneath(a.Root.f, rel, os.O_RDONLY|oDirectory, 0)
		if err == nil {
			err = d.Chmod(fileMode(mode))
			d.Close()
		}
		if err != nil {
			return res, spaceDirErr(fmt.Errorf("set mode %s on %s: %w", in.Mode, res.Path, err))
		}
	}
	res.Outcome, res.Message = SpaceDirCreated, fmt.Sprintf("created %s on site %s", res.Path, a.Site)
	return res, nil
}

// fileMode turns permission bits written in octal (with setuid, setgid and
// sticky bits in the Unix positions) into an fs.FileMode.
func fileMode(m uint64) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// RemoveSpaceDir removes the space's directory only when it is empty: a
// directory holding anything is kept and reported as kept, never deleted.
func (a *Activities) RemoveSpaceDir(ctx context.Context, in SpaceDirInput) (SpaceDirResult, error) {
	res := SpaceDirResult{Path: "/" + strings.TrimLeft(path.Clean("/"+in.Mountpoint), "/")}
	if _, err := a.spaceDir(in.Mountpoint); err != nil {
		return res, err
	}
	rel := strings.TrimPrefix(res.Path, "/")
	fi, err := a.Root.lstat(rel)
	switch {
	case isNotExist(err):
		res.Outcome, res.Message = SpaceDirAbsent, fmt.Sprintf("%s does not exist on site %s", res.Path, a.Site)
		return res, nil
	case err != nil:
		return res, spaceDirErr(fmt.Errorf("stat %s: %w", res.Path, err))
	case !fi.IsDir():
		res.Outcome, res.Message = SpaceDirKept, fmt.Sprintf("%s on site %s is not a directory; left in place", res.Path, a.Site)
		return res, nil
	}
	// rmdir is atomic: it either removes an empty directory or fails, so
	// a file written meanwhile is never lost. It runs in the folder's
	// parent held open beneath the root, never on its name.
	if err := a.Root.removeDir(rel); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			res.Outcome, res.Message = SpaceDirKept, fmt.Sprintf("%s on site %s is not empty; kept with its data", res.Path, a.Site)
			return res, nil
		}
		return res, spaceDirErr(fmt.Errorf("remove %s: %w", res.Path, err))
	}
	res.Outcome, res.Message = SpaceDirRemoved, fmt.Sprintf("removed empty %s on site %s", res.Path, a.Site)
	return res, nil
}

// spaceDirErr makes errors that retrying cannot fix non-retryable.
func spaceDirErr(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EROFS) {
		return temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrSpaceDir, err)
	}
	return err
}

// TargetsConfigDir is the folder of the site's configuration folder that
// holds one <bucket>.json per bucket configured on the site.
const TargetsConfigDir = "targets"

// BucketConfigInput names a bucket whose settings a site drops.
type BucketConfigInput struct {
	Bucket string `json:"bucket"`
}

// BucketConfigResult says whether there was a settings file to remove.
type BucketConfigResult struct {
	Removed bool   `json:"removed"`
	File    string `json:"file"`
}

// RemoveBucketConfig deletes <config>/targets/<bucket>.json. An absent file
// is success, so retries and repeated deletions are harmless.
func (a *Activities) RemoveBucketConfig(ctx context.Context, in BucketConfigInput) (BucketConfigResult, error) {
	name := in.Bucket
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name || strings.ContainsAny(name, `/\`) {
		err := fmt.Errorf("bucket name %q cannot name a settings file", name)
		return BucketConfigResult{}, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBucketConfig, err)
	}
	file := filepath.Join(a.ConfigDir, TargetsConfigDir, name+".json")
	res := BucketConfigResult{File: file}
	removed, err := a.removeConfig(path.Join(TargetsConfigDir, name+".json"))
	if err != nil {
		return res, fmt.Errorf("remove settings of bucket %s on site %s: %w", name, a.Site, err)
	}
	res.Removed = removed
	return res, nil
}

// TargetListInput asks for one page of a target folder's listing. Path is a
// folder ("projects/2024"), an object, or a glob in its last segment
// ("projects/*.tif"); globs match one level only, never recursively.
type TargetListInput struct {
	Config   targets.Config `json:"config"`
	Path     string         `json:"path"`
	MaxItems int            `json:"max_items"`
	Marker   string         `json:"marker"`
}

// TargetEntry is a folder or an object of a target listing.
type TargetEntry struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Size int64  `json:"size"`
	Type string `json:"type"` // TypeFile or TypeDirectory
}

// TargetListing is one page of a target listing. NextMarker is empty on
// the last page.
type TargetListing struct {
	Path        string        `json:"path"`
	Marker      string        `json:"marker"`
	NextMarker  string        `json:"next_marker"`
	Directories []TargetEntry `json:"directories"`
	Files       []TargetEntry `json:"files"`
}

// Bounds of a listing page.
const (
	DefaultListItems = 100
	MaxListItems     = 1000
)

// ErrBadListPath is returned (wrapped) for a listing path with a glob
// before its last segment or one that climbs out of the target.
var ErrBadListPath = errors.New("invalid listing path")

// afterAll sorts after every key that starts with the same prefix: no
// valid UTF-8 key continues with a code point above U+10FFFF.
const afterAll = "\U0010FFFF"

// ListTargetFolder lists a filesystem target's folder as this site sees
// it; the hub lists targets it can reach itself (see ListTarget).
func (a *Activities) ListTargetFolder(ctx context.Context, in TargetListInput) (TargetListing, error) {
	cfg := in.Config
	cfg.Seen = a.targetMemory() // a folder not mounted is refused, never created
	d, err := targets.Open(cfg)
	if err != nil {
		return TargetListing{}, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrTargetList, err)
	}
	l, err := ListTarget(ctx, d, in.Path, in.MaxItems, in.Marker)
	if errors.Is(err, ErrBadListPath) {
		return l, temporal.NewNonRetryableApplicationError(err.Error(), vocab.ErrBadListPath, err)
	}
	return l, err
}

// ListTarget returns up to maxItems folders and objects directly inside
// the folder p names (or matching the glob in its last segment), in key
// order after marker. Folders are the common prefixes of deeper keys; the
// keys under a folder are skipped with one List call each, so a page costs
// about one List call per folder on it.
func ListTarget(ctx context.Context, d targets.Driver, p string, maxItems int, marker string) (TargetListing, error) {
	if maxItems <= 0 {
		maxItems = DefaultListItems
	}
	maxItems = min(maxItems, MaxListItems)
	out := TargetListing{Path: p, Marker: marker, Directories: []TargetEntry{}, Files: []TargetEntry{}}
	dir, pattern, err := splitListPath(p)
	if err != nil {
		return out, err
	}
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
		if pattern == "" && marker == "" {
			// The path may name one object rather than a folder.
			if obj, err := d.Stat(ctx, dir); err == nil {
				out.Files = append(out.Files, TargetEntry{Name: path.Base(dir), Path: "/" + dir, Size: obj.Size, Type: TypeFile})
			} else if !errors.Is(err, targets.ErrNotFound) && !errors.Is(err, targets.ErrInvalidKey) {
				return out, err
			}
		}
	}
	cur := marker
	if cur != "" && !strings.HasPrefix(cur, prefix) {
		cur = "" // a marker from another folder means nothing here
	}
	count := 0
	for count < maxItems {
		objs, next, err := d.List(ctx, prefix, cur, maxItems-count+1)
		if err != nil {
			return out, err
		}
		if len(objs) == 0 {
			return out, nil
		}
		restart := false
		for i, o := range objs {
			if count == maxItems {
				out.NextMarker = cur
				return out, nil
			}
			rest := strings.TrimPrefix(o.Key, prefix)
			if slash := strings.IndexByte(rest, '/'); slash >= 0 {
				name := rest[:slash]
				if matchName(pattern, name) {
					out.Directories = append(out.Directories, TargetEntry{Name: name, Path: "/" + prefix + name, Type: TypeDirectory})
					count++
				}
				cur = prefix + name + "/" + afterAll
				restart = i < len(objs)-1 || next != ""
				break
			}
			if matchName(pattern, rest) {
				out.Files = append(out.Files, TargetEntry{Name: rest, Path: "/" + o.Key, Size: o.Size, Type: TypeFile})
				count++
			}
			cur = o.Key
		}
		if !restart && next == "" {
			return out, nil
		}
	}
	// The page is full; say where to go on only if something follows.
	if objs, _, err := d.List(ctx, prefix, cur, 1); err == nil && len(objs) > 0 {
		out.NextMarker = cur
	}
	return out, nil
}

func matchName(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// splitListPath cleans p into a folder and an optional glob on its last
// segment.
func splitListPath(p string) (dir, pattern string, err error) {
	for _, s := range strings.Split(p, "/") {
		if s == ".." {
			return "", "", fmt.Errorf("%w: %q climbs out of the target", ErrBadListPath, p)
		}
	}
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		return "", "", nil
	}
	segs := strings.Split(c, "/")
	for i, s := range segs {
		if !strings.ContainsAny(s, "*?[") {
			continue
		}
		if i != len(segs)-1 {
			return "", "", fmt.Errorf("%w: %q has a glob before its last segment (globs are not recursive)", ErrBadListPath, p)
		}
		if _, err := path.Match(s, ""); err != nil {
			return "", "", fmt.Errorf("%w: %q: %v", ErrBadListPath, p, err)
		}
		return strings.Join(segs[:i], "/"), s, nil
	}
	return c, "", nil
}
