package fsutil

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MountTables are where the mounts a host expects (Fstab) and those it
// has (Mountinfo) are read; tests point them elsewhere.
var MountTables = struct{ Fstab, Mountinfo string }{"/etc/fstab", "/proc/self/mountinfo"}

// UnmountedVolume names the mount point of /etc/fstab that holds dir, is
// not mounted now, and lies deeper than the deepest mount point holding
// dir that is; or "" when there is none. A folder beneath it is on the
// disk under the mount point, not on its volume: an empty folder there
// looks like a new one. A mounted volume beneath an fstab entry that is
// not (an NFS share at /mnt/nas under a cloud image's idle /mnt line) is
// fine. Where fstab or mountinfo does not say (containers, mounts made by
// hand, no /proc, systems other than Linux), it finds nothing.
func UnmountedVolume(dir string) string {
	fstab, err := os.ReadFile(MountTables.Fstab)
	if err != nil {
		return ""
	}
	mounted := map[string]bool{}
	for _, mp := range MountPoints() {
		mounted[mp] = true
	}
	if !mounted["/"] {
		return "" // no mount table to go by (a chroot without /proc)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	dir = filepath.Clean(dir)
	holds := func(mp string) bool { return mp == "/" || dir == mp || strings.HasPrefix(dir, mp+"/") }
	deepest := "" // the deepest mounted mount point holding dir
	for mp := range mounted {
		if holds(mp) && len(mp) > len(deepest) {
			deepest = mp
		}
	}
	found := ""
	for _, line := range strings.Split(string(fstab), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(f[0], "#") || f[2] == "swap" || !strings.HasPrefix(f[1], "/") {
			continue
		}
		mp := filepath.Clean(unescapeMount(f[1]))
		if holds(mp) && !mounted[mp] && len(mp) > len(deepest) && len(mp) > len(found) {
			found = mp
		}
	}
	return found
}

// MountPoints lists the mount points of /proc/self/mountinfo (its fifth
// field), which names them by their real paths.
func MountPoints() []string {
	var out []string
	for _, m := range Mounts() {
		out = append(out, m.Point)
	}
	return out
}

// Mount is a line of /proc/self/mountinfo: the mount's ID (as statx's
// STATX_MNT_ID gives it: see MountIDOf), its mount point, and what is
// mounted there (From).
type Mount struct {
	ID, Parent uint64 // the mount's ID and its parent's
	// Dev is the filesystem's device number as mountinfo gives it
	// ("major:minor"): every mount of one filesystem has it, a btrfs
	// subvolume's and a bind mount's too.
	Dev   string
	Point string
	// From names what is mounted: the filesystem type, its source (a
	// device, server:/export, …) and the folder of that filesystem
	// mounted (mountinfo's fourth field: "/" for the whole of it).
	From string
	// Super is the filesystem's own options (mountinfo's last field).
	Super string
}

// Mounts lists the mounts of /proc/self/mountinfo.
func Mounts() []Mount {
	info, err := os.ReadFile(MountTables.Mountinfo)
	if err != nil {
		return nil
	}
	var out []Mount
	for _, line := range strings.Split(string(info), "\n") {
		// The fields after " - " are split on single spaces: a source
		// may be empty (mount -t tmpfs "" …).
		before, after, _ := strings.Cut(line, " - ")
		f := strings.Fields(before)
		if len(f) < 5 {
			continue
		}
		id, _ := strconv.ParseUint(f[0], 10, 64)
		parent, _ := strconv.ParseUint(f[1], 10, 64)
		m := Mount{ID: id, Parent: parent, Dev: f[2], Point: unescapeMount(f[4])}
		if a := strings.SplitN(after, " ", 3); len(a) >= 2 {
			m.From = a[0] + " " + a[1] + " " + f[3]
			if len(a) == 3 {
				m.Super = a[2]
			}
		}
		out = append(out, m)
	}
	return out
}

// Visible keeps the mounts of the table a path can reach: not one with
// another mounted over it at its point (a child of it there), nor one
// beneath a folder another mount of its parent covers, nor one in a
// mount that is not reached. Told from the table alone: a look at each
// mount point would hang on a network volume whose server is down. root
// is the mount the process's root is on (0: unknown): a path starts
// there and does not follow a filesystem mounted over "/" since, which
// neither is reached nor hides anything (a reviewer's finding: every
// mount looked hidden).
func Visible(mounts []Mount, root uint64) []Mount {
	overRoot := func(m Mount) bool { return root != 0 && m.Point == "/" && m.ID != root }
	children := map[uint64][]Mount{}
	byID := map[uint64]Mount{}
	for _, m := range mounts {
		children[m.Parent] = append(children[m.Parent], m)
		byID[m.ID] = m
	}
	under := func(p, folder string) bool { return strings.HasPrefix(p, strings.TrimSuffix(folder, "/")+"/") }
	// atPoint: the path to m's point leads to where m is mounted (no
	// sibling over a folder above it, and its parent reached there);
	// reached: and nothing is mounted over m.
	atPoint, reached := map[uint64]bool{}, map[uint64]bool{}
	var isAtPoint, isReached func(m Mount, depth int) bool
	isAtPoint = func(m Mount, depth int) bool {
		if v, ok := atPoint[m.ID]; ok {
			return v
		}
		v := !overRoot(m)
		for _, sib := range children[m.Parent] {
			v = v && (sib.ID == m.ID || overRoot(sib) || !under(m.Point, sib.Point))
		}
		if p, ok := byID[m.Parent]; v && ok && p.ID != m.ID && depth < len(mounts) {
			if p.Point == m.Point {
				v = isAtPoint(p, depth+1)
			} else {
				v = isReached(p, depth+1)
			}
		}
		atPoint[m.ID] = v
		return v
	}
	isReached = func(m Mount, depth int) bool {
		if v, ok := reached[m.ID]; ok {
			return v
		}
		v := isAtPoint(m, depth)
		for _, c := range children[m.ID] {
			v = v && (c.ID == m.ID || c.Point != m.Point || overRoot(c))
		}
		reached[m.ID] = v
		return v
	}
	var out []Mount
	for _, m := range mounts {
		if isReached(m, 0) {
			out = append(out, m)
		}
	}
	return out
}

// MountedBeneath returns a mount point at dir or beneath it (symlinks in
// dir resolved), or "" when there is none, or no mount table to tell.
func MountedBeneath(dir string) string {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	real = strings.TrimSuffix(real, "/")
	for _, m := range MountPoints() {
		if m == real || strings.HasPrefix(m, real+"/") {
			return m
		}
	}
	return ""
}

// unescapeMount undoes the octal escapes of fstab and mountinfo (\040 for
// a space).
func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// LocksAreLocal tells whether the locks taken on files of the folder dir
// exclude only this host's processes: an NFS mount with nolock, or with
// local_lock=flock or all, where flock succeeds on every host at once
// (nfs(5)).
func LocksAreLocal(dir string) bool {
	id, _, ok := MountIDOf(dir)
	if !ok {
		return false
	}
	for _, m := range Mounts() {
		if m.ID != id {
			continue
		}
		for _, o := range strings.Split(m.Super, ",") {
			if o == "nolock" || o == "local_lock=flock" || o == "local_lock=all" {
				return true
			}
		}
	}
	return false
}
