//go:build !linux

package harness

import "errors"

var errNoProc = errors.New("harness: fault proxies need Linux's /proc to tell nodes apart")

func socketOwner(clientPort, serverPort int, pids []int) (int, error) { return 0, errNoProc }

// ProxySupported says whether fault proxies can tell nodes apart here.
func ProxySupported() error { return errNoProc }
