package targets

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// sumMeta is the user metadata key (x-amz-meta-sha256) holding the
// content SHA-256 that Stat reports.
const sumMeta = "sha256"

const (
	// Above one part's size an upload is multipart; either way at most
	// one part is held in memory (see Put).
	defaultMultipartThreshold = defaultPartSize
	defaultPartSize           = 16 << 20
	maxParts                  = 10000
)

// S3 is a Driver for S3 and S3-compatible object stores, addressed
// path-style so that any endpoint works without wildcard DNS.
type S3 struct {
	client *s3.Client
	bucket string
	prefix string

	// multipartThreshold and partSize are fields so tests can exercise
	// multipart uploads with small objects.
	multipartThreshold int64
	partSize           int64

	// lockTTL and lockRenew time the locks of TryLock (s3_lock.go);
	// fields so tests need not wait for minutes.
	lockTTL, lockRenew time.Duration
	// wall is the wall clock the locks also go by (tests move it).
	wall func() time.Time
}

// NewS3 returns an S3 driver for cfg. It does not contact the server.
func NewS3(cfg Config) (*S3, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3 target: Bucket is empty")
	}
	prefix, err := cleanPrefix(cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("s3 target: %w", err)
	}
	endpoint, err := endpointURL(cfg)
	if err != nil {
		return nil, fmt.Errorf("s3 target: %w", err)
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	var creds aws.CredentialsProvider = aws.AnonymousCredentials{}
	if cfg.AccessKeyID != "" || cfg.SecretAccessKey != "" {
		creds = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, ""))
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.InsecureSkipVerify = !cfg.SSLVerify //nolint:gosec // opt-in via Config.SSLVerify
	})
	opts := s3.Options{
		Region:       region,
		Credentials:  creds,
		UsePathStyle: true,
		HTTPClient:   httpClient,
		// Only send and check the checksums an operation requires: many
		// S3-compatible servers reject the SDK's default CRC trailers.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if endpoint != "" {
		opts.BaseEndpoint = aws.String(endpoint)
	}
	return &S3{
		client:             s3.New(opts),
		bucket:             cfg.Bucket,
		prefix:             prefix,
		multipartThreshold: defaultMultipartThreshold,
		partSize:           defaultPartSize,
		lockTTL:            defaultLockTTL,
		lockRenew:          defaultLockRenew,
		wall:               func() time.Time { return time.Now().Round(0) },
	}, nil
}

// endpointURL accepts either a full URL or a bare host plus Scheme/Port.
func endpointURL(cfg Config) (string, error) {
	if cfg.Endpoint == "" {
		return "", nil
	}
	raw := cfg.Endpoint
	if !strings.Contains(raw, "://") {
		scheme := cfg.Scheme
		if scheme == "" {
			scheme = "https"
		}
		raw = scheme + "://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", cfg.Endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("endpoint %q: scheme must be http or https", cfg.Endpoint)
	}
	if cfg.Port != 0 && u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(cfg.Port))
	}
	return u.String(), nil
}

func (s *S3) key(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// Put uploads with a single PutObject, or a multipart upload above the
// threshold. The SHA-256 is stored as user metadata, which later uploads
// of the same content trust, so Put sends only bytes it has hashed: a
// single PutObject's body is read into memory and checked before it is
// sent (and the sum is also signed as the SigV4 payload hash, which a real
// S3 checks), a multipart upload's parts are hashed as they are sent and
// the upload is completed only when they add up to the sum.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	body, n, sum, cleanup, err := seekable(ctx, r, size)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	defer cleanup()
	meta := map[string]string{sumMeta: sum}
	if n > s.multipartThreshold {
		return s.putMultipart(ctx, key, k, body, n, meta)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(ctxReader{ctx, body}, buf); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if read := sha256.Sum256(buf); hex.EncodeToString(read[:]) != sum {
		return fmt.Errorf("put %s: the content read has sha256 %x, not %s: it changed after it was hashed", key, read, sum)
	}
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(k),
		Body:          bytes.NewReader(buf),
		ContentLength: aws.Int64(n),
		ContentMD5:    contentMD5(buf),
		Metadata:      meta,
	}, withPayloadHash(sum))
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

