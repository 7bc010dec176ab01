package workflows

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Search attributes set on job workflows so operators can filter jobs in
// the Temporal Web UI (e.g. HubSite = "site1" AND HubJobState = "FAILURE").
var (
	HubSite     = temporal.NewSearchAttributeKeyKeyword("HubSite")
	HubWorkflow = temporal.NewSearchAttributeKeyKeyword("HubWorkflow")
	HubJobID    = temporal.NewSearchAttributeKeyInt64("HubJobID")
	HubJobState = temporal.NewSearchAttributeKeyKeyword("HubJobState")
)

// SearchAttributes lists the custom search attributes a namespace needs.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	HubSite.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	HubWorkflow.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	HubJobID.GetName():    enumspb.INDEXED_VALUE_TYPE_INT,
	HubJobState.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}
