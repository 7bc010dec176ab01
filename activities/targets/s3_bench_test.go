package targets

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
)

// BenchmarkS3Put times the driver's single-part Put of an 8 MiB object
// (since 8c52ce7 read into memory and hashed again before it is sent)
// against the SDK's own PutObject of the same bytes, on the in-process
// S3 server: what the check costs on top of the upload.
func BenchmarkS3Put(b *testing.B) {
	d, err := Open(newFakeS3(b, false))
	require.NoError(b, err)
	s := d.(*S3)
	ctx := context.Background()
	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	sum := sha256.Sum256(data)
	hexSum := hex.EncodeToString(sum[:])
	b.Run("hub", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			require.NoError(b, s.Put(ctx, fmt.Sprintf("hub/%d", i%4), &ChecksummedReader{ReadSeeker: bytes.NewReader(data), Sum: hexSum}, int64(len(data))))
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(fmt.Sprintf("sdk/%d", i%4)),
				Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
			require.NoError(b, err)
		}
	})
}
