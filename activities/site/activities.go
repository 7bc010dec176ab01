package site

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/thehub/hub/workflows/vocab"
)

// Activities are the Temporal activities of a site worker: every side
// effect on the site's storage. One value serves one worker process; it
// keeps no state between calls beyond what is on disk.
type Activities struct {
	Root      *Root
	Site      string
	Queue     string
	Node      string
	ConfigDir string // the site's configuration folder: applied settings, exports, shares
	// Cipher opens target credentials sealed by the hub; nil when the
	// worker has no secret key (then only credential-less targets work).
	Cipher *vocab.Cipher
	// Metrics counts what job steps do; nil counts nothing.
	Metrics *StepMetrics
	// Utilisation measures a storage pool for policy triggers; nil
	// measures with statfs (see CJStatPools). Tests set it to control
	// when a policy fires and where it stops.
	Utilisation func(ctx context.Context, pool string) (used, total int64, err error)
	// Now is the clock of policy scans; nil is time.Now.
	Now func() time.Time
}

// NewActivities opens the site root (creating it if missing) and the
// configuration folder, by default <root>/.hub/config.
func NewActivities(site, queue, node, rootDir, configDir string) (*Activities, error) {
	if err := os.MkdirAll(rootDir, 0o750); err != nil {
		return nil, fmt.Errorf("create site root: %w", err)
	}
	root, err := NewRoot(rootDir)
	if err != nil {
		return nil, err
	}
	if configDir == "" {
		configDir = filepath.Join(root.Dir(), hubDir, "config")
	}
	if err := os.MkdirAll(configDir, 0o750); err != nil {
		return nil, fmt.Errorf("create site config folder: %w", err)
	}
	return &Activities{Root: root, Site: site, Queue: queue, Node: node, ConfigDir: configDir}, nil
}
