package site

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/thehub/hub/activities/fsutil"
)

// keyOriginFile, in the root's .hub folder, names the record key file as
// it was made: its inode and birth time. A copy of the .hub folder (an
// rsync of the site to new storage, a restore from a backup) has a key
// file of another inode and birth time, and so shows that it is a copy.
const keyOriginFile = "record.key.origin"

// keyOrigin identifies a key file; Btime is 0 where the filesystem keeps
// no birth times.
type keyOrigin struct {
	Ino   uint64 `json:"ino"`
	Btime int64  `json:"btime"`
}

func originOf(name string) (keyOrigin, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return keyOrigin{}, err
	}
	return keyOrigin{Ino: inode(fi), Btime: birthTime(name)}, nil
}

// same compares two identities, birth times only where both are known
// (the nodes of a site may reach its root through different filesystems,
// a local one and NFS).
func (o keyOrigin) same(p keyOrigin) bool {
	return o.Ino == p.Ino && (o.Btime == 0 || p.Btime == 0 || o.Btime == p.Btime)
}

// ErrKeyCopied: the site's record key file is not the one made at this
// site's root. A site copied with its .hub folder shares the original's
// key, and so proves the original's references to be its own: its audit
// would drop every reference of the original that its own records do
// not name, and the original's stubs would lose their content.
var ErrKeyCopied = errors.New("is a copy (its inode or birth time is not the one recorded in " + keyOriginFile + "): the site, or its .hub folder, was copied from elsewhere or restored from a backup. " +
	"A copy shares the original site's key and would take that site's references for its own, so no reference is dropped. " +
	"If no other site runs from the original .hub folder (the old storage is retired, or the key was restored after a loss), remove .hub/" + keyOriginFile + " and run the audit again; " +
	"if one does, remove this site's .hub folder before it writes any record")

// checkKeyOrigin fails with ErrKeyCopied when the site's key file is not
// the one recorded when it was made. A site whose key was made before
// origins were recorded (or whose operator removed the record) records
// its key file as it is now.
func (s *signer) checkKeyOrigin() error {
	name := filepath.Join(s.dir, recordKeyFile)
	now, err := originOf(name)
	if err != nil {
		return fmt.Errorf("site record key: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, keyOriginFile))
	if errors.Is(err, fs.ErrNotExist) {
		if err := writeKeyOrigin(s.dir, now); !errors.Is(err, fs.ErrExist) {
			return err
		}
		b, err = os.ReadFile(filepath.Join(s.dir, keyOriginFile)) // another node wrote it first
	}
	var was keyOrigin
	if err == nil {
		err = json.Unmarshal(b, &was)
	}
	if err != nil {
		return fmt.Errorf("site record key origin %s: %w", keyOriginFile, err)
	}
	if !was.same(now) {
		return fmt.Errorf("site record key %s %w", name, ErrKeyCopied)
	}
	return nil
}

// writeKeyOrigin records o as the origin of the key file in the .hub
// folder dir, unless a record exists (fs.ErrExist).
func writeKeyOrigin(dir string, o keyOrigin) error {
	b, _ := json.Marshal(o)
	if err := createFile(filepath.Join(dir, keyOriginFile), b); err != nil {
		return err
	}
	return fsutil.SyncDir(dir)
}