func (s *S3) putMultipart(ctx context.Context, key, k string, body io.ReadSeeker, n int64, meta map[string]string) (err error) {
	partSize := max(s.partSize, (n+maxParts-1)/maxParts)
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(k), Metadata: meta,
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			// Abort even when ctx is cancelled so no parts are left billed.
			_, _ = s.client.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{
				Bucket: aws.String(s.bucket), Key: aws.String(k), UploadId: up.UploadId,
			})
		}
	}()
	// Each part is read once and hashed as it is sent: S3 checks each
	// part's own MD5 (Content-MD5), never the whole object's, so only the
	// bytes actually uploaded can be checked against the checksum the
	// object is labelled with. A file that changed since it was hashed is
	// not stored.
	buf := make([]byte, partSize)
	h := sha256.New()
	var parts []types.CompletedPart
	for num, off := int32(1), int64(0); off < n; num, off = num+1, off+partSize {
		part := buf[:min(partSize, n-off)]
		if _, err := io.ReadFull(ctxReader{ctx, body}, part); err != nil {
			return fmt.Errorf("put %s: part %d: %w", key, num, err)
		}
		h.Write(part)
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(s.bucket), Key: aws.String(k), UploadId: up.UploadId,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part))),
			ContentMD5: contentMD5(part),
		})
		if err != nil {
			return fmt.Errorf("put %s: part %d: %w", key, num, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
	}
	if sent := hex.EncodeToString(h.Sum(nil)); sent != meta[sumMeta] {
		return fmt.Errorf("put %s: the content sent has sha256 %s, not %s: it changed while uploading", key, sent, meta[sumMeta])
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(s.bucket), Key: aws.String(k), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return fmt.Errorf("put %s: complete: %w", key, err)
	}
	return nil
}

// contentMD5 is the Content-MD5 of b, which S3 servers check against
// what they received (a part sent unsigned over TLS, a single put to a
// server that does not check the signed payload hash): the bytes stored
// are those sent, or the request fails.
func contentMD5(b []byte) *string {
	sum := md5.Sum(b)
	return aws.String(base64.StdEncoding.EncodeToString(sum[:]))
}

// seekable returns r as a ReadSeeker positioned at the start of the
// content, with its length and SHA-256. The SDK needs to rewind bodies
// for retries and signing; readers that cannot seek are spooled to a
// temporary file.
func seekable(ctx context.Context, r io.Reader, size int64) (io.ReadSeeker, int64, string, func(), error) {
	noop := func() {}
	if cr, ok := r.(*ChecksummedReader); ok && cr.Sum != "" && size >= 0 {
		return cr, size, cr.Sum, noop, nil
	}
	if rs, ok := r.(io.ReadSeeker); ok {
		start, err := rs.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, 0, "", noop, err
		}
		n, sum, err := hashN(ctx, rs, size)
		if err != nil {
			return nil, 0, "", noop, err
		}
		if _, err := rs.Seek(start, io.SeekStart); err != nil {
			return nil, 0, "", noop, err
		}
		return rs, n, sum, noop, nil
	}
	tmp, err := os.CreateTemp("", "hub-s3-put-*")
	if err != nil {
		return nil, 0, "", noop, err
	}
	// Unlinked at once: the open file lives on, and nothing is left in the
	// temp folder even when the worker is killed mid-upload.
	_ = os.Remove(tmp.Name())
	cleanup := func() { _ = tmp.Close() }
	n, sum, err := hashN(ctx, io.TeeReader(r, tmp), size)
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		cleanup()
		return nil, 0, "", noop, err
	}
	return tmp, n, sum, cleanup, nil
}

// hashN reads exactly size bytes (all of r when size < 0) and fails when
// r holds a different amount.
func hashN(ctx context.Context, r io.Reader, size int64) (int64, string, error) {
	h := sha256.New()
	src := io.Reader(ctxReader{ctx, r})
	if size >= 0 {
		src = io.LimitReader(src, size+1)
	}
	n, err := copyBuffer(h, src)
	if err != nil {
		return 0, "", err
	}
	if size >= 0 && n != size {
		return 0, "", fmt.Errorf("read %d bytes, expected %d", n, size)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// withPayloadHash hands the SDK a SHA-256 we already computed, sparing it
// a read of the body and making the upload signed-payload over TLS too.
func withPayloadHash(sum string) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Insert(middleware.FinalizeMiddlewareFunc("HubPayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, sum), in)
				}), (*v4.ComputePayloadSHA256)(nil).ID(), middleware.Before)
		})
	}
}

// Get streams the object.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	if err != nil {
		return nil, wrapS3("get", key, err)
	}
	return out.Body, nil
}

