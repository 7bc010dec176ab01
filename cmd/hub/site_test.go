package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/activities/fsutil"
	"github.com/thehub/hub/activities/site"
	"github.com/thehub/hub/activities/targets"
)

// TestSiteAuditRefs runs hub site audit-refs on a site with a stub
// removed by hand: it lists exactly that stub's reference, --drop removes
// it, and the other stub still recalls byte-identical.
func TestSiteAuditRefs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	for name, data := range map[string]string{"keep.txt": "kept data", "gone.txt": "removed by hand"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	root, err := site.NewRoot(dir)
	require.NoError(t, err)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	res, err := site.Migrate(ctx, root, []string{"/keep.txt", "/gone.txt"}, target, tdir, site.StepOptions{})
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, site.CodeOK, r.Code, r.Message)
	}
	_, rec, err := root.Stat("/gone.txt")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "gone.txt")))

	audit := func(extra ...string) site.AuditResult {
		t.Helper()
		var out bytes.Buffer
		cmd := rootCmd()
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"site", "audit-refs", "--root", dir, "--target-folder", tdir, "--min-age", "1ns"}, extra...))
		require.NoError(t, cmd.ExecuteContext(ctx))
		var got site.AuditResult
		require.NoError(t, json.Unmarshal(out.Bytes(), &got), out.String())
		return got
	}
	got := audit()
	require.Len(t, got.Leaked, 1)
	require.Equal(t, "refs/"+rec.Checksum[:2]+"/"+rec.Checksum+"."+rec.Ref, got.Leaked[0].Key)
	require.Equal(t, "/gone.txt", got.Leaked[0].Path)
	require.False(t, got.Leaked[0].Dropped)

	got = audit("--drop")
	require.Len(t, got.Leaked, 1)
	require.True(t, got.Leaked[0].Dropped)
	require.Empty(t, audit().Leaked)

	res, err = site.Recall(ctx, root, []string{"/keep.txt"}, func(string) (targets.Driver, error) { return target, nil }, site.StepOptions{})
	require.NoError(t, err)
	require.Equal(t, site.CodeOK, res[0].Code, res[0].Message)
	b, err := os.ReadFile(filepath.Join(dir, "keep.txt"))
	require.NoError(t, err)
	require.Equal(t, "kept data", string(b))

	// Without a target it says what is missing.
	cmd := rootCmd()
	cmd.SetArgs([]string{"site", "audit-refs", "--root", dir})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	require.ErrorContains(t, cmd.ExecuteContext(ctx), "--target-folder")
}

// TestSiteRestoreSpace runs hub site restore-space on a space in the site
// trash: it is back at the path given, its stub recalls, and a path that
// exists is refused.
func TestSiteRestoreSpace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, tdir := t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "spaces", "lab"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spaces", "lab", "f.txt"), []byte("thesis"), 0o644))
	root, err := site.NewRoot(dir)
	require.NoError(t, err)
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	res, err := site.Migrate(ctx, root, []string{"/spaces/lab/f.txt"}, target, "t", site.StepOptions{})
	require.NoError(t, err)
	require.Equal(t, site.CodeOK, res[0].Code, res[0].Message)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".hub", "trash"), 0o755))
	require.NoError(t, os.Rename(filepath.Join(dir, "spaces", "lab"), filepath.Join(dir, ".hub", "trash", "lab-1")))

	restore := func(args ...string) error {
		cmd := rootCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"site", "restore-space", "--root", dir}, args...))
		return cmd.ExecuteContext(ctx)
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "taken"), 0o755))
	require.ErrorIs(t, restore("lab-1", "/taken"), os.ErrExist)
	require.NoError(t, restore("lab-1", "/spaces/lab"))
	res, err = site.Recall(ctx, root, []string{"/spaces/lab/f.txt"}, func(string) (targets.Driver, error) { return target, nil }, site.StepOptions{})
	require.NoError(t, err)
	require.Equal(t, site.CodeOK, res[0].Code, res[0].Message)
	got, err := os.ReadFile(filepath.Join(dir, "spaces", "lab", "f.txt"))
	require.NoError(t, err)
	require.Equal(t, "thesis", string(got))
}

