package models

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// ClientKey is an API key belonging to a user. Only a hash of the secret is
// stored; the key itself is shown once, at creation.
type ClientKey struct {
	bun.BaseModel `bun:"table:client_keys,alias:ck"`

	ID        int64     `bun:"id,pk,autoincrement"`
	Name      string    `bun:"name"`
	UserID    int64     `bun:"user_id"`
	User      *User     `bun:"rel:belongs-to,join:user_id=id"`
	Prefix    string    `bun:"prefix"`
	KeyHash   string    `bun:"key_hash"`
	CreatedAt time.Time `bun:"created_at"`
}

// API keys look like "<prefix>.<secret>": the prefix finds the row, the
// secret is checked against its SHA-256. A slow hash is unnecessary because
// the secret is 256 random bits, not a human password.
func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func randomString(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS is broken; nothing sensible to do
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// CreateClientKey stores a new key for the user and returns the key text,
// which is never retrievable again.
func CreateClientKey(ctx context.Context, db bun.IDB, k *ClientKey) (string, error) {
	prefix := strings.NewReplacer("-", "x", "_", "y").Replace(randomString(9))
	secret := randomString(32)
	k.Prefix, k.KeyHash, k.CreatedAt = prefix, hashSecret(secret), time.Now().UTC()
	if _, err := db.NewInsert().Model(k).Exec(ctx); err != nil {
		return "", dbErr(err)
	}
	return prefix + "." + secret, nil
}

// ClientKeyUser returns the key and its user for an API key text, or
// ErrNotFound when the key is unknown, deleted or wrong.
func ClientKeyUser(ctx context.Context, db bun.IDB, key string) (*ClientKey, error) {
	prefix, secret, ok := strings.Cut(key, ".")
	if !ok || prefix == "" || secret == "" {
		return nil, ErrNotFound
	}
	k := new(ClientKey)
	if err := db.NewSelect().Model(k).Relation("User").Where("ck.prefix = ?", prefix).Scan(ctx); err != nil {
		return nil, dbErr(err)
	}
	if subtle.ConstantTimeCompare([]byte(k.KeyHash), []byte(hashSecret(secret))) != 1 {
		return nil, ErrNotFound
	}
	return k, nil
}

// ClientKeysQuery selects keys into dest; a userID of 0 selects every
// user's keys.
func ClientKeysQuery(db bun.IDB, dest any, userID int64) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).Relation("User").Order("ck.id")
	if userID != 0 {
		q.Where("ck.user_id = ?", userID)
	}
	return q
}

// GetClientKey loads a key visible to userID (0 = any user).
func GetClientKey(ctx context.Context, db bun.IDB, id, userID int64) (*ClientKey, error) {
	k := new(ClientKey)
	err := ClientKeysQuery(db, k, userID).Where("ck.id = ?", id).Scan(ctx)
	return k, dbErr(err)
}

// RenameClientKey changes a key's name.
func RenameClientKey(ctx context.Context, db bun.IDB, k *ClientKey) error {
	_, err := db.NewUpdate().Model(k).Column("name").WherePK().Exec(ctx)
	return dbErr(err)
}

// DeleteClientKey removes a key; it stops working at once.
func DeleteClientKey(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*ClientKey)(nil)).Where("id = ?", id).Exec(ctx)
	return affected(res, err)
}
