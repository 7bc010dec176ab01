package site

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestCJCopyFileCopiesOthersFiles: a snapshot copies files it may read
// but not keep the access time of (see fsutil.NoAtime): as root, the copy
// runs on a thread whose file-system user is "nobody".
func TestCJCopyFileCopiesOthersFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user") // CI runs as root
	}
	a := newCJActivities(t)
	src := filepath.Join(a.Root.Dir(), "spaces", "s1", "f.txt")
	require.NoError(t, os.MkdirAll(filepath.Dir(src), 0o755))
	require.NoError(t, os.WriteFile(src, []byte("root's file"), 0o644))
	out := t.TempDir()
	for p := filepath.Dir(src); ; p = filepath.Dir(p) { // nobody may walk to both
		require.NoError(t, os.Chmod(p, 0o755))
		if p == filepath.Dir(filepath.Dir(a.Root.Dir())) {
			break
		}
	}
	require.NoError(t, os.Chmod(out, 0o777))
	require.NoError(t, os.Chmod(filepath.Dir(out), 0o755))
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, err = unix.SetfsuidRetUid(65534); err == nil {
			_, err = cjCopyFile(context.Background(), a.Root, "spaces/s1/f.txt", filepath.Join(out, "copy"), nil)
		}
	}()
	<-done
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(out, "copy"))
	require.NoError(t, err)
	require.Equal(t, "root's file", string(got))
}

// TestSnapshotKeepsOwnersModesAndACLs: a snapshot's copies keep their
// sources' owners, groups, modes (less the write bits) and POSIX ACLs, so
// that only those who could read a file read its copy. Before, every
// folder of a snapshot was made root's and readable by all (mode | 0555):
// a 0700 home folder's files were open to every user of the site.
func TestSnapshotKeepsOwnersModesAndACLs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to other users") // CI runs as root
	}
	dir, tdir := t.TempDir(), t.TempDir()
	s := newAuditSite(t, dir, tdir, false)
	_, err := s.a.cjSpace(&CJSpace{Name: "lab"}, false)
	require.NoError(t, err)
	lab := filepath.Join(dir, "spaces", "lab")
	require.NoError(t, os.Chmod(lab, 0o750))
	files := []struct {
		name     string
		mode     os.FileMode
		uid, gid int
	}{
		{"alice", 0o700 | os.ModeDir, 1234, 1234},
		{"alice/thesis.tex", 0o644, 1234, 1234},
		{"alice/secret", 0o600, 1234, 1234},
		{"shared.txt", 0o640, 1234, 2000},
	}
	for _, f := range files {
		p := filepath.Join(lab, f.name)
		if f.mode.IsDir() {
			require.NoError(t, os.Mkdir(p, 0o700))
		} else {
			require.NoError(t, os.WriteFile(p, []byte(f.name), 0o600))
		}
		require.NoError(t, os.Chown(p, f.uid, f.gid))
		require.NoError(t, os.Chmod(p, f.mode.Perm()))
	}
	require.NoError(t, os.Symlink("alice", filepath.Join(lab, "link")))
	require.NoError(t, os.Lchown(filepath.Join(lab, "link"), 1234, 1234))
	// user 2345 may read shared.txt: user::rw- user:2345:r-- group::r-- mask::r-- other::---
	entry := func(tag, perm uint16, id uint32) []byte {
		return []byte{byte(tag), byte(tag >> 8), byte(perm), byte(perm >> 8), byte(id), byte(id >> 8), byte(id >> 16), byte(id >> 24)}
	}
	acl := append([]byte{2, 0, 0, 0}, entry(0x01, 6, ^uint32(0))...)
	named := entry(0x02, 4, 2345)
	acl = append(append(append(append(acl, named...), entry(0x04, 4, ^uint32(0))...), entry(0x10, 4, ^uint32(0))...), entry(0x20, 0, ^uint32(0))...)
	require.NoError(t, unix.Setxattr(filepath.Join(lab, "shared.txt"), "system.posix_acl_access", acl, 0), "POSIX ACLs on the test's filesystem")

	msg, err := s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), false)
	require.NoError(t, err, msg)
	snap := filepath.Join(dir, cjSnapshotsDir, "lab", "s1")
	fi, err := os.Stat(snap)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o550), fi.Mode().Perm(), "the space folder's mode, less the write bits")
	for _, f := range files {
		fi, err := os.Lstat(filepath.Join(snap, f.name))
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		require.Equal(t, f.mode.Perm()&^0o222, fi.Mode().Perm(), f.name)
		require.Equal(t, []int{f.uid, f.gid}, []int{int(st.Uid), int(st.Gid)}, f.name)
	}
	fi, err = os.Lstat(filepath.Join(snap, "link"))
	require.NoError(t, err)
	require.EqualValues(t, 1234, fi.Sys().(*syscall.Stat_t).Uid, "link")
	got := make([]byte, 256)
	n, err := unix.Getxattr(filepath.Join(snap, "shared.txt"), "system.posix_acl_access", got)
	require.NoError(t, err)
	require.Contains(t, string(got[:n]), string(named), "user 2345 still reads the copy")
}
