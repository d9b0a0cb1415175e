// Command s3client is the S3 client of the rook-minio module and of the checks that use its store:
// it makes the claim's bucket once the server answers (the module's bucket Job), and writes, lists
// and reads objects back through a claim's connection Secret (make demo, the e2e suite). It talks
// S3 through minio-go, as any application would.
//
//	s3client make-bucket [--wait 2m]        create S3_BUCKET unless it exists
//	s3client put KEY TEXT                   write an object
//	s3client get KEY                        print an object
//	s3client list                           print the bucket's keys, one a line
//	s3client roundtrip KEY TEXT             put, list and get back; fail unless all three agree
//	s3client bucket-exists                  print true or false
//	s3client add-policy NAME JSON           create or replace a MinIO IAM policy (admin API)
//	s3client make-user USER                 give USER (secret key $S3_USER_SECRET_KEY) S3_BUCKET and
//	                                        nothing else: the bucket, a policy on it, the user (admin API)
//
// Where to connect comes from a connection Secret mounted as a directory (--secret-dir, files
// endpoint, bucket, access_key, secret_key: the module's outputs) or from the environment
// (S3_ENDPOINT, S3_BUCKET, S3_ACCESS_KEY, S3_SECRET_KEY); a file wins over a variable. The endpoint
// is a URL (http://host:port or https://host:port). Exit status: 0 on success, 1 on an S3 or
// connection error (said on standard error), 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("s3client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secretDir := fs.String("secret-dir", "", "a mounted connection Secret: files endpoint, bucket, access_key, secret_key")
	wait := fs.Duration("wait", 0, "how long to retry while the server does not answer yet (e.g. 2m)")
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: s3client [--secret-dir DIR] [--wait D] make-bucket|put KEY TEXT|get KEY|list|roundtrip KEY TEXT|bucket-exists|add-policy NAME JSON|make-user USER")
		return 2
	}
	cmd, rest := args[0], args[1:]
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	conn, err := loadConnection(*secretDir, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "s3client:", err)
		return 2
	}
	store, err := newStore(conn)
	if err != nil {
		fmt.Fprintln(stderr, "s3client:", err)
		return 2
	}
	if *wait > 0 {
		if err := store.waitReady(ctx, *wait); err != nil {
			fmt.Fprintln(stderr, "s3client:", err)
			return 1
		}
	}
	if err := dispatch(ctx, store, conn, cmd, fs.Args(), os.Getenv, stdout); err != nil {
		fmt.Fprintln(stderr, "s3client:", err)
		var usage usageError
		if errors.As(err, &usage) {
			return 2
		}
		return 1
	}
	return 0
}

type usageError string

func (e usageError) Error() string { return string(e) }

// dispatch runs one command against store.
// getenv gives make-user the user's secret key (S3_USER_SECRET_KEY): never an argument, which
// anyone who lists the pod's processes reads.
func dispatch(ctx context.Context, store *store, conn connection, cmd string, args []string, getenv func(string) string, out io.Writer) error {
	want := map[string]int{"make-bucket": 0, "put": 2, "get": 1, "list": 0, "roundtrip": 2, "bucket-exists": 0, "add-policy": 2, "make-user": 1}
	n, ok := want[cmd]
	if !ok {
		return usageError(fmt.Sprintf("unknown command %q", cmd))
	}
	if len(args) != n {
		return usageError(fmt.Sprintf("%s takes %d arguments, got %d", cmd, n, len(args)))
	}
	switch cmd {
	case "make-bucket":
		made, err := store.makeBucket(ctx)
		if err != nil {
			return err
		}
		if made {
			fmt.Fprintf(out, "bucket %s created at %s\n", store.bucket, store.endpoint)
		} else {
			fmt.Fprintf(out, "bucket %s exists at %s\n", store.bucket, store.endpoint)
		}
	case "put":
		if err := store.put(ctx, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(out, "put %s/%s (%d bytes)\n", store.bucket, args[0], len(args[1]))
	case "get":
		text, err := store.get(ctx, args[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(out, text)
	case "list":
		keys, err := store.list(ctx)
		if err != nil {
			return err
		}
		for _, k := range keys {
			fmt.Fprintln(out, k)
		}
	case "roundtrip":
		return store.roundtrip(ctx, args[0], args[1], out)
	case "bucket-exists":
		exists, err := store.bucketExists(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, exists)
	case "add-policy":
		if err := store.addPolicy(ctx, conn, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(out, "policy %s written at %s\n", args[0], store.endpoint)
	case "make-user":
		secret := getenv("S3_USER_SECRET_KEY")
		if len(secret) < 8 {
			return usageError("make-user reads the user's secret key, at least 8 characters, from $S3_USER_SECRET_KEY")
		}
		if err := store.makeUser(ctx, conn, args[0], secret); err != nil {
			return err
		}
		fmt.Fprintf(out, "user %s has bucket %s at %s\n", args[0], store.bucket, store.endpoint)
	}
	return nil
}

// retryEvery is how often waitReady asks a server that does not answer yet.
const retryEvery = 2 * time.Second
