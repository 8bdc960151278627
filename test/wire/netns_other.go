//go:build !linux

package wire

import (
	"errors"
	"os/exec"
)

const (
	netnsDir   = "/run/netns"
	namePrefix = "iadw"
)

var errNotLinux = errors.New("network namespaces need Linux")

// Unavailable says why this machine cannot run the bed.
func Unavailable() string { return errNotLinux.Error() }

// Clients are the client namespaces of live beds: none here.
func Clients() []string { return nil }

func ip(args ...string) error { return exec.Command("ip", args...).Run() }

func inNetns(string, func() error) error                { return errNotLinux }
func sweep()                                            {}
func removeNetns(string)                                {}
func startWatchdog([]string) (disarm func(), err error) { return nil, errNotLinux }
