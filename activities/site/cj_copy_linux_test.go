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

// TestSnapshotKeepsOwnersModesAndACLs: a snapshot's copies stay the
// worker's and read-only, and are readable by those who could read their
// sources: the source's owner as a named user of the copy's ACL with its
// owner bits, its group as the copy's group, the source's named entries
// kept, every write bit removed. Before, every folder of a snapshot was
// the worker's (root) with mode | 0555: a 0700 home folder's files were
// readable by every user; and a copy given to its user could be made
// writable by them again.
func TestSnapshotKeepsOwnersModesAndACLs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files to other users") // CI runs as root
	}
	dir, tdir := t.TempDir(), t.TempDir()
	s := newAuditSite(t, dir, tdir, false)
	_, err := s.a.cjSpace(context.Background(), &CJSpace{Name: "lab"}, false)
	require.NoError(t, err)
	lab := filepath.Join(dir, "spaces", "lab")
	require.NoError(t, os.Chmod(lab, 0o750))
	files := []struct {
		name     string
		mode     os.FileMode
		uid, gid uint32
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
		require.NoError(t, os.Chown(p, int(f.uid), int(f.gid)))
		require.NoError(t, os.Chmod(p, f.mode.Perm()))
	}
	require.NoError(t, os.Symlink("alice", filepath.Join(lab, "link")))
	require.NoError(t, os.Lchown(filepath.Join(lab, "link"), 1234, 1234))
	// user 2345 may read shared.txt: user::rw- user:2345:r-- group::r-- mask::r-- other::---
	named := aclEntry{aclUser, 0o4, 2345}
	acl := snapshotACL(0o640, false, 1234, []aclEntry{named})
	require.NoError(t, unix.Setxattr(filepath.Join(lab, "shared.txt"), aclAccess, acl, 0), "POSIX ACLs on the test's filesystem")

	msg, err := s.a.cjSnapshot(context.Background(), snapshotOfLab(tdir), false)
	require.NoError(t, err, msg)
	snap := filepath.Join(dir, cjSnapshotsDir, "lab", "s1")
	fi, err := os.Stat(snap)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o550), fi.Mode().Perm(), "the space folder's mode, less the write bits")
	for _, f := range files {
		p := filepath.Join(snap, f.name)
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		require.Zero(t, fi.Mode().Perm()&0o222, "%s: no write bit", f.name)
		require.Equal(t, []uint32{0, f.gid}, []uint32{st.Uid, st.Gid}, "%s: the worker's, in the source's group", f.name)
		got := make([]byte, 256)
		n, err := unix.Getxattr(p, aclAccess, got)
		require.NoError(t, err, f.name)
		entries := parseACL(got[:n])
		perm := uint16(f.mode.Perm())
		require.Contains(t, entries, aclEntry{aclUser, perm >> 6 & 0o5, f.uid}, "%s: its owner reads it as before", f.name)
		require.Contains(t, entries, aclEntry{aclGroupObj, perm >> 3 & 0o5, aclNoID}, f.name)
		require.Contains(t, entries, aclEntry{aclOther, perm & 0o5, aclNoID}, f.name)
		for _, e := range entries {
			require.Zero(t, e.perm&0o2, "%s: no entry writes: %+v", f.name, e)
		}
		if f.name == "shared.txt" {
			require.Contains(t, entries, named, "user 2345 still reads the copy")
		}
	}
}