// TestSiteScrubTarget runs hub site scrub-target on a target holding one
// object whose bytes do not match its name: it reports it and fails;
// with --quarantine it moves it aside, and a scrub after that passes.
func TestSiteScrubTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tdir := t.TempDir()
	target, err := targets.Open(targets.Config{StorageType: "filesystem", MigrationTargetFolder: tdir})
	require.NoError(t, err)
	good := []byte("good content")
	sum := sha256.Sum256(good)
	key := site.ContentKey(hex.EncodeToString(sum[:]))
	require.NoError(t, target.Put(ctx, key, bytes.NewReader([]byte("rotten bytes")), int64(len(good))))

	scrub := func(extra ...string) (map[string]site.ScrubResult, error) {
		t.Helper()
		var out bytes.Buffer
		cmd := rootCmd()
		cmd.SetOut(&out)
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"site", "scrub-target", "--target-folder", tdir}, extra...))
		err := cmd.ExecuteContext(ctx)
		var got map[string]site.ScrubResult
		require.NoError(t, json.Unmarshal(out.Bytes(), &got), out.String())
		return got, err
	}
	got, err := scrub()
	require.ErrorContains(t, err, "1 objects do not match their names")
	require.Len(t, got[tdir].Bad, 1)
	require.Equal(t, key, got[tdir].Bad[0].Key)
	require.Empty(t, got[tdir].Bad[0].Quarantined)

	got, err = scrub("--quarantine")
	require.Error(t, err)
	require.NotEmpty(t, got[tdir].Bad[0].Quarantined)
	got, err = scrub()
	require.NoError(t, err)
	require.Zero(t, got[tdir].Objects)
}

// TestTargetConfigChecksCertificates: a --target-config file that says
// nothing of SSLVerify checks the S3 server's certificate (it did not: a
// Config's zero value skips the check); "SSLVerify": false skips it.
func TestTargetConfigChecksCertificates(t *testing.T) {
	backend := s3mem.New()
	require.NoError(t, backend.CreateBucket("b"))
	srv := httptest.NewTLSServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	list := func(conf string) error {
		file := filepath.Join(t.TempDir(), "target.json")
		require.NoError(t, os.WriteFile(file, []byte(conf), 0o600))
		drivers, err := (&targetFlags{configs: []string{file}}).open()
		require.NoError(t, err)
		_, _, err = drivers[file].List(context.Background(), "", "", 10)
		return err
	}
	base := `{"StorageType": "s3", "Endpoint": "` + srv.URL + `", "Bucket": "b", "AccessKeyID": "k", "SecretAccessKey": "s"`
	require.ErrorContains(t, list(base+`}`), "certificate")
	require.NoError(t, list(base+`, "SSLVerify": false}`))
}

// TestSiteLeftovers runs hub site leftovers: it lists a set-aside file and
// a temporary file, and with --settle --remove-temporaries --min-age 0
// restores the one and removes the other.
func TestSiteLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".hub"), 0o750))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	aside := filepath.Join(dir, "d", filepath.Base(fsutil.PrivateName("del", "f.txt")))
	require.NoError(t, os.WriteFile(aside, []byte("set aside"), 0o644))
	tmp, err := fsutil.OpenTemp(context.Background(), filepath.Join(dir, "d", "g.txt"))
	require.NoError(t, err)
	require.NoError(t, tmp.Close()) // killed: no write holds it
	run := func(args ...string) []site.Leftover {
		t.Helper()
		var out bytes.Buffer
		cmd := rootCmd()
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"site", "leftovers", "--root", dir}, args...))
		require.NoError(t, cmd.ExecuteContext(context.Background()))
		var got []site.Leftover
		require.NoError(t, json.Unmarshal(out.Bytes(), &got), out.String())
		return got
	}
	got := run()
	require.Len(t, got, 2)
	got = run("--settle", "--remove-temporaries", "--min-age", "0s")
	actions := map[string]string{}
	for _, lo := range got {
		actions[lo.Kind] = lo.Action
	}
	require.Equal(t, map[string]string{site.LeftoverSetAside: "restored to f.txt", site.LeftoverTemporary: "removed"}, actions)
	b, err := os.ReadFile(filepath.Join(dir, "d", "f.txt"))
	require.NoError(t, err)
	require.Equal(t, "set aside", string(b))
	require.Empty(t, run())
}

// TestSiteForgetMount: the command reaches site.ForgetMount (its effect
// on a real mount: TestForgetMountReportsTheVolumesFilesDeleted), needs
// --path, and says so when the folder was no filesystem of its own.
func TestSiteForgetMount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".hub"), 0o750))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "proj"), 0o755))
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := rootCmd()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"site", "forget-mount", "--root", dir}, args...))
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	_, err := run("/proj/sub")
	require.ErrorContains(t, err, `"path" not set`)
	_, err = run("--path", "/proj", "/proj/sub")
	require.ErrorContains(t, err, "/proj/sub is not a filesystem of its own")
}
