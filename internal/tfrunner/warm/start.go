package warm

// Which providers of a run may be served warm, and how a warm provider process is started and
// stopped.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-config-inspect/tfconfig"
	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/conductor-tf/conductor-tf/internal/sandbox"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// warmable returns the providers of a run that may be served warm: those listed in Providers, and
// none when a module the run installed declares a provider alias (Terraform sends every alias's
// configuration to the one process of a provider, so they would overwrite each other).
func (wp *Providers) Warmable(workDir string, providers []Binary) []Binary {
	if wp.hasAliases(workDir) {
		return nil
	}
	var out []Binary
	for _, p := range providers {
		for _, name := range wp.Providers {
			if p.Address == name || strings.HasSuffix(p.Address, "/"+name) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// hasAliases reports whether any module init installed for workDir (its modules.json manifest)
// declares a provider configuration with an alias or configuration_aliases; a module that cannot
// be read counts as having them. Answers are kept by module directory.
func (wp *Providers) hasAliases(workDir string) bool {
	data, err := wsfs.ReadInit(workDir, filepath.Join("modules", "modules.json"))
	if err != nil {
		return true
	}
	var manifest struct{ Modules []struct{ Dir string } }
	if json.Unmarshal(data, &manifest) != nil {
		return true
	}
	for _, m := range manifest.Modules {
		dir := m.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(workDir, dir)
		}
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		wp.mu.Lock()
		has, known := wp.aliases[dir]
		wp.mu.Unlock()
		if !known {
			has = declaresAliases(dir)
			wp.mu.Lock()
			wp.aliases[dir] = has
			wp.mu.Unlock()
		}
		if has {
			return true
		}
	}
	return false
}

// declaresAliases reads one module (terraform-config-inspect) for provider aliases.
func declaresAliases(dir string) bool {
	mod, diags := tfconfig.LoadModule(dir)
	if diags.HasErrors() {
		return true
	}
	for _, pc := range mod.ProviderConfigs {
		if pc.Alias != "" {
			return true
		}
	}
	for _, rp := range mod.RequiredProviders {
		if len(rp.ConfigurationAliases) > 0 {
			return true
		}
	}
	return false
}

// start runs the provider as Terraform does (a go-plugin client: Terraform's handshake, protocol
// 5 or 6 over gRPC, no TLS since a run that reattaches brings none), in a process group of its own
// with exactly env as its environment, and returns it once it serves, with the information to
// reattach to it: go-plugin's ReattachConfig, its negotiated protocol version, and Test set, which
// tells the runs' go-plugin clients not to stop the process when they end. It fails when the
// provider does not serve within warmStartTimeout or ctx ends first.
//
// What the provider writes to its stdout and stderr goes, as for the providers Terraform starts,
// through go-plugin's stdio stream to the run attached to it (between runs it waits in a pipe).
func (wp *Providers) start(ctx context.Context, pb Binary, key string, env map[string]string) (*process, error) {
	if err := os.MkdirAll(wp.dir, 0o700); err != nil {
		return nil, err
	}
	sockDir, err := secretDir(wp.dir)
	if err != nil {
		return nil, err
	}
	env = maps.Clone(env)
	// go-plugin's server makes its socket in PLUGIN_UNIX_SOCKET_DIR, or TMPDIR with older releases.
	env["PLUGIN_UNIX_SOCKET_DIR"], env["TMPDIR"], env["HOME"] = sockDir, sockDir, sockDir
	path, env := wp.Sandbox.Command(pb.Path, env, sandbox.Access{Write: []string{sockDir}, Trusted: []string{filepath.Dir(pb.Path)}})
	cmd := exec.Command(path)
	cmd.Dir = sockDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  providerHandshake,
		VersionedPlugins: providerProtocols,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Cmd:              cmd,
		SkipHostEnv:      true, // env only: never this process's environment
		StartTimeout:     warmStartTimeout,
		Logger:           hclog.NewNullLogger(),
	})
	p := &process{key: key, home: sockDir, sockDir: sockDir, cmd: cmd, client: client}
	started := make(chan error, 1)
	go func() {
		_, err := client.Start()
		started <- err
	}()
	select {
	case err = <-started:
		if err != nil {
			p.kill()
		}
	case <-ctx.Done():
		err = ctx.Err()
		go func() { // cmd is started or given up within warmStartTimeout: kill it then
			<-started
			p.kill()
		}()
	}
	if err != nil {
		return nil, fmt.Errorf("warm provider %s: %w", pb.Address, err)
	}
	rc := client.ReattachConfig()
	p.config = tfexec.ReattachConfig{
		Protocol: string(rc.Protocol), ProtocolVersion: client.NegotiatedVersion(), Pid: rc.Pid, Test: true,
		Addr: tfexec.ReattachConfigAddr{Network: rc.Addr.Network(), String: rc.Addr.String()},
	}
	// The name the socket was bound to (which sock_diag lists) is never one a run can connect to.
	if err := p.moveSocket(wp.dir); err != nil {
		p.kill()
		return nil, fmt.Errorf("warm provider %s: %w", pb.Address, err)
	}
	wp.mu.Lock()
	wp.started++
	wp.mu.Unlock()
	return p, nil
}

// moveSocket renames the process's listening socket into a new directory of base named by 128
// random bits (socketDir: where a socket's path fits), removes the directory it was in unless that
// is the process's home, and records the new path in p.config and p.sockDir. The process goes on
// accepting on the socket it bound (a rename keeps the inode, which connect(2) resolves), but no
// earlier path reaches it: neither the name it was bound to, which NETLINK_SOCK_DIAG tells anyone
// in the pod (ss -xl), nor a path an earlier run was told. It fails when the rename does.
func (p *process) moveSocket(base string) error {
	dir, err := secretDir(base)
	if err != nil {
		return err
	}
	to := filepath.Join(dir, filepath.Base(p.config.Addr.String))
	if err := os.Rename(p.config.Addr.String, to); err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("moving its socket: %w", err)
	}
	if p.sockDir != p.home {
		_ = os.RemoveAll(p.sockDir)
	}
	p.sockDir, p.config.Addr.String = dir, to
	return nil
}

// gone reports a process that has exited.
func (p *process) gone() bool { return p.client.Exited() }

// kill ends the process's group (SIGKILL) and removes its home and its socket's directory; the
// go-plugin client reaps the process.
func (p *process) kill() {
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	_ = os.RemoveAll(p.sockDir)
	_ = os.RemoveAll(p.home)
}

// secretDir makes (mode 0700) and returns a new directory named by 128 random bits in base, or,
// when a socket's path in it would not fit, in the temporary directory (socketDir).
func secretDir(base string) (string, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	dir := procs.SocketDir(filepath.Join(base, base64.RawURLEncoding.EncodeToString(secret)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}
