package models_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/models"
)

func TestWorkflowStepVocabulary(t *testing.T) {
	t.Parallel()
	var names []string
	for _, s := range models.WorkflowSteps {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"premigrate", "migrate", "recall", "send", "site_sync", "delete", "reverse_stub"}, names)
	send, ok := models.LookupWorkflowStep("send")
	require.True(t, ok)
	p, ok := send.Param("destination_site")
	require.True(t, ok)
	require.True(t, p.Required)
	_, ok = models.LookupWorkflowStep("explode")
	require.False(t, ok)

	// Every built-in definition is valid against the vocabulary.
	for _, w := range models.BuiltinWorkflows() {
		data, err := json.Marshal(map[string]any{"fields": w.Fields, "filter_rules": w.FilterRules})
		require.NoError(t, err)
		var raw map[string]any
		require.NoError(t, json.Unmarshal(data, &raw))
		fields, errs := models.ParseWorkflowFields(raw["fields"])
		require.Empty(t, errs, w.Name)
		_, errs = models.ParseFilterRules(raw["filter_rules"], fields)
		require.Empty(t, errs, w.Name)
	}
}

func TestResolveStepParams(t *testing.T) {
	t.Parallel()
	fields := map[string]models.WorkflowField{
		"dest":  {Type: models.FieldText, Label: "D"},
		"queue": {Type: models.FieldText, Label: "Q", Default: "default"},
		"hyd":   {Type: models.FieldCheckbox, Label: "H"},
	}
	step := models.StepSpec{Name: "send", Params: map[string]any{
		"destination_site": "$dest", "destination_queue": "$queue", "hydrate": "$hyd", "destination_path": "/in"}}
	got := models.ResolveStepParams(step, fields, map[string]any{"dest": "site2"})
	require.Equal(t, map[string]any{"destination_site": "site2", "destination_queue": "default", "destination_path": "/in"}, got,
		"job values win, then defaults; unresolved references are dropped")
}
