package lifecycle_test

import (
	"io"
	"net"
	"sync"

	. "github.com/onsi/gomega"
)

// cutter is a TCP proxy the test controls, between a runner and the manager's run protocol: cut
// closes every connection it carries and refuses new ones, as a partition does. The runner's state
// requests go to the state server directly and still pass: the runner is cut off, not dead.
type cutter struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

// startCutter listens on a loopback port and forwards each connection to target until cut.
func startCutter(target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	c := &cutter{ln: ln, target: target}
	go c.serve()
	return c
}

func (c *cutter) addr() string { return c.ln.Addr().String() }

func (c *cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", c.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		c.mu.Lock()
		if c.cut {
			c.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			continue
		}
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// cutOff closes the listener and every connection: nothing passes from now on.
func (c *cutter) cutOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	_ = c.ln.Close()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
}
