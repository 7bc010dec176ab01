package hub_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

// TestOpenAPIRarelySucceedingRoutes calls with success the routes no other
// test sees succeed, so that the contract check (apitest.CheckResponses)
// holds their answers to the document too.
func TestOpenAPIRarelySucceedingRoutes(t *testing.T) {
	t.Parallel()
	e := apitest.New(t, "sqlite")
	_, err := models.EnsureSite(context.Background(), e.DB, "old")
	require.NoError(t, err)

	// The older revision's body names the workflow jobtype.
	r := e.AsAdmin(http.MethodPost, "/api/jobs/", map[string]any{"site": "old", "jobtype": "premigrate", "paths": []string{"/a"}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
	require.Equal(t, "premigrate", r.Map()["jobtype"])
	require.Equal(t, "premigrate", r.Map()["workflow"])

	r = e.Do(http.MethodGet, "/api/docs/swagger-ui.css", "", nil)
	require.Equal(t, http.StatusOK, r.Status)
}
