package changes

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"github.com/thehub/hub/models"
)

// DatastoreInput is the writable part of a data store. accesskey and
// secretaccesskey are secrets: accepted, sealed, never returned; they
// reach SaveDatastore sealed already (the API seals them).
type DatastoreInput struct {
	Name            *string `json:"name"`
	Type            *string `json:"type"`
	AccessKey       *string `json:"accesskey"`
	AccessKeyID     *string `json:"accesskeyid"`
	SecretAccessKey *string `json:"secretaccesskey"`
	Bucket          *string `json:"bucket"`
	Container       *string `json:"container"`
	CredentialsFile *string `json:"credentialsfile"`
	Endpoint        *string `json:"endpoint"`
	Region          *string `json:"region"`
	StorageAccount  *string `json:"storageaccount"`
}

// SaveDatastore creates (id 0) or updates data store id from in.
func (s *Service) SaveDatastore(ctx context.Context, id int64, in DatastoreInput) (*models.Datastore, error) {
	d := new(models.Datastore)
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		create := id == 0
		if !create {
			var err error
			if d, err = models.GetDatastore(ctx, tx, id); err != nil {
				return err
			}
		}
		v := models.FieldErrors{}
		if in.Name != nil || create {
			if err := CheckName(ctx, tx, v, (*models.Datastore)(nil), deref(in.Name), d.Name, "A data store with this name already exists.", nil, ""); err != nil {
				return err
			}
			d.Name = deref(in.Name)
		}
		if in.Type != nil || create {
			v.Check(strings.TrimSpace(deref(in.Type)) != "", "type", "This field is required.")
			d.Type = deref(in.Type)
		}
		if err := v.Err(); err != nil {
			return err
		}
		setIf(&d.AccessKeyID, in.AccessKeyID)
		setIf(&d.Bucket, in.Bucket)
		setIf(&d.Container, in.Container)
		setIf(&d.CredentialsFile, in.CredentialsFile)
		setIf(&d.Endpoint, in.Endpoint)
		setIf(&d.Region, in.Region)
		setIf(&d.StorageAccount, in.StorageAccount)
		setIf(&d.AccessKeyEnc, in.AccessKey)
		setIf(&d.SecretAccessKeyEnc, in.SecretAccessKey)
		return models.SaveDatastore(ctx, tx, d)
	})
	return d, err
}

// IPAddressInput is the writable part of a data store's IP address.
type IPAddressInput struct {
	IPAddr    *string `json:"ipaddr"`
	Datastore *int64  `json:"datastore"`
}

// SaveIPAddress creates (id 0) or updates IP address id from in: an IPv4
// address of an existing data store, once per data store.
func (s *Service) SaveIPAddress(ctx context.Context, id int64, in IPAddressInput) (*models.IPAddress, error) {
	a := new(models.IPAddress)
	err := s.Commit(ctx, func(ctx context.Context, tx *Tx) error {
		create := id == 0
		if !create {
			var err error
			if a, err = models.GetIPAddress(ctx, tx, id); err != nil {
				return err
			}
		}
		v := models.FieldErrors{}
		if in.IPAddr != nil || create {
			addr, err := netip.ParseAddr(strings.TrimSpace(deref(in.IPAddr)))
			switch {
			case deref(in.IPAddr) == "":
				v.Add("ipaddr", "This field is required.")
			case err != nil || !addr.Is4():
				v.Add("ipaddr", "Enter a valid IPv4 address.")
			default:
				a.IPAddr = addr.String()
			}
		}
		if in.Datastore != nil || create {
			switch {
			case in.Datastore == nil:
				v.Add("datastore", "This field is required.")
			default:
				if _, err := models.GetDatastore(ctx, tx, *in.Datastore); errors.Is(err, models.ErrNotFound) {
					v.Add("datastore", "Invalid pk \""+strconv.FormatInt(*in.Datastore, 10)+"\" - object does not exist.")
				} else if err != nil {
					return err
				}
				a.DatastoreID = *in.Datastore
			}
		}
		if len(v) == 0 {
			n, err := tx.NewSelect().Model((*models.IPAddress)(nil)).
				Where("datastore_id = ? AND ipaddr = ? AND id <> ?", a.DatastoreID, a.IPAddr, a.ID).Count(ctx)
			if err != nil {
				return err
			}
			v.Check(n == 0, "ipaddr", "This data store already has this IP address.")
		}
		if err := v.Err(); err != nil {
			return err
		}
		if err := models.SaveIPAddress(ctx, tx, a); err != nil {
			return err
		}
		var err error
		a, err = models.GetIPAddress(ctx, tx, a.ID)
		return err
	})
	return a, err
}
