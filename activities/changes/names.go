package changes

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// CheckName adds to v what is wrong with name, the new name of a record
// of model's table currently named current: blank, too long, not
// matching pattern (when given; invalid says so), or taken by another
// record (taken says so).
func CheckName(ctx context.Context, db bun.IDB, v models.FieldErrors, model any, name, current, taken string,
	pattern *regexp.Regexp, invalid string) error {
	switch {
	case strings.TrimSpace(name) == "":
		v.Add("name", "This field is required.")
	case utf8.RuneCountInString(name) > models.MaxNameLen:
		v.Add("name", fmt.Sprintf("Ensure this field has no more than %d characters.", models.MaxNameLen))
	case pattern != nil && !pattern.MatchString(name):
		v.Add("name", invalid)
	case name != current:
		n, err := db.NewSelect().Model(model).Where("name = ?", name).Count(ctx)
		if err != nil {
			return err
		}
		v.Check(n == 0, "name", taken)
	}
	return nil
}
