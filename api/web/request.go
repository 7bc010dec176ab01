package web

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

const requestIDKey = "request_id"

// RequestIDs gives every request an id (taken from X-Request-ID when the
// caller sent a sane one). AccessLog logs the request when it ends.
func RequestIDs(_ *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader("X-Request-ID")
		if len(id) == 0 || len(id) > 64 {
			b := make([]byte, 8)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		c.Set(requestIDKey, id)
		c.Header("X-Request-ID", id)
		c.Next()
	}
}

// RejectBadURL refuses a URL whose path or query holds a NUL character
// or invalid UTF-8: no database stores NUL in text, and invalid UTF-8
// would be stored replaced, not as sent. A path with NUL names no record
// (404); a path with invalid UTF-8 is 400; a query parameter with either
// is 400 naming the parameter.
func RejectBadURL(c *gin.Context) {
	bad := CheckURLText(c.Request.URL)
	switch {
	case bad == nil:
		return
	case bad.Param == "" && bad.NUL:
		_ = c.Error(ErrNotFound)
	case bad.Param == "":
		_ = c.Error(&Error{Status: http.StatusBadRequest, Detail: bad.Message})
	default:
		_ = c.Error(Invalid(bad.Param, bad.Message))
	}
	c.Abort()
}

// RequestID returns the current request's id.
func RequestID(c *gin.Context) string { return c.GetString(requestIDKey) }

// maxBody bounds request bodies; larger ones are refused, not buffered.
const maxBody = 8 << 20

// Bind decodes the JSON body into dst. Malformed JSON, invalid UTF-8 and
// wrong types are 400s (naming the field when there is one); so are
// strings holding NUL or longer than their field's limit (CheckText).
// Unknown fields are ignored (read-only fields sent back by clients are
// harmless).
func Bind(c *gin.Context, dst any) error {
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, maxBody+1))
	if err != nil {
		return Errorf(http.StatusBadRequest, "Could not read the request body.")
	}
	if len(body) > maxBody {
		return Errorf(http.StatusRequestEntityTooLarge, "The request body is too large.")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if msg := JSONTextError(body); msg != "" {
		return Errorf(http.StatusBadRequest, "%s", msg)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Invalid(jsonPath(reflect.TypeOf(dst), te.Field), fmt.Sprintf("Expected %s, got %s.", jsonKind(te.Type.Kind().String()), te.Value))
		}
		return Errorf(http.StatusBadRequest, "JSON parse error: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return Errorf(http.StatusBadRequest, "JSON parse error: unexpected data after the JSON value")
	}
	all, err := decodeAny(body)
	if err != nil {
		return Errorf(http.StatusBadRequest, "JSON parse error: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	v := ValidationError{}
	CheckText("", all, v.Add)
	return v.Err()
}

// jsonPath turns the path encoding/json gives a type error into the one
// the client sent: it names embedded structs by their Go field name
// ("locationInput.port"), which the JSON does not have.
func jsonPath(t reflect.Type, path string) string {
	var out []string
	for _, seg := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(seg); ok && f.Anonymous {
				t = f.Type
				continue // an embedded struct: not part of the JSON
			}
			for i := 0; i < t.NumField(); i++ {
				if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name == seg {
					t = t.Field(i).Type
					break
				}
			}
		}
		out = append(out, seg)
	}
	return strings.Join(out, ".")
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "bool":
		return "a boolean"
	case goKind == "string":
		return "a string"
	case goKind == "slice", goKind == "array":
		return "a list"
	case goKind == "map", goKind == "struct":
		return "an object"
	}
	return "a " + goKind
}

// PathID parses the {name} path parameter as a positive integer id; anything
// else is 404, since no such record can exist.
func PathID(c *gin.Context, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, ErrNotFound
	}
	return id, nil
}

// QueryBool parses a boolean query parameter (true/false/1/0), with def
// when absent.
func QueryBool(c *gin.Context, name string, def bool) (bool, error) {
	v, ok := c.GetQuery(name)
	if !ok || v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(strings.ToLower(v))
	if err != nil {
		return def, Invalid(name, "Must be a valid boolean.")
	}
	return b, nil
}

// QueryInt parses an integer query parameter; ok is false when absent.
func QueryInt(c *gin.Context, name string) (v int64, ok bool, err error) {
	s, present := c.GetQuery(name)
	if !present || s == "" {
		return 0, false, nil
	}
	v, err = strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, Invalid(name, "A valid integer is required.")
	}
	return v, true, nil
}

// AbsURL returns the absolute URL of path on the server answering c.
func AbsURL(c *gin.Context, path string) string {
	scheme := "http"
	if c.Request.TLS != nil || c.GetHeader("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host + path
}
