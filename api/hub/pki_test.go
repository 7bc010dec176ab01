package hub_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/api/hub/apitest"
	"github.com/thehub/hub/models"
)

func TestIssueSiteCertificate(t *testing.T) {
	t.Parallel()
	apitest.Each(t, func(t *testing.T, e *apitest.Env) {
		_, err := models.EnsureSite(context.Background(), e.DB, "edge")
		require.NoError(t, err)
		parse := func(p string) *x509.Certificate {
			b, _ := pem.Decode([]byte(p))
			require.NotNil(t, b)
			c, err := x509.ParseCertificate(b.Bytes)
			require.NoError(t, err)
			return c
		}

		// Without a CSR the hub generates the key and returns it once.
		r := e.AsAdmin(http.MethodPost, "/api/pki/site/", map[string]any{"site": "edge"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		m := r.Map()
		require.NotEmpty(t, m["private_key"])
		cert, ca := parse(m["certificate"].(string)), parse(m["ca_certificate"].(string))
		require.Equal(t, "edge", cert.Subject.CommonName)
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err, "signed by the hub CA for client auth")
		require.WithinDuration(t, time.Now().AddDate(0, 0, 365), cert.NotAfter, 48*time.Hour, "the site lifetime")

		// With a CSR the key stays with the caller; a node gets the node lifetime.
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}}, key)
		require.NoError(t, err)
		csr := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
		r = e.AsAdmin(http.MethodPost, "/api/pki/site/", map[string]any{"site": "edge", "node": "n1", "csr": csr})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Body))
		require.NotContains(t, r.Map(), "private_key")
		node := parse(r.Map()["certificate"].(string))
		require.Equal(t, "n1.edge", node.Subject.CommonName)
		require.True(t, key.PublicKey.Equal(node.PublicKey))
		require.WithinDuration(t, time.Now().AddDate(0, 0, 90), node.NotAfter, 48*time.Hour)
		require.Equal(t, m["ca_certificate"], r.Map()["ca_certificate"], "one CA, kept")

		for _, bad := range []map[string]any{{}, {"site": "nope"}, {"site": "edge", "csr": "garbage"}, {"site": "edge", "node": "a b"}} {
			r := e.AsAdmin(http.MethodPost, "/api/pki/site/", bad)
			require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", bad, r.Body)
		}
		require.Equal(t, http.StatusForbidden, e.Do(http.MethodPost, "/api/pki/site/", apitest.Bearer(e.CreateUser("nopki")), map[string]any{"site": "edge"}).Status)
	})
}
