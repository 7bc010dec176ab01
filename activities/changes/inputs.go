package changes

import (
	"encoding/json"
	"net/url"
	"reflect"

	"github.com/thehub/hub/models"
)

// Nullable is a JSON field that tells "absent" (Set false) from null.
type Nullable[T any] struct {
	Set, Null bool
	V         T
}

func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Null = true
		return nil
	}
	return json.Unmarshal(b, &n.V)
}

// Value returns the field as a pointer: nil when null or absent.
func (n Nullable[T]) Value() *T {
	if !n.Set || n.Null {
		return nil
	}
	v := n.V
	return &v
}

// CheckColor adds to v a color whose values are not 0 to 255.
func CheckColor(v models.FieldErrors, field string, color []int64) {
	for _, x := range color {
		if x < 0 || x > 255 {
			v.Add(field, "Each value must be between 0 and 255.")
			return
		}
	}
}

func checkURL(v models.FieldErrors, field, s string) {
	if s == "" {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.Add(field, "Enter a valid URL.")
	}
}

// CheckNotNeg adds to v a negative n.
func CheckNotNeg(v models.FieldErrors, field string, n *int64) {
	if n != nil && *n < 0 {
		v.Add(field, "Ensure this value is greater than or equal to 0.")
	}
}

// InUseDetail is the detail of a models.ErrInUse error, without the prefix.
func InUseDetail(err error) string {
	msg := err.Error()
	if p := models.ErrInUse.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}

// SchemaType is the type whose JSON a Nullable holds (for the OpenAPI
// document).
func (Nullable[T]) SchemaType() reflect.Type { return reflect.TypeFor[T]() }

// msgRequired is the message of a missing field.
const msgRequired = "This field is required."
