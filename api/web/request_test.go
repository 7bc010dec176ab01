package web

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJSONPathDropsEmbeddedStructs(t *testing.T) {
	type location struct {
		Port *int64 `json:"port"`
	}
	type client struct {
		ReadOnly *bool `json:"read_only"`
	}
	type input struct {
		Clients *[]client `json:"clients"`
		location
	}
	typ := reflect.TypeOf(&input{})
	require.Equal(t, "port", jsonPath(typ, "location.port"))
	require.Equal(t, "clients.read_only", jsonPath(typ, "clients.read_only"))
	require.Equal(t, "unknown.x", jsonPath(typ, "unknown.x"))
}
