package site

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuditDropsALeakedMarkerWithoutVolumeOnAMountedVolume: a volume
// mounted and healthy, one stub on it deleted for good, its marker naming
// no volume (written before markers named volumes, or within 5 s of the
// mount): it was kept for ever (a reviewer's finding against a check
// comparing the marker's volume with its folder's). It is dropped once
// the walks found the site's records on that volume.
func TestAuditDropsALeakedMarkerWithoutVolumeOnAMountedVolume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), false)
	bindMount(t, mountTmpfs(t, t.TempDir()), filepath.Join(dir, "vol"))
	s.migrateFiles(t, "vol", map[string]string{"a.txt": "a stub that stays", "b.txt": "a stub deleted for good"})
	abs := filepath.Join(dir, "vol", "b.txt")
	rec, err := s.a.Root.state.get(abs, "vol/b.txt")
	require.NoError(t, err)
	body, err := s.a.Root.newRefBody(rec.Checksum, rec.Ref, "vol/b.txt", rec.Ino)
	require.NoError(t, err)
	body.Vol = "" // an older body
	require.NoError(t, s.target.Delete(ctx, refKey(rec.Checksum, rec.Ref)))
	require.NoError(t, putRef(ctx, s.target, rec.Checksum, rec.Ref, body))
	require.NoError(t, os.Remove(abs))
	s.a.Root.forgetMounts()
	ar := s.dropLeakedAndCollect(t)
	require.Len(t, ar.Leaked, 1)
	require.True(t, ar.Leaked[0].Dropped, "%+v", ar.Leaked[0])
}

// TestAuditDropsALeakedReferenceOfAVolumeOnAnIndexSite: on an index
// site, a deleted stub's reference on a mounted volume is dropped (the
// site's own index records count the volume seen).
func TestAuditDropsALeakedReferenceOfAVolumeOnAnIndexSite(t *testing.T) {
	dir := t.TempDir()
	s := newAuditSite(t, dir, t.TempDir(), true)
	bindMount(t, mountTmpfs(t, t.TempDir()), filepath.Join(dir, "vol"))
	s.migrateFiles(t, "vol", map[string]string{"a.txt": "a stub that stays", "b.txt": "a stub deleted for good"})
	require.NoError(t, os.Remove(filepath.Join(dir, "vol", "b.txt")))
	s.a.Root.forgetMounts()
	ar := s.dropLeakedAndCollect(t)
	require.Len(t, ar.Leaked, 1)
	require.True(t, ar.Leaked[0].Dropped, "%+v", ar.Leaked[0])
	s.requireRecalled(t, "vol", map[string]string{"a.txt": "a stub that stays"})
}
