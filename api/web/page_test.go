package web

import (
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
)

// TestEnvelopeWritesWhatJSONWrites: a page is written as c.JSON writes
// the map of its keys (sorted keys, HTML escaped), rows rendered ahead
// (json.RawMessage) included as they are; a value with no JSON form is an
// error, not a panic or half an answer.
func TestEnvelopeWritesWhatJSONWrites(t *testing.T) {
	type row struct {
		Name string  `json:"name"`
		Size *int64  `json:"size"`
		Tags []byte  `json:"tags"`
		Rate float64 `json:"rate"`
	}
	size := int64(7)
	rows := []any{row{Name: "<a&b>", Size: &size, Tags: []byte("x"), Rate: 1e21}, map[string]any{"é": "\u2028"}, nil}
	raw, err := json.Marshal(row{Name: "ahead > behind"})
	require.NoError(t, err)
	next := "http://h/api/x/?page=3&a=<b>"
	p := &PageResponse{Count: 61, Next: &next, Results: append(rows, json.RawMessage(raw))}
	extra := map[string]any{"owners": []string{"a"}, "zz": 1, "aa": true}

	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	require.NoError(t, writeEnvelope(c, extra, p))

	want := httptest.NewRecorder()
	cw, _ := gin.CreateTestContext(want)
	cw.JSON(200, gin.H{"owners": []string{"a"}, "zz": 1, "aa": true, "count": 61, "next": &next, "previous": nil,
		"results": append(rows, row{Name: "ahead > behind"})})
	require.Equal(t, want.Body.String(), w.Body.String())
	require.Equal(t, want.Header().Get("Content-Type"), w.Header().Get("Content-Type"))

	w = httptest.NewRecorder() // no row rendered ahead
	c, _ = gin.CreateTestContext(w)
	require.NoError(t, writeEnvelope(c, nil, &PageResponse{Count: 3, Results: rows}))
	want = httptest.NewRecorder()
	cw, _ = gin.CreateTestContext(want)
	cw.JSON(200, gin.H{"count": 3, "next": nil, "previous": nil, "results": rows})
	require.Equal(t, want.Body.String(), w.Body.String())

	w = httptest.NewRecorder()
	c, _ = gin.CreateTestContext(w)
	require.Error(t, writeEnvelope(c, nil, &PageResponse{Results: []any{math.NaN()}}))
	require.Empty(t, w.Body.String())
}
