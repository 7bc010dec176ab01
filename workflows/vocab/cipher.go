package vocab

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretKeySize is the length of the key that encrypts secrets at rest
// (AES-256).
const SecretKeySize = 32

// sealedPrefix marks the format of a sealed value so that the scheme can
// change later without guessing.
const sealedPrefix = "v1:"

// ErrBadSecretKey means a sealed value cannot be opened with the key in
// use: the hub was started with a different HUB_SECRET_KEY.
var ErrBadSecretKey = errors.New("secret cannot be decrypted with the configured secret key")

// Cipher encrypts the secrets the hub must be able to read back (target
// credentials) with AES-256-GCM. Each value is bound to the column it is
// stored in, so a ciphertext copied into another column does not open.
type Cipher struct {
	aead cipher.AEAD
}

// NewCipher returns a Cipher for a 32-byte key.
func NewCipher(key []byte) (*Cipher, error) {
	if len(key) != SecretKeySize {
		return nil, fmt.Errorf("secret key must be %d bytes, got %d", SecretKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secret key: %w", err)
	}
	return &Cipher{aead: aead}, nil
}

// ParseSecretKey decodes a base64 (standard or URL, padded or not) 32-byte key.
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != SecretKeySize {
				return nil, fmt.Errorf("secret key must decode to %d bytes, got %d", SecretKeySize, len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("secret key is not valid base64")
}

// NewSecretKey returns a fresh random key, base64-encoded.
func NewSecretKey() string {
	b := make([]byte, SecretKeySize)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the OS is broken; nothing sensible to do
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Seal encrypts plaintext for the named column ("buckets.secret_access_key").
// The empty string stays empty: "no secret" needs no ciphertext.
func (c *Cipher) Seal(column, plaintext string) (string, error) {
	if plaintext == "" {
		return "", nil
	}
	nonce := make([]byte, c.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal %s: %w", column, err)
	}
	sealed := c.aead.Seal(nonce, nonce, []byte(plaintext), []byte(column))
	return sealedPrefix + base64.StdEncoding.EncodeToString(sealed), nil
}

// Open decrypts a value Seal produced for the same column.
func (c *Cipher) Open(column, sealed string) (string, error) {
	if sealed == "" {
		return "", nil
	}
	raw, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", fmt.Errorf("open %s: unknown format", column)
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) < c.aead.NonceSize() {
		return "", fmt.Errorf("open %s: malformed value", column)
	}
	n := c.aead.NonceSize()
	plain, err := c.aead.Open(nil, b[:n], b[n:], []byte(column))
	if err != nil {
		return "", fmt.Errorf("open %s: %w", column, ErrBadSecretKey)
	}
	return string(plain), nil
}

// Secret field names: the API's names, also the Cipher's binding labels
// together with the table name (see SecretColumn).
const (
	SecretAccessKey       = "access_key"
	SecretAccessKeyID     = "access_key_id"
	SecretSecretAccessKey = "secret_access_key"
	SecretCredentialsJSON = "credentials_json"
)

// SecretColumn is the Cipher's binding label of a secret field in a table.
func SecretColumn(table, field string) string { return table + "." + field }
