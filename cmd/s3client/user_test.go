package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// minioBinary is the MinIO server hack/tools.sh minio builds (make workload-images), or
// $MINIO_BINARY; "" when neither is there.
func minioBinary() string {
	if p := os.Getenv("MINIO_BINARY"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	p := filepath.Join(home, ".cache", "conductor-tf", "workloads", "bin", "minio")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// TestMakeUserOnMinIO makes two users, each with its own bucket, on a real MinIO server (the one
// the rook-minio module runs): each reads and writes its bucket, and is refused on the other's.
// It is what checks the admin API's encrypted body (encryptForAdmin) against MinIO itself.
func TestMakeUserOnMinIO(t *testing.T) {
	bin := minioBinary()
	if bin == "" {
		t.Skip("no MinIO server built (hack/tools.sh minio, or $MINIO_BINARY)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	server := exec.CommandContext(ctx, bin, "server", t.TempDir(), "--address", addr, "--console-address", "127.0.0.1:0")
	server.Env = append(os.Environ(), "MINIO_ROOT_USER=admin", "MINIO_ROOT_PASSWORD=admin-secret-key", "HOME="+t.TempDir())
	var serverLog bytes.Buffer
	server.Stdout, server.Stderr = &serverLog, &serverLog
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = server.Wait() }()

	as := func(access, secret, bucket string, args ...string) (int, string) {
		t.Setenv("S3_ENDPOINT", "http://"+addr)
		t.Setenv("S3_ACCESS_KEY", access)
		t.Setenv("S3_SECRET_KEY", secret)
		t.Setenv("S3_BUCKET", bucket)
		var out, errs bytes.Buffer
		code := run(context.Background(), args, &out, &errs)
		return code, out.String() + errs.String()
	}
	for _, team := range []string{"team-a", "team-b"} {
		t.Setenv("S3_USER_SECRET_KEY", team+"-secret-key")
		if code, out := as("admin", "admin-secret-key", team+"-bucket", "make-user", "--wait", "1m", team); code != 0 {
			t.Fatalf("make-user %s: exit %d: %s\nserver: %s", team, code, out, serverLog.String())
		}
	}
	t.Setenv("S3_USER_SECRET_KEY", "team-a-secret-key")
	if code, out := as("admin", "admin-secret-key", "team-a-bucket", "make-user", "team-a"); code != 0 {
		t.Fatalf("make-user again (a retried Job): exit %d: %s", code, out)
	}
	if code, out := as("team-a", "team-a-secret-key", "team-a-bucket", "roundtrip", "k", "from a"); code != 0 || !strings.Contains(out, `"from a"`) {
		t.Fatalf("team-a on its bucket: exit %d: %s", code, out)
	}
	for _, args := range [][]string{{"list"}, {"put", "k", "from a"}} {
		code, out := as("team-a", "team-a-secret-key", "team-b-bucket", args...)
		if code != 1 || !strings.Contains(out, "Access Denied") {
			t.Errorf("team-a %v on team-b's bucket: exit %d: %s, want Access Denied", args, code, out)
		}
	}
	if code, out := as("team-b", "wrong", "team-b-bucket", "list"); code != 1 {
		t.Errorf("a wrong key: exit %d: %s", code, out)
	}
	t.Setenv("S3_USER_SECRET_KEY", "")
	if code, out := as("admin", "admin-secret-key", "c-bucket", "make-user", "c"); code != 2 {
		t.Errorf("make-user without a key: exit %d: %s, want a usage error", code, out)
	}
}
