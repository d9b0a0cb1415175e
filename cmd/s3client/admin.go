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
	"strings"

	"github.com/minio/minio-go/v7/pkg/signer"
)

// addPolicy creates or replaces the IAM policy name on a MinIO server through its admin API
// (PUT /minio/admin/v3/add-canned-policy?name=NAME, MinIO's cmd/admin-router.go), signed with
// AWS Signature Version 4 by minio-go's signer as the connection's user, who needs MinIO's
// admin:CreatePolicy. document is the policy's JSON, checked to be a JSON object before it is
// sent. Errors: a document that is not a JSON object, a refused or failed request (MinIO's
// answer is in the message).
func (s *store) addPolicy(ctx context.Context, c connection, name, document string) error {
	var doc map[string]any
	if err := json.Unmarshal([]byte(document), &doc); err != nil {
		return usageError(fmt.Sprintf("the policy is not a JSON object: %v", err))
	}
	u := *s.client.EndpointURL()
	u.Path = "/minio/admin/v3/add-canned-policy"
	u.RawQuery = url.Values{"name": {name}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), strings.NewReader(document))
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(document))
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	signed := signer.SignV4(*req, c.AccessKey, c.SecretKey, "", "us-east-1")
	resp, err := http.DefaultClient.Do(signed)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("add policy %s: %s: %s", name, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// bucketExists says whether the connection's bucket exists (HeadBucket).
func (s *store) bucketExists(ctx context.Context) (bool, error) {
	return s.client.BucketExists(ctx, s.bucket)
}
