package hub_test

import (
	"reflect"
	"testing"

	hubact "github.com/thehub/hub/activities/hub"
	"github.com/thehub/hub/workflows"
)

// Workflows call hub activities by name; every name must be a method the
// hub worker registers.
func TestWorkflowsNameRealHubActivities(t *testing.T) {
	typ := reflect.TypeOf(&hubact.Activities{})
	for _, name := range workflows.HubActivityNames {
		if _, ok := typ.MethodByName(name); !ok {
			t.Errorf("workflows call hub activity %q, which activities/hub does not define", name)
		}
	}
}
