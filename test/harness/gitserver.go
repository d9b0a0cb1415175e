package harness

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// GitServer serves one git repository over git's "dumb" HTTP protocol (info/refs and objects as
// plain files) behind HTTP basic authentication, as a private git host does: real git answers its
// 401 from a credential helper, or fails.
type GitServer struct {
	// URL is the repository's git:: source address prefix (git::http://127.0.0.1:<port>/modules.git).
	URL string
	// Host is 127.0.0.1:<port>, as git-credential-store lines name it.
	Host string

	srv *http.Server
}

// StartGitServer makes dir/modules.git a repository holding moduleDir's files under modules/,
// tagged tag, and serves it on 127.0.0.1 (a random port) to user with password only. Stop it with
// Close. It returns git's output when a git command fails.
func StartGitServer(dir, moduleDir, tag, user, password string) (*GitServer, error) {
	repo := filepath.Join(dir, "modules.git")
	if err := os.MkdirAll(filepath.Join(repo, "modules"), 0o755); err != nil {
		return nil, err
	}
	git := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@localhost",
			"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %w: %s", args, err, out)
		}
		return nil
	}
	if err := exec.Command("cp", "-R", moduleDir, filepath.Join(repo, "modules")).Run(); err != nil {
		return nil, fmt.Errorf("copying %s: %w", moduleDir, err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "modules"}, {"tag", tag}, {"update-server-info"}} {
		if err := git(args...); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	files := http.StripPrefix("/modules.git/", http.FileServer(http.Dir(filepath.Join(repo, ".git"))))
	g := &GitServer{Host: ln.Addr().String()}
	g.URL = "git::http://" + g.Host + "/modules.git"
	g.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="modules"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		files.ServeHTTP(w, r)
	})}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

// Close stops the server.
func (g *GitServer) Close() { _ = g.srv.Close() }
