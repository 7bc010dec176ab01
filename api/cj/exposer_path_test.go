package cj_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/cj/cjtest"
	"github.com/thehub/hub/models"
)

// TestExposerPathCannotBreakOutOfTheExportLine checks that an exposer's
// path holding a double quote, a backslash, % or a control character is
// refused with a 422 on path that says so. Before, a path such as
// `x" *(rw,no_root_squash,insecure) "y` was accepted, and exportfs read
// its quote as the end of the quoted path of the exports line, so the
// rest became a client entry with options the site refuses in "options"
// (a reviewer's finding). Paths with spaces and non-ASCII letters are
// still exported.
func TestExposerPathCannotBreakOutOfTheExportLine(t *testing.T) {
	cjtest.Each(t, func(t *testing.T, e *cjtest.Env) {
		sp, _ := e.Create("spaces", map[string]any{"name": "proj"})
		e.WaitStatus(sp, models.CJActive)
		for _, bad := range []string{`x" *(rw,no_root_squash,insecure) "y`, `back\slash`, "a%m", "tab\there", "del\x7f"} {
			for _, typ := range []string{"nfs", "cifs", "gpfsnative"} {
				r := e.Do(http.MethodPost, "/exposers/", e.Admin, map[string]any{"type": typ, "name": "evil", "space": "proj", "path": bad})
				require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s %q: %s", typ, bad, r.Body)
				require.Contains(t, string(r.Body), "no double quotes, backslashes, % or control characters", "%s %q", typ, bad)
			}
		}
		good := "with space/ünïcødé"
		require.NoError(t, os.MkdirAll(filepath.Join(e.Root, "spaces", "proj", good), 0o755))
		ex, _ := e.Create("exposers", map[string]any{"type": "nfs", "name": "fine", "space": "proj",
			"path": good, "clients": []any{"10.0.0.0/8"}, "options": "ro,root_squash"})
		e.WaitStatus(ex, models.CJActive)
		b, err := os.ReadFile(filepath.Join(e.ConfigDir, "exports.d", "fine.exports"))
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(string(b), "/spaces/proj/with space/ünïcødé\" 10.0.0.0/8(ro,root_squash)\n"), "%s", b)
		// An existing exposer's path may not be changed to one either.
		cur := e.Do(http.MethodGet, ex, e.Admin, nil).Item()
		r := e.Do(http.MethodPatch, ex, e.Admin, map[string]any{"path": `q"uote`}, "If-Match", cur["_etag"].(string))
		require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
	})
}
