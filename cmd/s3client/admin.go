package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/minio/minio-go/v7/pkg/signer"
)

// admin sends one request to a MinIO server's admin API (/minio/admin/v3/<path>, MinIO's
// cmd/admin-router.go), signed with AWS Signature Version 4 by minio-go's signer as the
// connection's user, and returns MinIO's answer body on 200. Errors: a refused or failed request
// (MinIO's answer is in the message).
func (s *store) admin(ctx context.Context, c connection, method, path string, query url.Values, body []byte) ([]byte, error) {
	u := *s.client.EndpointURL()
	u.Path = "/minio/admin/v3/" + path
	u.RawQuery = query.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	signed := signer.SignV4(*req, c.AccessKey, c.SecretKey, "", "us-east-1")
	resp, err := http.DefaultClient.Do(signed)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(answer))
	}
	return answer, nil
}

// addPolicy creates or replaces the IAM policy name on a MinIO server (add-canned-policy); the
// connection's user needs MinIO's admin:CreatePolicy. document is the policy's JSON, checked to be
// a JSON object before it is sent. Errors: a document that is not a JSON object, a refused or
// failed request.
func (s *store) addPolicy(ctx context.Context, c connection, name, document string) error {
	var doc map[string]any
	if err := json.Unmarshal([]byte(document), &doc); err != nil {
		return usageError(fmt.Sprintf("the policy is not a JSON object: %v", err))
	}
	_, err := s.admin(ctx, c, http.MethodPut, "add-canned-policy", url.Values{"name": {name}}, []byte(document))
	if err != nil {
		return fmt.Errorf("add policy %s: %w", name, err)
	}
	return nil
}

// addUser creates user, or sets its secret key when it exists, enabled (add-user; the body is
// sealed with the connection's secret key, encryptForAdmin). The connection's user needs MinIO's
// admin:CreateUser. Errors: a refused or failed request.
func (s *store) addUser(ctx context.Context, c connection, user, secret string) error {
	plain, _ := json.Marshal(map[string]string{"secretKey": secret, "status": "enabled"})
	body, err := encryptForAdmin(c.SecretKey, plain)
	if err != nil {
		return err
	}
	if _, err := s.admin(ctx, c, http.MethodPut, "add-user", url.Values{"accessKey": {user}}, body); err != nil {
		return fmt.Errorf("add user %s: %w", user, err)
	}
	return nil
}

// attachPolicy makes policy the only policy of user (set-user-or-group-policy). The connection's
// user needs MinIO's admin:AttachUserOrGroupPolicy. Errors: a refused or failed request.
func (s *store) attachPolicy(ctx context.Context, c connection, policy, user string) error {
	q := url.Values{"policyName": {policy}, "userOrGroup": {user}, "isGroup": {"false"}}
	if _, err := s.admin(ctx, c, http.MethodPut, "set-user-or-group-policy", q, nil); err != nil {
		return fmt.Errorf("attach policy %s to user %s: %w", policy, user, err)
	}
	return nil
}

// bucketPolicy is an IAM policy that allows every S3 action on bucket and its objects, and
// nothing else.
func bucketPolicy(bucket string) string {
	doc, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect":   "Allow",
			"Action":   []string{"s3:*"},
			"Resource": []string{"arn:aws:s3:::" + bucket, "arn:aws:s3:::" + bucket + "/*"},
		}},
	})
	return string(doc)
}

// makeUser gives user (secret key secret) the connection's bucket and nothing else: it makes the
// bucket unless it exists, writes the policy bucket-<bucket> (bucketPolicy), creates the user or
// sets its key, and makes that policy the user's. Each step is idempotent: a retried Job repeats
// them. The connection is the server's administrator. Errors: the first step that fails.
func (s *store) makeUser(ctx context.Context, c connection, user, secret string) error {
	if _, err := s.makeBucket(ctx); err != nil {
		return err
	}
	policy := "bucket-" + s.bucket
	if err := s.addPolicy(ctx, c, policy, bucketPolicy(s.bucket)); err != nil {
		return err
	}
	if err := s.addUser(ctx, c, user, secret); err != nil {
		return err
	}
	return s.attachPolicy(ctx, c, policy, user)
}

// bucketExists says whether the connection's bucket exists (HeadBucket).
func (s *store) bucketExists(ctx context.Context) (bool, error) {
	return s.client.BucketExists(ctx, s.bucket)
}
