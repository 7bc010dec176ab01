package vocab_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/thehub/hub/workflows/vocab"
)

func TestCipher(t *testing.T) {
	t.Parallel()
	key, err := vocab.ParseSecretKey(vocab.NewSecretKey())
	require.NoError(t, err)
	c, err := vocab.NewCipher(key)
	require.NoError(t, err)

	sealed, err := c.Seal("buckets.secret_access_key", "s3cr3t")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(sealed, "v1:"))
	require.NotContains(t, sealed, "s3cr3t")
	again, err := c.Seal("buckets.secret_access_key", "s3cr3t")
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "a fresh nonce every time")

	plain, err := c.Open("buckets.secret_access_key", sealed)
	require.NoError(t, err)
	require.Equal(t, "s3cr3t", plain)

	_, err = c.Open("buckets.access_key", sealed)
	require.ErrorIs(t, err, vocab.ErrBadSecretKey, "bound to its column")
	other, err := vocab.NewCipher(make([]byte, 32))
	require.NoError(t, err)
	_, err = other.Open("buckets.secret_access_key", sealed)
	require.ErrorIs(t, err, vocab.ErrBadSecretKey)
	_, err = c.Open("x", "plaintext")
	require.Error(t, err)

	empty, err := c.Seal("x", "")
	require.NoError(t, err)
	require.Empty(t, empty)
	plain, err = c.Open("x", "")
	require.NoError(t, err)
	require.Empty(t, plain)

	_, err = vocab.NewCipher([]byte("short"))
	require.Error(t, err)
	_, err = vocab.ParseSecretKey("not base64!")
	require.Error(t, err)
	_, err = vocab.ParseSecretKey(base64.StdEncoding.EncodeToString([]byte("sixteen-bytes-xx")))
	require.Error(t, err)
	k2, err := vocab.ParseSecretKey(base64.RawURLEncoding.EncodeToString(key))
	require.NoError(t, err)
	require.Equal(t, key, k2)
}
