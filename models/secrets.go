package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Secret is a named secret the hub generates once and keeps, such as the
// token signing key, so that every replica of the hub shares it.
type Secret struct {
	bun.BaseModel `bun:"table:hub_secrets"`

	Name      string    `bun:"name,pk"`
	Value     []byte    `bun:"value"`
	CreatedAt time.Time `bun:"created_at"`
}

// EnsureSecret returns the secret called name, storing generate()'s value
// first if there is none. Concurrent first starts agree on one value.
func EnsureSecret(ctx context.Context, db bun.IDB, name string, generate func() ([]byte, error)) ([]byte, error) {
	s := new(Secret)
	err := db.NewSelect().Model(s).Where("name = ?", name).Scan(ctx)
	if err == nil {
		return s.Value, nil
	}
	if dbErr(err) != ErrNotFound {
		return nil, err
	}
	v, err := generate()
	if err != nil {
		return nil, err
	}
	s = &Secret{Name: name, Value: v, CreatedAt: time.Now().UTC()}
	if _, err := db.NewInsert().Model(s).On("CONFLICT (name) DO NOTHING").Exec(ctx); err != nil {
		return nil, dbErr(err)
	}
	if err := db.NewSelect().Model(s).Where("name = ?", name).Scan(ctx); err != nil {
		return nil, dbErr(err)
	}
	return s.Value, nil
}
