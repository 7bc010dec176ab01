package hub_test

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/thehub/hub/activities/site"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// targetObject is where a filesystem target keeps the copy of data.
func targetObject(targetDir string, data []byte) string {
	return filepath.Join(targetDir, filepath.FromSlash(site.ContentKey(sha256Hex(data))))
}
