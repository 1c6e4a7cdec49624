package harness

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// socketOwner finds which of pids owns the client end of a TCP connection
// from 127.0.0.1:clientPort to 127.0.0.1:serverPort: the socket's inode
// from /proc/net/tcp{,6}, then the process whose fd table holds it. Every
// node connects from 127.0.0.1, so this is the only way a proxy shared by
// all of a node's peers tells them apart (see docs/reliability.md). It
// needs no privilege for processes of the same user.
func socketOwner(clientPort, serverPort int, pids []int) (int, error) {
	inode, err := socketInode(clientPort, serverPort)
	if err != nil {
		return 0, err
	}
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	for _, pid := range pids {
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == want {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("harness: no node owns socket %d (port %d)", inode, clientPort)
}

// socketInode reads the inode of the socket whose local port is local and
// remote port remote.
func socketInode(local, remote int) (uint64, error) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			if hexPort(fields[1]) == local && hexPort(fields[2]) == remote {
				inode, err := strconv.ParseUint(fields[9], 10, 64)
				if err == nil && inode != 0 {
					f.Close()
					return inode, nil
				}
			}
		}
		f.Close()
	}
	return 0, fmt.Errorf("harness: no socket 127.0.0.1:%d -> :%d", local, remote)
}

// hexPort is the port of a /proc/net/tcp address ("0100007F:1F90").
func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(p)
}

// ProxySupported says whether fault proxies can tell nodes apart here.
func ProxySupported() error {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		return fmt.Errorf("harness: /proc/net/tcp unreadable: %w", err)
	}
	return nil
}
