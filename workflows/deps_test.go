package workflows_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Workflows and site activities run where there is no hub database: they
// must never import the hub's models or bun, so that no database row can
// become a workflow payload.
func TestNoDatabaseUnderWorkflowsOrSites(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/thehub/hub/workflows", "github.com/thehub/hub/activities/site").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/thehub/hub/models" || strings.HasPrefix(pkg, "github.com/uptrace/bun") || pkg == "github.com/thehub/hub/activities/hub" {
			t.Errorf("workflows or activities/site depend on %s", pkg)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "github.com/thehub/hub/workflows/vocab").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/thehub/hub/") && pkg != "github.com/thehub/hub/workflows/vocab" {
			t.Errorf("the shared vocabulary imports %s", pkg)
		}
	}
}
