package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/uptrace/bun"

	"github.com/thehub/hub/models"
)

// ErrBadCSR means a certificate signing request could not be used.
var ErrBadCSR = errors.New("invalid certificate signing request")

const caSecretName = "pki_ca"

// CA is the hub's certificate authority for site and node client
// certificates (mTLS between site workers and the hub's services). Its key
// is generated on first use and kept in the database, like the token key.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  string
}

// LoadCA returns the hub CA, creating it (valid for caDays) on first use.
func LoadCA(ctx context.Context, db bun.IDB, caDays int64) (*CA, error) {
	raw, err := models.EnsureSecret(ctx, db, caSecretName, func() ([]byte, error) { return newCA(caDays) })
	if err != nil {
		return nil, err
	}
	certBlock, rest := pem.Decode(raw)
	keyBlock, _ := pem.Decode(rest)
	if certBlock == nil || keyBlock == nil {
		return nil, errors.New("stored CA is not PEM")
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, PEM: string(pem.EncodeToMemory(certBlock))}, nil
}

func newCA(days int64) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "hub CA", Organization: []string{"hub"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(0, 0, int(days)),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// Issued is a signed client certificate; KeyPEM is set only when the hub
// generated the key (no CSR was given).
type Issued struct {
	CertPEM string
	KeyPEM  string
	Expires time.Time
	Serial  string
}

// IssueClient signs a client certificate for commonName, valid for days,
// from a PEM CSR, or for a freshly generated key when csrPEM is empty.
func (ca *CA) IssueClient(commonName, csrPEM string, days int64) (*Issued, error) {
	out := &Issued{}
	var pub any
	if csrPEM == "" {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		pub, out.KeyPEM = &key.PublicKey, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	} else {
		block, _ := pem.Decode([]byte(csrPEM))
		if block == nil || block.Type != "CERTIFICATE REQUEST" {
			return nil, fmt.Errorf("%w: expected a PEM CERTIFICATE REQUEST", ErrBadCSR)
		}
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCSR, err)
		}
		if err := csr.CheckSignature(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCSR, err)
		}
		pub = csr.PublicKey
	}
	sn := serial()
	out.Expires = time.Now().AddDate(0, 0, int(days)).UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: commonName, Organization: []string{"hub"}},
		NotBefore: time.Now().Add(-5 * time.Minute), NotAfter: out.Expires,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCSR, err)
	}
	out.CertPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	out.Serial = sn.Text(16)
	return out, nil
}
