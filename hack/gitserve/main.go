// Command gitserve serves a git repository over git's "dumb" HTTP protocol (plain files: info/refs
// and objects, after `git update-server-info`), so that pods of a kind cluster fetch modules from
// the host as classes name them in production (git::http://…). make demo runs it on the kind
// network's gateway; the e2e suite does the same in its own process.
//
//	gitserve -repo DIR -listen HOST:PORT
//
// It prints the repository's git:: URL (git::http://HOST:PORT/modules.git) on standard output once
// it listens, then serves until it is signalled. Exit status 1 when it cannot listen.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	repo := flag.String("repo", "", "a git repository (its .git directory is served)")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	if *repo == "" {
		fmt.Fprintln(os.Stderr, "usage: gitserve -repo DIR [-listen HOST:PORT]")
		os.Exit(2)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gitserve:", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: http.StripPrefix("/modules.git/", http.FileServer(http.Dir(filepath.Join(*repo, ".git"))))}
	fmt.Printf("git::http://%s/modules.git\n", l.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(l); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "gitserve:", err)
		os.Exit(1)
	}
}
