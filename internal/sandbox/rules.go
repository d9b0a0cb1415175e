package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Landlock rights, by what a grant is for.
const (
	readFile  = llsys.AccessFSExecute | llsys.AccessFSReadFile
	readDir   = readFile | llsys.AccessFSReadDir
	writeFile = readFile | llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev
	writeDir  = readDir | writeFile | llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile | llsys.AccessFSMakeDir |
		llsys.AccessFSMakeReg | llsys.AccessFSMakeSock | llsys.AccessFSMakeFifo | llsys.AccessFSMakeSym |
		llsys.AccessFSRefer | llsys.AccessFSResolveUnix
	// devices: read and write the device files that exist (a shell's "> /dev/null" truncates).
	devices = llsys.AccessFSReadFile | llsys.AccessFSWriteFile | llsys.AccessFSReadDir |
		llsys.AccessFSTruncate | llsys.AccessFSIoctlDev
	connect = llsys.AccessFSResolveUnix
)

// handled is every file system right the kernel may know of (Landlock ABI 9): a right the kernel
// lacks is dropped by BestEffort, one it has is refused wherever no rule grants it.
var handled = landlock.AccessFSSet(readDir | writeDir)

// Restrict confines this process, and every process it starts from then on, to access (with System
// and Devices), minus hide. It returns ErrUnavailable without Landlock, and an error when a hidden
// path resolves to the root directory or Landlock refuses the rules.
func Restrict(access Access, hide []string) error {
	if ABI() < 1 {
		return ErrUnavailable
	}
	hide, err := absolute(hide, true)
	if err != nil {
		return err
	}
	if slices.Contains(hide, "/") {
		return errors.New("the root directory cannot be hidden")
	}
	rules := rulesFor(access, hide)
	cfg := landlock.Config{
		HandledAccessFS: handled,
		Scoped:          landlock.ScopedSet(llsys.ScopeSignal | llsys.ScopeAbstractUnixSocket),
	}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// grants collects the rules of one command.
type grants struct {
	hide      []string        // resolved absolute paths
	ancestors map[string]bool // every directory above a hidden path
	rules     []landlock.Rule
	seen      map[string]bool // read grants already walked (symbolic links may loop)
	abi       int
}

// rulesFor returns the Landlock rules of access with System and Devices, hide (resolved absolute
// paths) left out of every read grant.
func rulesFor(access Access, hide []string) []landlock.Rule {
	g := &grants{hide: hide, ancestors: map[string]bool{}, seen: map[string]bool{}, abi: ABI()}
	for _, h := range hide {
		for d := filepath.Dir(h); ; d = filepath.Dir(d) {
			g.ancestors[d] = true
			if d == "/" {
				break
			}
		}
	}
	for _, p := range slices.Concat(System, SystemFiles, access.Read) {
		g.read(p)
	}
	g.add(Devices, devices, devices)
	for _, p := range access.Trusted {
		g.add(p, readDir, readFile)
	}
	for _, p := range access.Write {
		g.add(p, writeDir, writeFile)
	}
	for _, p := range access.Connect {
		g.add(p, connect, 0)
	}
	return g.rules
}

// hidden reports whether p (resolved) is hidden or inside a hidden path.
func (g *grants) hidden(p string) bool {
	for _, h := range g.hide {
		if p == h || strings.HasPrefix(p, h+"/") {
			return true
		}
	}
	return false
}

// read grants reading and executing p, except what is hidden: a directory that holds a hidden path
// is granted listing only, and its entries one by one. A symbolic link is followed to its target.
func (g *grants) read(p string) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil || g.hidden(r) || g.seen[r] {
		return
	}
	g.seen[r] = true
	if !g.ancestors[r] {
		g.add(r, readDir, readFile)
		return
	}
	g.add(r, llsys.AccessFSReadDir, 0)
	entries, err := os.ReadDir(r)
	if err != nil {
		return // a directory this process cannot list: nothing in it is granted
	}
	for _, e := range entries {
		g.read(filepath.Join(r, e.Name()))
	}
}

// add grants p (resolved) dirRights when it is a directory and fileRights otherwise; nothing when
// p does not exist or the rights are empty.
func (g *grants) add(p string, dirRights, fileRights landlock.AccessFSSet) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return
	}
	fi, err := os.Stat(r)
	if err != nil {
		return
	}
	rights := fileRights
	if fi.IsDir() {
		rights = dirRights
	}
	if rights == 0 {
		return
	}
	if g.abi < 2 {
		// go-landlock gives up the whole domain for a rule with "refer" on ABI 1 (it cannot be
		// granted there): leave it out, renames across directories stay refused.
		rights &^= llsys.AccessFSRefer
	}
	g.rules = append(g.rules, landlock.PathAccess(rights, r))
}
