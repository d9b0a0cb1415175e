package warm

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
)

// listening is a listening Unix socket as sock_diag reports it: its bound name and its inode.
type listening struct {
	name string
	ino  uint32
}

// listeningUnixSockets lists the listening Unix sockets of this network namespace as any
// unprivileged process can (ss -xl): a NETLINK_SOCK_DIAG dump of AF_UNIX sockets in state
// TCP_LISTEN with UDIAG_SHOW_NAME (linux/unix_diag.h). Abstract names start with "@".
func listeningUnixSockets(t *testing.T) []listening {
	t.Helper()
	const (
		udiagShowName = 0x1 // UDIAG_SHOW_NAME
		unixDiagName  = 0   // UNIX_DIAG_NAME
		tcpListen     = 10  // TCP_LISTEN
	)
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		t.Fatalf("sock_diag socket: %v", err)
	}
	defer unix.Close(fd)
	var req bytes.Buffer
	// struct nlmsghdr, then struct unix_diag_req {family, protocol, pad, states, ino, show, cookie[2]}.
	_ = binary.Write(&req, binary.NativeEndian, unix.NlMsghdr{
		Len: unix.SizeofNlMsghdr + 24, Type: unix.SOCK_DIAG_BY_FAMILY, Flags: unix.NLM_F_REQUEST | unix.NLM_F_DUMP, Seq: 1,
	})
	_ = binary.Write(&req, binary.NativeEndian, struct {
		Family, Protocol uint8
		Pad              uint16
		States, Ino      uint32
		Show             uint32
		Cookie           [2]uint32
	}{Family: unix.AF_UNIX, States: 1 << tcpListen, Show: udiagShowName})
	if err := unix.Sendto(fd, req.Bytes(), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatalf("sock_diag request: %v", err)
	}
	var names []listening
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			t.Fatalf("sock_diag answer: %v", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			t.Fatalf("sock_diag answer: %v", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return names
			case unix.NLMSG_ERROR:
				t.Fatalf("sock_diag answered an error")
			}
			// struct unix_diag_msg {family, type, state, pad u8; ino u32; cookie [2]u32} is 16
			// bytes, then attributes (struct rtattr, 4-byte aligned).
			if len(m.Data) < 16 {
				continue
			}
			ino := binary.NativeEndian.Uint32(m.Data[4:8])
			for attrs := m.Data[16:]; len(attrs) >= 4; {
				l := int(binary.NativeEndian.Uint16(attrs[0:2]))
				if l < 4 || l > len(attrs) {
					break
				}
				if binary.NativeEndian.Uint16(attrs[2:4]) == unixDiagName {
					name := strings.TrimRight(string(attrs[4:l]), "\x00")
					if strings.HasPrefix(name, "\x00") {
						name = "@" + name[1:]
					}
					names = append(names, listening{name: name, ino: ino})
				}
				attrs = attrs[(l+3)&^3:]
			}
		}
	}
}

// markedOwner reports whether a process that carries procs.EnvWorkspace=dir (the mark of every
// process a Providers made with New(dir)) holds the socket whose inode is ino: it reads
// /proc/<pid>/fd and /proc/<pid>/environ of the processes this user may read. Other test binaries
// run at once (go test runs packages in parallel) and their runs' providers listen too; only the
// sockets of this Providers are the probe's.
func markedOwner(dir string, ino uint32) bool {
	want := "socket:[" + strconv.FormatUint(uint64(ino), 10) + "]"
	mark := []byte(procs.EnvWorkspace + "=" + filepath.Clean(dir))
	pids, _ := os.ReadDir("/proc")
	for _, p := range pids {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l != want {
				continue
			}
			env, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "environ"))
			for _, kv := range bytes.Split(env, []byte{0}) {
				if bytes.Equal(kv, mark) {
					return true
				}
			}
			return false
		}
	}
	return false
}

// TestWarmProviderSocketsFoundAreDead: what an attacker in the pod learns of the warm providers'
// sockets leads to none of them. It lists the listening sockets through sock_diag, as ss -xl
// does, while a run holds a warm provider and after it gave it back, and connects to every one of
// the warm providers' directories: each connect is refused, and the path the run was told stops
// reaching the process once the run gave it back. The run's own path reaches it while it holds it.
// Before, the bound name was the path runs were told: listed, it reached the process.
func TestWarmProviderSocketsFoundAreDead(t *testing.T) {
	wp := New(t.TempDir())
	defer wp.Close()
	pb := randomProvider(t)
	env := map[string]string{"PATH": os.Getenv("PATH")}

	info, _, release, err := wp.Checkout(t.Context(), []Binary{pb}, lockFor(t, pb), Owner{Tenant: "team-a", Class: "c1", Source: "./m", Version: "v1"}, env)
	if err != nil {
		t.Fatal(err)
	}
	told := info[pb.Address].Addr.String
	dial := func(path string) error {
		c, err := net.DialTimeout("unix", path, 2*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(told); err != nil {
		t.Fatalf("the run cannot reach its warm provider at %s: %v", told, err)
	}
	probe := func(when string) {
		found := 0
		for _, l := range listeningUnixSockets(t) {
			if !markedOwner(wp.dir, l.ino) {
				continue
			}
			found++
			if err := dial(l.name); err == nil {
				t.Errorf("%s: the socket %s that sock_diag lists reaches a warm provider", when, l.name)
			}
		}
		if found == 0 {
			t.Fatalf("%s: sock_diag listed no warm provider's socket: the probe probes nothing", when)
		}
	}
	probe("while a run holds it")
	release(true)
	if err := dial(told); err == nil {
		t.Errorf("the path %s the run was told still reaches the provider after the run gave it back", told)
	}
	probe("once given back")

	// The next run is told a path that reaches the same process.
	info, _, release, err = wp.Checkout(t.Context(), []Binary{pb}, lockFor(t, pb), Owner{Tenant: "team-a", Class: "c1", Source: "./m", Version: "v1"}, env)
	if err != nil {
		t.Fatal(err)
	}
	defer release(true)
	if wp.Started() != 1 {
		t.Errorf("started %d processes, want the one reused", wp.Started())
	}
	if next := info[pb.Address].Addr.String; next == told || dial(next) != nil {
		t.Errorf("the next run was told %s (the first run's was %s), reachable: %v", next, told, dial(next))
	}
}