// Stat reports the SHA-256 stored as metadata by Put.
func (s *S3) Stat(ctx context.Context, key string) (Object, error) {
	k, err := s.key(key)
	if err != nil {
		return Object{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	if err != nil {
		return Object{}, wrapS3("stat", key, err)
	}
	obj := Object{Key: key, Size: aws.ToInt64(out.ContentLength), Mtime: aws.ToTime(out.LastModified)}
	for mk, mv := range out.Metadata {
		// Servers differ in the case they return metadata keys in.
		if strings.EqualFold(mk, sumMeta) {
			obj.Checksum = strings.ToLower(mv)
		}
	}
	return obj, nil
}

// Delete removes the object; S3 itself treats absent keys as success.
func (s *S3) Delete(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	if err != nil {
		if err = wrapS3("delete", key, err); errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// List pages with StartAfter so that the marker is simply the last key
// listed, the same contract as the filesystem driver. Lock objects
// (TryLock) are left out.
func (s *S3) List(ctx context.Context, prefix, marker string, max int) ([]Object, string, error) {
	if max <= 0 {
		max = 1000
	}
	in := &s3.ListObjectsV2Input{
		Bucket:  aws.String(s.bucket),
		Prefix:  aws.String(s.prefix + prefix),
		MaxKeys: aws.Int32(int32(min(max, 1000))),
	}
	if marker != "" {
		in.StartAfter = aws.String(s.prefix + marker)
	}
	out, err := s.client.ListObjectsV2(ctx, in)
	// A page may hold no key and still say more follow (S3 promises only
	// "up to MaxKeys"; a bucket with many delete markers): its token
	// leads on. Read as the end, it would hide every key after it from
	// the collector, which would take their content for unreferenced.
	for err == nil && len(out.Contents) == 0 && aws.ToBool(out.IsTruncated) {
		token := aws.ToString(out.NextContinuationToken)
		if token == "" || token == aws.ToString(in.ContinuationToken) {
			return nil, "", fmt.Errorf("list %q: the target answered an empty page that says more keys follow, without a new token to read them by", prefix)
		}
		in.ContinuationToken = out.NextContinuationToken
		out, err = s.client.ListObjectsV2(ctx, in)
	}
	if err != nil {
		return nil, "", fmt.Errorf("list %q: %w", prefix, err)
	}
	objs := make([]Object, 0, len(out.Contents))
	last := ""
	for _, o := range out.Contents {
		key := strings.TrimPrefix(aws.ToString(o.Key), s.prefix)
		last = key
		if strings.HasPrefix(key[strings.LastIndexByte(key, '/')+1:], lockPrefix) {
			continue // a lock object (TryLock), as on a filesystem target
		}
		objs = append(objs, Object{
			Key:   key,
			Size:  aws.ToInt64(o.Size),
			Mtime: aws.ToTime(o.LastModified),
		})
	}
	// The marker is the last key listed, even a lock's: a page may then
	// hold no object and still not be the last.
	next := ""
	if aws.ToBool(out.IsTruncated) {
		next = last
	}
	return objs, next, nil
}

func wrapS3(op, key string, err error) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
		}
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// GetPinned is Get, with the ETag of the object sent as the pin.
func (s *S3) GetPinned(ctx context.Context, key string) (io.ReadCloser, string, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, "", err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	if err != nil {
		return nil, "", wrapS3("get", key, err)
	}
	return out.Body, aws.ToString(out.ETag), nil
}

// MovePinned copies the object with the ETag pin to to (read with
// If-Match, and its ETag checked, for servers that ignore the condition),
// then deletes it with If-Match: S3 deletes it only while key holds it. A
// server that ignores If-Match on a DELETE is asked for the ETag just
// before: an upload landing between that look and the DELETE is deleted.
// ErrChanged removes the copy.
func (s *S3) MovePinned(ctx context.Context, key, to, pin string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	changed := fmt.Errorf("move %s: %w", key, ErrChanged)
	if pin == "" {
		return changed
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k), IfMatch: aws.String(pin)})
	switch {
	case preconditionFailed(err):
		return changed
	case err != nil:
		return wrapS3("move", key, err)
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	if aws.ToString(out.ETag) != pin {
		err = changed
	} else {
		err = s.Put(ctx, to, out.Body, size)
	}
	out.Body.Close()
	if err != nil {
		return err
	}
	drop := func() error {
		_ = s.Delete(context.WithoutCancel(ctx), to)
		return changed
	}
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k)})
	switch {
	case err == nil && aws.ToString(head.ETag) != pin:
		return drop()
	case err == nil:
	case errors.Is(wrapS3("move", key, err), ErrNotFound):
		return nil // gone since: the copy is all there is
	default:
		return wrapS3("move", key, err)
	}
	_, err = s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(k), IfMatch: aws.String(pin)})
	switch {
	case err == nil:
	case preconditionFailed(err):
		return drop()
	case errors.Is(wrapS3("move", key, err), ErrNotFound):
	default:
		return wrapS3("move", key, err)
	}
	return nil
}

// preconditionFailed: a condition (If-Match) did not hold.
func preconditionFailed(err error) bool {
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed
}
