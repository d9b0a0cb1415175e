package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/apimachinery/pkg/util/wait"
)

// connection is where and as whom to connect: the rook-minio module's outputs.
type connection struct {
	Endpoint, Bucket, AccessKey, SecretKey string
}

// loadConnection reads a connection from dir's files (endpoint, bucket, access_key, secret_key),
// falling back to the S3_* environment variables through getenv. Errors: a missing value, an
// unreadable file.
func loadConnection(dir string, getenv func(string) string) (connection, error) {
	var c connection
	type field struct {
		file, env string
		into      *string
	}
	fields := []field{
		{"endpoint", "S3_ENDPOINT", &c.Endpoint},
		{"bucket", "S3_BUCKET", &c.Bucket},
		{"access_key", "S3_ACCESS_KEY", &c.AccessKey},
		{"secret_key", "S3_SECRET_KEY", &c.SecretKey},
	}
	for _, f := range fields {
		*f.into = getenv(f.env)
		if dir == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.file))
		switch {
		case err == nil:
			*f.into = strings.TrimSpace(string(b))
		case !os.IsNotExist(err):
			return c, err
		}
	}
	for _, f := range fields {
		if *f.into == "" {
			return c, fmt.Errorf("no %s: give it as the file %s of --secret-dir or as $%s", f.file, f.file, f.env)
		}
	}
	return c, nil
}

// store is a minio-go client bound to one bucket.
type store struct {
	client   *minio.Client
	endpoint string
	bucket   string
}

// newStore parses the endpoint URL (http or https, host and optional port, no path) and makes a
// client with static credentials. Errors: an endpoint that is not such a URL.
func newStore(c connection) (*store, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("endpoint %q is not an http:// or https:// URL of a host", c.Endpoint)
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(c.AccessKey, c.SecretKey, ""),
		Secure: u.Scheme == "https",
	})
	if err != nil {
		return nil, err
	}
	return &store{client: client, endpoint: c.Endpoint, bucket: c.Bucket}, nil
}

// waitReady asks the server to list its buckets every retryEvery until it answers or timeout
// passes; an authentication refusal ends the wait at once, since waiting does not mend it.
func (s *store) waitReady(ctx context.Context, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, retryEvery, timeout, true, func(ctx context.Context) (bool, error) {
		_, last = s.client.ListBuckets(ctx)
		if last == nil {
			return true, nil
		}
		switch minio.ToErrorResponse(last).Code {
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
			return false, last
		}
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case wait.Interrupted(err) && last != nil:
		return fmt.Errorf("%s does not serve after %s: %w", s.endpoint, timeout, last)
	case wait.Interrupted(err):
		return err
	default:
		return fmt.Errorf("%s refuses the credentials: %w", s.endpoint, err)
	}
}

// makeBucket creates the bucket unless it exists; made says whether it was created now.
func (s *store) makeBucket(ctx context.Context) (made bool, err error) {
	exists, err := s.client.BucketExists(ctx, s.bucket)
	if err != nil || exists {
		return false, err
	}
	err = s.client.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{})
	if minio.ToErrorResponse(err).Code == "BucketAlreadyOwnedByYou" {
		return false, nil
	}
	return err == nil, err
}

func (s *store) put(ctx context.Context, key, text string) error {
	_, err := s.client.PutObject(ctx, s.bucket, key, strings.NewReader(text), int64(len(text)),
		minio.PutObjectOptions{ContentType: "text/plain"})
	return err
}

func (s *store) get(ctx context.Context, key string) (string, error) {
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return "", err
	}
	defer obj.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, obj); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (s *store) list(ctx context.Context) ([]string, error) {
	var keys []string
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			return nil, o.Err
		}
		keys = append(keys, o.Key)
	}
	return keys, nil
}

// roundtrip writes text at key, lists the bucket and reads key back, printing each step; it fails
// unless the list holds key and the text read is the text written.
func (s *store) roundtrip(ctx context.Context, key, text string, out io.Writer) error {
	if err := s.put(ctx, key, text); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	fmt.Fprintf(out, "put   %s/%s (%d bytes) at %s\n", s.bucket, key, len(text), s.endpoint)
	keys, err := s.list(ctx)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	fmt.Fprintf(out, "list  %s: %s\n", s.bucket, strings.Join(keys, ", "))
	if !slices.Contains(keys, key) {
		return fmt.Errorf("list of %s lacks %s", s.bucket, key)
	}
	got, err := s.get(ctx, key)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	fmt.Fprintf(out, "get   %s/%s: %q\n", s.bucket, key, got)
	if got != text {
		return fmt.Errorf("read back %q, wrote %q", got, text)
	}
	return nil
}
