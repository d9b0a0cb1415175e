package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConnection(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{"endpoint": "http://minio.store.svc:9000\n", "bucket": "assets", "access_key": "minio"} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"S3_SECRET_KEY": "from-env", "S3_BUCKET": "loses-to-the-file"}
	c, err := loadConnection(dir, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := connection{Endpoint: "http://minio.store.svc:9000", Bucket: "assets", AccessKey: "minio", SecretKey: "from-env"}
	if c != want {
		t.Errorf("got %+v, want %+v (a file wins over a variable, values trimmed)", c, want)
	}

	_, err = loadConnection("", func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "no endpoint") {
		t.Errorf("no values: got %v, want an error naming the endpoint", err)
	}
}

func TestNewStoreRefusesEndpointsThatAreNotURLsOfAHost(t *testing.T) {
	for _, e := range []string{"minio:9000", "ftp://minio:9000", "http://", "http://minio:9000/bucket"} {
		if _, err := newStore(connection{Endpoint: e, Bucket: "b", AccessKey: "a", SecretKey: "s"}); err == nil {
			t.Errorf("endpoint %q: accepted", e)
		}
	}
	s, err := newStore(connection{Endpoint: "https://s3.example.org", Bucket: "b", AccessKey: "a", SecretKey: "s"})
	if err != nil || s.client.EndpointURL().Scheme != "https" {
		t.Errorf("https endpoint: %v, %v", s, err)
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Setenv("S3_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("S3_BUCKET", "b")
	t.Setenv("S3_ACCESS_KEY", "a")
	t.Setenv("S3_SECRET_KEY", "s")
	for _, args := range [][]string{nil, {"remove-everything"}, {"put", "only-a-key"}, {"get"}} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), args, &out, &errs); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errs.String())
		}
	}
}

func TestAddPolicySignsAnAdminRequest(t *testing.T) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		if r.URL.Query().Get("name") == "refused" {
			http.Error(w, `{"Code":"XMinioAdminNoSuchPolicy"}`, http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	c := connection{Endpoint: srv.URL, Bucket: "b", AccessKey: "root", SecretKey: "secret"}
	s, err := newStore(c)
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"Version":"2012-10-17","Statement":[]}`
	if err := s.addPolicy(context.Background(), c, "system:serviceaccount:ns:sa", doc); err != nil {
		t.Fatal(err)
	}
	if got.Method != http.MethodPut || got.URL.Path != "/minio/admin/v3/add-canned-policy" ||
		got.URL.Query().Get("name") != "system:serviceaccount:ns:sa" || body != doc {
		t.Errorf("sent %s %s %q", got.Method, got.URL, body)
	}
	if a := got.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=root/") {
		t.Errorf("Authorization %q: want a Signature V4 of the connection's user", a)
	}
	if err := s.addPolicy(context.Background(), c, "refused", doc); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a refusal: got %v, want the server's status", err)
	}
	if err := s.addPolicy(context.Background(), c, "p", "not json"); err == nil {
		t.Error("a document that is not JSON was sent")
	}
}
