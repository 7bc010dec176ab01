package models

import (
	"context"
	"time"

	"github.com/uptrace/bun"
)

// Datastore is an external data store the hub knows how to reach. Its
// access keys are sealed with the hub's Cipher (columns *_enc).
type Datastore struct {
	bun.BaseModel `bun:"table:datastores,alias:ds"`

	ID                 int64     `bun:"id,pk,autoincrement"`
	Name               string    `bun:"name"`
	Type               string    `bun:"type"`
	AccessKeyEnc       string    `bun:"accesskey_enc"`
	AccessKeyID        string    `bun:"accesskeyid"`
	SecretAccessKeyEnc string    `bun:"secretaccesskey_enc"`
	Bucket             string    `bun:"bucket"`
	Container          string    `bun:"container"`
	CredentialsFile    string    `bun:"credentialsfile"`
	Endpoint           string    `bun:"endpoint"`
	Region             string    `bun:"region"`
	StorageAccount     string    `bun:"storageaccount"`
	CreatedAt          time.Time `bun:"created_at"`
}

// Columns that hold sealed data store secrets, as the Cipher binds them.
const (
	ColDatastoreAccessKey       = "datastores.accesskey"
	ColDatastoreSecretAccessKey = "datastores.secretaccesskey"
)

// IPAddress is an IPv4 address of a data store.
type IPAddress struct {
	bun.BaseModel `bun:"table:ip_addresses,alias:ip"`

	ID          int64      `bun:"id,pk,autoincrement"`
	IPAddr      string     `bun:"ipaddr"`
	DatastoreID int64      `bun:"datastore_id"`
	Datastore   *Datastore `bun:"rel:belongs-to,join:datastore_id=id"`
}

// DatastoresQuery selects data stores by name.
func DatastoresQuery(db bun.IDB, dest any) *bun.SelectQuery {
	return db.NewSelect().Model(dest).Order("ds.name")
}

// GetDatastore loads one data store.
func GetDatastore(ctx context.Context, db bun.IDB, id int64) (*Datastore, error) {
	d := new(Datastore)
	return d, dbErr(db.NewSelect().Model(d).Where("ds.id = ?", id).Scan(ctx))
}

// SaveDatastore inserts or updates d.
func SaveDatastore(ctx context.Context, db bun.IDB, d *Datastore) error {
	if d.ID == 0 {
		d.CreatedAt = time.Now().UTC()
		_, err := db.NewInsert().Model(d).Exec(ctx)
		return dbErr(err)
	}
	_, err := db.NewUpdate().Model(d).WherePK().ExcludeColumn("created_at").Exec(ctx)
	return dbErr(err)
}

// DeleteDatastore removes a data store and its IP addresses.
func DeleteDatastore(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*Datastore)(nil)).Where("id = ?", id).Exec(ctx)
	return deleted(res, err)
}

// IPAddressesQuery selects IP addresses with their data store, of one
// data store when datastoreID is non-nil.
func IPAddressesQuery(db bun.IDB, dest any, datastoreID *int64) *bun.SelectQuery {
	q := db.NewSelect().Model(dest).Relation("Datastore").Order("ip.id")
	if datastoreID != nil {
		q = q.Where("ip.datastore_id = ?", *datastoreID)
	}
	return q
}

// GetIPAddress loads one IP address with its data store.
func GetIPAddress(ctx context.Context, db bun.IDB, id int64) (*IPAddress, error) {
	a := new(IPAddress)
	return a, dbErr(db.NewSelect().Model(a).Relation("Datastore").Where("ip.id = ?", id).Scan(ctx))
}

// SaveIPAddress inserts or updates a.
func SaveIPAddress(ctx context.Context, db bun.IDB, a *IPAddress) error {
	if a.ID == 0 {
		_, err := db.NewInsert().Model(a).Exec(ctx)
		return dbErr(err)
	}
	_, err := db.NewUpdate().Model(a).WherePK().Exec(ctx)
	return dbErr(err)
}

// DeleteIPAddress removes one IP address.
func DeleteIPAddress(ctx context.Context, db bun.IDB, id int64) error {
	res, err := db.NewDelete().Model((*IPAddress)(nil)).Where("id = ?", id).Exec(ctx)
	return deleted(res, err)
}
