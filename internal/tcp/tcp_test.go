package tcp

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDialerSetsUserTimeoutAndKeepalive(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := Dialer(20*time.Second).DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var user, keepalive, idle, intvl, cnt int
	var gerr error
	_ = raw.Control(func(fd uintptr) {
		get := func(level, opt int) int {
			v, err := unix.GetsockoptInt(int(fd), level, opt)
			if err != nil {
				gerr = err
			}
			return v
		}
		user = get(unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		keepalive = get(syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		idle = get(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
		intvl = get(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)
		cnt = get(unix.IPPROTO_TCP, unix.TCP_KEEPCNT)
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if user != 20000 || keepalive != 1 || idle != 5 || intvl != 5 || cnt != 3 {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d, idle %d s, interval %d s, count %d; want 20000, 1, 5, 5, 3",
			user, keepalive, idle, intvl, cnt)
	}
}

func TestDialerZeroLeavesSystemDefaults(t *testing.T) {
	t.Parallel()
	if d := Dialer(0); d.Control != nil || d.KeepAliveConfig.Enable {
		t.Fatalf("Dialer(0) changes socket options: %+v", d)
	}
}
